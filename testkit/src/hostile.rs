//! Clients that hold the server's setup places without completing: real sockets
//! that misbehave on purpose, for the setup cap and timeout tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connect over plain TCP, send a request line at once, then one header byte every
/// 100 ms, never finishing the headers. The task ends when the server ends the
/// connection (counted in `closed`) or after `give_up`.
pub async fn dribble_headers(
    addr: SocketAddr,
    closed: Arc<AtomicUsize>,
    give_up: Duration,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await?;
    Ok(tokio::spawn(async move {
        let mut buf = [0u8; 256];
        let end = tokio::time::Instant::now() + give_up;
        while tokio::time::Instant::now() < end {
            if stream.write_all(b"X").await.is_err() {
                break;
            }
            let read =
                tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await;
            if let Ok(Ok(0) | Err(_)) = read {
                break;
            }
        }
        closed.fetch_add(1, Ordering::Relaxed);
    }))
}
