//! The accept loop: TCP → optional TLS (bounded) → hyper HTTP/1.1 with upgrades,
//! serving the axum router with the peer address attached to every request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, warn};

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

/// Accept until `shutdown`, serving each connection on `tasks`.
pub async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    setup_timeout: Duration,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(v) => v,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let shutdown = shutdown.clone();
        let acceptor = acceptor.clone();
        tasks.spawn(async move {
            match acceptor {
                None => serve_connection(stream, peer, app, setup_timeout, shutdown).await,
                Some(acceptor) => {
                    let handshake = tracing::Instrument::instrument(
                        tokio::time::timeout(setup_timeout, acceptor.accept(stream)),
                        tracing::debug_span!("tls_accept", %peer),
                    );
                    match handshake.await {
                        Ok(Ok(tls)) => {
                            serve_connection(tls, peer, app, setup_timeout, shutdown).await
                        }
                        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    app: Router,
    setup_timeout: Duration,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = app.map_request(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    });
    let service = TowerToHyperService::new(service);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(setup_timeout)
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
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
