//! Real protocol peers for Latchkey tests: [`TestServer`] (the real `latchkeyd` on
//! 127.0.0.1:0 with a temporary SQLite file or a fresh PostgreSQL database, plain or
//! with rcgen TLS), [`FakeExtension`] (pairs through the real endpoints and speaks
//! the extension protocol over a real socket), [`AdminClient`], and [`wait_until`].
//! Nothing here mocks the server.

pub mod admin;
pub mod agent;
pub mod agent_socket;
pub mod browser;
pub mod cluster;
pub mod console;
pub mod daemon;
pub mod database;
pub mod echo;
pub mod extension;
pub mod hostile;
pub mod logs;
pub mod mcp;
pub mod metrics;
pub mod nats;
pub mod nginx;
mod peers;
pub mod raw_ws;
pub mod receiver;
pub mod server;
pub mod tls;

use std::future::Future;
use std::time::Duration;

pub use admin::AdminClient;
pub use agent::{CallOutcome, EventStream, FakeAgent};
pub use agent_socket::AgentSocket;
pub use browser::{Action, FakeBrowser, Script};
pub use console::ConsoleClient;
pub use daemon::Daemon;
pub use extension::{ExtensionSocket, FakeExtension, SessionOnBrowser};
pub use mcp::{Connections, McpClient, Revision};
pub use nats::NatsServer;
pub use nginx::{Nginx, NginxOptions};
pub use reqwest;
pub use server::{
    Backend, POOL_IDLE, ScratchDatabase, TestServer, TestServerBuilder, http_builder, http_client,
};
pub use tokio_tungstenite;

/// Retry `attempt` while the server answers 503 (a busy SQLite writer, capacity), as
/// a real client honouring `Retry-After` does; at most 50 times, 200 ms apart. Any
/// other failure, or a 503 that outlasts that, is returned.
pub async fn retry_unavailable<T, F, Fut>(mut attempt: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(e) if tries < 50 && e.to_string().contains("HTTP 503") => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

/// Poll `condition` until it holds or `deadline` passes. Returns whether it held.
/// The only sanctioned way to wait in tests: no bare sleeps as synchronisation.
pub async fn wait_until<F, Fut>(deadline: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Install the process-wide rustls provider once (as `main` does).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Generate one test per storage backend from an `async fn(Backend)`.
///
/// ```ignore
/// backend_tests!(pairing_works, |backend| async move { ... });
/// ```
#[macro_export]
macro_rules! backend_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                ($body)($crate::Backend::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(backend) = $crate::Backend::postgres().await {
                    ($body)(backend).await;
                }
            }
        }
    };
}
