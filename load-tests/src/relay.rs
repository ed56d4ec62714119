//! The bare relay baseline: a minimal tokio-tungstenite relay with no auth, no store
//! and no sessions, on tungstenite's default settings. Device sockets connect and
//! wait (their frames are read and dropped, pings answered); each agent socket that
//! connects is paired with the longest-waiting device, and from then on every agent
//! frame is written to that device and every device frame to the agent. Figures for
//! latchkeyd are reported as ratios to this, measured in the same run with the same
//! client. Optionally behind TLS with the same kind of certificate as latchkeyd.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::{WebSocketStream, accept_async};

/// The line `serve-relay` prints once it listens: `relay ready devices=… agents=…`.
pub const READY: &str = "relay ready";

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
type Ws = WebSocketStream<Box<dyn Io>>;

/// Sockets waiting for a partner: devices (by the channel that hands them an
/// agent) and agents that arrived before any device was free.
#[derive(Default)]
struct Lobby {
    devices: VecDeque<oneshot::Sender<Ws>>,
    agents: VecDeque<Ws>,
}
type Waiting = Arc<Mutex<Lobby>>;

/// latchkeyd's own TLS server config from the same PEM files: the relay does
/// exactly the TLS work latchkeyd does, so a handshake figure compares the rest.
pub fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let files = latchkey_server::config::TlsFiles {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
    };
    Ok(latchkey_server::transport::tls::load_server_config(&files)?)
}

/// Start the relay on two loopback ports; returns (device address, agent address).
pub async fn start(
    tls: Option<Arc<rustls::ServerConfig>>,
) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let devices = TcpListener::bind("127.0.0.1:0").await?;
    let agents = TcpListener::bind("127.0.0.1:0").await?;
    let addrs = (devices.local_addr()?, agents.local_addr()?);
    let acceptor = tls.map(TlsAcceptor::from);
    let waiting: Waiting = Arc::default();
    tokio::spawn(accept(
        devices,
        acceptor.clone(),
        waiting.clone(),
        Side::Device,
    ));
    tokio::spawn(accept(agents, acceptor, waiting, Side::Agent));
    Ok(addrs)
}

/// `latchkey-load serve-relay`: run the relay until killed.
pub async fn serve(cert: Option<&Path>, key: Option<&Path>) -> anyhow::Result<()> {
    let tls = match (cert, key) {
        (Some(c), Some(k)) => Some(tls_config(c, k).context("relay TLS files")?),
        _ => None,
    };
    let (devices, agents) = start(tls).await?;
    println!("{READY} devices={devices} agents={agents}");
    std::future::pending::<()>().await;
    Ok(())
}

#[derive(Clone, Copy)]
enum Side {
    Device,
    Agent,
}

async fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, waiting: Waiting, side: Side) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let tls = tls.clone();
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let io: Box<dyn Io> = match tls {
                None => Box::new(tcp),
                Some(acceptor) => match acceptor.accept(tcp).await {
                    Ok(stream) => Box::new(stream),
                    Err(_) => return,
                },
            };
            let Ok(ws) = accept_async(io).await else {
                return;
            };
            match side {
                Side::Device => device(ws, waiting).await,
                Side::Agent => agent(ws, waiting),
            }
        });
    }
}

/// Hold a device socket until an agent is paired with it, then relay.
async fn device(mut ws: Ws, waiting: Waiting) {
    let (tx, mut rx) = oneshot::channel();
    let ready = {
        let mut lobby = waiting.lock().unwrap_or_else(|p| p.into_inner());
        let agent = lobby.agents.pop_front();
        if agent.is_none() {
            // Devices that left are dropped now and then, so churn cannot grow it.
            if lobby.devices.len() % 1024 == 1023 {
                lobby.devices.retain(|d| !d.is_closed());
            }
            lobby.devices.push_back(tx);
        }
        agent
    };
    if let Some(agent) = ready {
        return relay(ws, agent).await;
    }
    let agent = loop {
        tokio::select! {
            agent = &mut rx => match agent {
                Ok(agent) => break agent,
                Err(_) => return,
            },
            msg = ws.next() => if !matches!(msg, Some(Ok(_))) {
                return;
            },
        }
    };
    relay(ws, agent).await;
}

/// Hand an agent socket to the longest-waiting device still there, or wait for one.
fn agent(mut ws: Ws, waiting: Waiting) {
    let mut lobby = waiting.lock().unwrap_or_else(|p| p.into_inner());
    while let Some(device) = lobby.devices.pop_front() {
        match device.send(ws) {
            Ok(()) => return,
            Err(back) => ws = back,
        }
    }
    lobby.agents.push_back(ws);
}

async fn relay(device: Ws, agent: Ws) {
    let (mut device_tx, mut device_rx) = device.split();
    let (mut agent_tx, mut agent_rx) = agent.split();
    let up = async {
        while let Some(Ok(m)) = agent_rx.next().await {
            if m.is_text() && device_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    let down = async {
        while let Some(Ok(m)) = device_rx.next().await {
            if m.is_text() && agent_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}
