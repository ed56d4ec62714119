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
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, warn};

use super::read_ahead::ReadAhead;
use super::setup::{SetupSlot, SetupSlots};

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

/// Accept until `shutdown`, serving each connection on `tasks`. At most
/// `max_in_setup` connections are in TLS/HTTP setup at once (see [`super::setup`]),
/// and each must finish setup within `setup_timeout`.
pub async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    setup_timeout: Duration,
    max_in_setup: usize,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let slots = SetupSlots::new(
        max_in_setup,
        silent_after(setup_timeout),
        evict_after(setup_timeout),
    );
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
        // A place in setup for this connection. At the cap this waits, and the
        // connections behind it wait in the backlog.
        let slot = tokio::select! {
            slot = slots.admit(super::setup::probe(&stream)) => slot,
            _ = shutdown.cancelled() => break,
        };
        let stream = slot.watch(stream);
        let setup = Setup {
            slot: Arc::new(slot),
            deadline: Instant::now() + setup_timeout,
            timeout: setup_timeout,
        };
        let app = app.clone();
        let shutdown = shutdown.clone();
        let acceptor = acceptor.clone();
        let connection = async move {
            match acceptor {
                None => serve_connection(ReadAhead::new(stream), peer, app, setup, shutdown).await,
                Some(acceptor) => {
                    let handshake = tracing::Instrument::instrument(
                        acceptor.accept(stream),
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
                            serve_connection(ReadAhead::new(tls), peer, app, setup, shutdown).await
                        }
                        Err(e) => debug!(%peer, error = %e, "TLS handshake failed"),
                    }
                }
            }
        };
        // A panic in a handler ends this connection only, and is counted.
        tasks.spawn(async move {
            if let Err(panic) = AssertUnwindSafe(connection).catch_unwind().await {
                crate::telemetry::metrics::task_panicked("http_connection", panic.as_ref());
            }
        });
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
