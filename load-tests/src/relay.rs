//! The bare relay baseline: a minimal tokio-tungstenite relay with no auth, no store
//! and no sessions. One device socket and one agent socket; every agent frame is
//! written to the device and every device frame to the agent. Figures for latchkeyd
//! are reported as ratios to this, measured in the same run with the same client.

use std::net::SocketAddr;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpListener;
use tokio_tungstenite::accept_async;

/// Start the relay; returns (device address, agent address).
pub async fn start() -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let devices = TcpListener::bind("127.0.0.1:0").await?;
    let agents = TcpListener::bind("127.0.0.1:0").await?;
    let addrs = (devices.local_addr()?, agents.local_addr()?);
    tokio::spawn(async move {
        let Ok((device, _)) = devices.accept().await else {
            return;
        };
        let Ok(device) = accept_async(device).await else {
            return;
        };
        let Ok((agent, _)) = agents.accept().await else {
            return;
        };
        let Ok(agent) = accept_async(agent).await else {
            return;
        };
        let _ = device.get_ref().set_nodelay(true);
        let _ = agent.get_ref().set_nodelay(true);
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
    });
    Ok(addrs)
}
