//! The accept loop: TCP → optional TLS (bounded) → hyper HTTP/1.1 with upgrades,
//! serving the axum router with the peer address attached to every request.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use futures_util::FutureExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, warn};

use super::admission::{Waiting, WaitingRoom};
use super::read_ahead::ReadAhead;
use super::setup::{PeerKey, SetupSlot, SetupSlots};
use super::write_stall::WriteStall;

/// Listen backlog for the public listener.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Bind a TCP listener with our backlog.
pub fn bind_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How the listener treats connections before their first request.
#[derive(Debug, Clone)]
pub struct ListenerLimits {
    /// TLS handshake and first request headers, from the moment a place is taken.
    pub setup_timeout: Duration,
    /// How long a write to a peer may be refused before the connection ends.
    pub write_stall: Duration,
    /// Places in setup, in all and per client address ([`super::setup`]).
    pub max_in_setup: usize,
    pub max_in_setup_per_peer: usize,
    /// Proxies whose connections each count as a peer of their own.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// Accept until `shutdown`, serving each connection on `tasks`. Connections take a
/// place in setup ([`super::setup`]) in turn per client address, waiting for one
/// meanwhile ([`super::admission`]); each must finish setup within the setup
/// timeout from then on.
pub async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    limits: ListenerLimits,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let slots = SetupSlots::new(
        limits.max_in_setup,
        limits.max_in_setup_per_peer,
        silent_after(limits.setup_timeout),
        evict_after(limits.setup_timeout),
    );
    let mut room = WaitingRoom::default();
    let mut proxied_connections = 0u64;
    loop {
        // Hand out every place there is, in turn per address.
        let retry = loop {
            match room.admit_next(&slots) {
                Ok((waiting, slot)) => {
                    let connection = connection(waiting, slot, &tls, &app, &limits, &shutdown);
                    // A panic in a handler ends this connection only, and is counted.
                    tasks.spawn(async move {
                        if let Err(panic) = AssertUnwindSafe(connection).catch_unwind().await {
                            crate::telemetry::metrics::task_panicked(
                                "http_connection",
                                panic.as_ref(),
                            );
                        }
                    });
                }
                Err(wait) => break (!room.is_empty()).then_some(wait),
            }
        };
        let freed = slots.freed();
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let proxied = limits.trusted_proxies.iter().any(|n| n.contains(&peer.ip().to_canonical()));
                    let key = PeerKey::of(peer.ip(), proxied.then(|| {
                        proxied_connections += 1;
                        proxied_connections
                    }));
                    if let Err((refused, why)) = room.push(Waiting { stream, peer, key }) {
                        metrics::counter!(crate::telemetry::metrics::SETUP_DROPPED, "reason" => why.label())
                            .increment(1);
                        debug!(peer = %refused.peer, reason = why.label(), "connection dropped before setup");
                    }
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = freed, if retry.is_some() => room.place_freed(),
            _ = tokio::time::sleep(retry.unwrap_or(Duration::ZERO)), if retry.is_some() => {}
            _ = shutdown.cancelled() => break,
        }
    }
}

/// One connection's life from its place in setup: TLS (when configured), then HTTP.
fn connection(
    waiting: Waiting,
    slot: SetupSlot,
    tls: &Option<Arc<rustls::ServerConfig>>,
    app: &Router,
    limits: &ListenerLimits,
    shutdown: &CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    let Waiting { stream, peer, .. } = waiting;
    let stream = slot.watch(stream);
    let setup = Setup {
        slot: Arc::new(slot),
        deadline: Instant::now() + limits.setup_timeout,
        timeout: limits.setup_timeout,
    };
    let (app, shutdown, tls) = (app.clone(), shutdown.clone(), tls.clone());
    let write_stall = limits.write_stall;
    async move {
        match tls {
            None => {
                let io = ReadAhead::new(WriteStall::new(stream, write_stall));
                serve_connection(io, peer, app, setup, shutdown).await
            }
            Some(config) => {
                let handshake = tracing::Instrument::instrument(
                    super::tls_stream::accept(stream, config),
                    tracing::debug_span!("tls_accept", %peer),
                );
                let tls = tokio::select! {
                    r = handshake => r,
                    why = setup.over() => {
                        debug!(%peer, why, "dropped during TLS handshake");
                        return;
                    }
                    _ = shutdown.cancelled() => return,
                };
                match tls {
                    Ok(tls) => {
                        let io = ReadAhead::new(WriteStall::new(tls, write_stall));
                        serve_connection(io, peer, app, setup, shutdown).await
                    }
                    Err(e) => debug!(%peer, error = %e, "TLS handshake failed"),
                }
            }
        }
    }
}

/// How long a connection that has sent nothing may keep the server waiting before a
/// newer one may push it out at the cap: a real client speaks within a round trip.
fn silent_after(setup_timeout: Duration) -> Duration {
    (setup_timeout / 5).min(Duration::from_secs(1))
}

/// How long in all a connection that is sending may keep the server waiting for its
/// bytes before a newer one may push it out at the cap: far more than a real
/// handshake's round trips.
fn evict_after(setup_timeout: Duration) -> Duration {
    setup_timeout / 2
}

/// A connection's setup phase: its place among connections in setup and the time
/// by which its first request's headers must have arrived.
struct Setup {
    slot: Arc<SetupSlot>,
    deadline: Instant,
    /// Also bounds the headers of later requests on a kept-alive connection.
    timeout: Duration,
}

impl Setup {
    /// Resolves when setup must be abandoned: pushed out by newer connections, or
    /// out of time. Never resolves once setup is done.
    async fn over(&self) -> &'static str {
        tokio::select! {
            _ = self.slot.evicted.cancelled() => "evicted at the setup cap",
            _ = tokio::time::sleep_until(self.deadline) => {
                metrics::counter!(crate::telemetry::metrics::SETUP_TIMEOUTS).increment(1);
                "setup timeout"
            }
            _ = self.slot.finished.cancelled() => std::future::pending().await,
        }
    }
}

async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    app: Router,
    setup: Setup,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = setup.slot.clone();
    let service = app.map_request(move |mut request: hyper::Request<hyper::body::Incoming>| {
        // The first request's headers are in: setup is over for this connection.
        slot.done();
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    });
    let service = TowerToHyperService::new(service);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(setup.timeout)
        .max_buf_size(64 * 1024);
    let connection = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        r = connection.as_mut() => {
            if let Err(e) = r {
                debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        }
        why = setup.over() => debug!(%peer, why, "dropped before its first request"),
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
