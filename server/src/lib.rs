//! latchkey-server: the `latchkeyd` gateway as a library.
//!
//! [`bind`] opens the store, applies migrations, bootstraps the first tenant on an
//! empty store, binds the listener and returns a [`ServerHandle`] with the bound
//! address and a graceful [`ServerHandle::shutdown`]. `main` only parses arguments,
//! sets up logging and calls it; tests call it with port 0.

pub(crate) mod admin;
pub(crate) mod agent;
pub(crate) mod api_error;
pub mod app;
pub(crate) mod audit;
pub mod audit_chain;
pub mod audit_keeping;
pub mod audit_keys;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod console;
pub(crate) mod core;
pub(crate) mod core_error;
#[cfg(test)]
mod core_testing;
pub(crate) mod delegation;
pub mod devices;
pub mod extension;
pub mod ids;
pub mod mcp;
pub mod openapi;
/// Signing-key generation, for the operator's rotation and for tests.
pub use delegation::keys as delegation_keys;
pub(crate) mod failpoint;
pub(crate) mod policy;
pub mod rate_limits;
pub(crate) mod sessions;
pub(crate) mod socket;
pub mod store;
pub mod telemetry;
pub mod transport;
pub mod webhooks;

/// The allocator `latchkeyd` runs on, named here so that every binary running this
/// library (`latchkeyd`, the load generator) runs on the same one: jemalloc, for
/// malloc and free of the whole process (SQLite's and aws-lc's too), not glibc's.
///
/// At load glibc's allocator took a seventh of the server's CPU, and after a burst
/// of short-lived connections it kept more of the freed pages; docs/benchmarks.md
/// ("jemalloc") has the measurements: more calls per core, less memory per idle
/// device in most runs (it varied between two levels, never above glibc's).
#[cfg(feature = "jemalloc")]
pub use tikv_jemallocator::Jemalloc as Allocator;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::AppState;
use crate::audit::Audit;
use crate::auth::bootstrap::{self, BootstrapError, NewTenant};
use crate::clock::Clock;
use crate::config::{Config, ConfigError};
use crate::devices::DeviceRegistry;
use crate::store::{PostgresStore, SqliteStore, Store, StoreError};
use crate::transport::tls::TlsError;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    AuditKey(#[from] audit_keys::AuditKeyError),
    #[error(transparent)]
    Cluster(#[from] cluster::nats::ClusterError),
    #[error("the webhook client cannot start: {0}")]
    Webhooks(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Open the configured store (PostgreSQL when a database URL is set, else SQLite).
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, StoreError> {
    let limits = &config.limits;
    let store: Arc<dyn Store> = match &config.database_url {
        Some(url) => Arc::new(
            PostgresStore::connect(url, Duration::from_millis(limits.pg_acquire_timeout_ms))
                .await?,
        ),
        None => Arc::new(
            SqliteStore::open(
                &config.data_dir,
                Duration::from_millis(limits.sqlite_busy_timeout_ms),
            )
            .await?,
        ),
    };
    Ok(Arc::new(crate::store::TimedStore::new(store)))
}

/// A running server.
pub struct ServerHandle {
    /// The bound address of the public listener.
    pub public_addr: SocketAddr,
    /// `wss://…` or `ws://…` base the extension dials; pairing links start here.
    pub public_base: String,
    /// The admin token created on this start, when the store was empty.
    pub bootstrap: Option<NewTenant>,
    /// Where `/metrics` is served, when enabled.
    pub metrics_addr: Option<SocketAddr>,
    state: AppState,
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("public_addr", &self.public_addr)
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The shared state (tests read the registry, clock and store through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Drain, within the drain timeout: stop accepting (readiness turns false, new
    /// connections, sessions and calls are refused with `server_shutting_down`); give
    /// calls in flight half the budget to finish; then close every socket with 1001,
    /// which answers the calls still waiting with `server_shutting_down`; and wait for
    /// every connection task for the rest.
    pub async fn shutdown(self) {
        let state = &self.state;
        let drain = Duration::from_millis(state.config.limits.drain_timeout_ms);
        let deadline = tokio::time::Instant::now() + drain;
        state.shutdown.cancel();
        let _ = self.accept.await;
        state.calls.close();
        let in_flight = state.calls.len();
        if in_flight > 0 {
            tracing::info!(calls = in_flight, "draining: waiting for calls in flight");
        }
        if tokio::time::timeout(drain / 2, state.calls.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                calls = state.calls.len(),
                "calls still in flight after half the drain timeout: answering them server_shutting_down"
            );
        }
        // Sessions here on browsers whose sockets stay open on other replicas
        // end, and their windows close (docs/cluster.md).
        let remote = cluster::remote::end_remote_sessions(&state.core);
        if remote > 0 {
            tracing::info!(
                sessions = remote,
                "draining: sessions on browsers of other replicas ended"
            );
        }
        state.registry.close_all(state.shutdown_close());
        // The calls the close just failed hand their answers to the agent sockets
        // before those close.
        let _ = tokio::time::timeout_at(deadline, state.calls.wait()).await;
        state.closing.cancel();
        state.tasks.close();
        if tokio::time::timeout_at(deadline, state.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("drain timeout reached with connections still open");
        }
        // What the sockets' ends told the other replicas goes out now.
        state.peers.finish().await;
        // Rows queued off the callers' paths (tool calls, session ends) are in
        // the store before the process exits.
        if tokio::time::timeout(Duration::from_secs(5), state.audit.flush())
            .await
            .is_err()
        {
            tracing::warn!("audit rows still queued at exit");
        }
        // Every chain signed as it is at exit, so its last rows are covered.
        match tokio::time::timeout(
            Duration::from_secs(5),
            audit_keeping::checkpoint_all(&state.core),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "audit checkpoints not written at exit"),
            Err(_) => tracing::warn!("audit checkpoints still being written at exit"),
        }
    }
}

fn public_base(config: &Config, bound: SocketAddr) -> String {
    match &config.public_url {
        Some(url) => {
            let url = url.trim_end_matches('/');
            if let Some(rest) = url.strip_prefix("https://") {
                format!("wss://{rest}")
            } else if let Some(rest) = url.strip_prefix("http://") {
                format!("ws://{rest}")
            } else {
                url.to_string()
            }
        }
        None => {
            let scheme = if config.tls.is_some() { "wss" } else { "ws" };
            let host = if config.tls.is_some() && bound.ip().is_loopback() {
                // Certificates name "localhost" more often than an address.
                format!("localhost:{}", bound.port())
            } else {
                bound.to_string()
            };
            format!("{scheme}://{host}")
        }
    }
}

/// Start the server with the system clock.
pub async fn bind(config: Config) -> Result<ServerHandle, BindError> {
    bind_with_clock(config, Clock::system()).await
}

/// Start the server with a given clock (tests move it forward).
pub async fn bind_with_clock(config: Config, clock: Clock) -> Result<ServerHandle, BindError> {
    bind_with_routes(config, clock, axum::Router::new()).await
}

/// Start the server with extra routes on the public listener. Only tests use it:
/// the RFC 6455 conformance suite needs an echo endpoint that runs on the same
/// accept loop, TLS, HTTP and WebSocket settings as the real ones.
pub async fn bind_with_routes(
    config: Config,
    clock: Clock,
    extra_routes: axum::Router<AppState>,
) -> Result<ServerHandle, BindError> {
    config.validate()?;
    let tls = config
        .tls
        .as_ref()
        .map(transport::tls::load_server_config)
        .transpose()?;
    let store = open_store(&config).await?;
    store.migrate().await?;
    let bootstrap =
        bootstrap::bootstrap_if_empty(store.as_ref(), &config.data_dir, clock.now_ms()).await?;
    let listener =
        transport::listener::bind_tcp(config.listen).map_err(|source| BindError::Listen {
            addr: config.listen,
            source,
        })?;
    let public_addr = listener.local_addr().map_err(|source| BindError::Listen {
        addr: config.listen,
        source,
    })?;
    let base = public_base(&config, public_addr);
    let audit_keys = audit_keys::AuditKeys::load(
        store.as_ref(),
        config.audit.signing_key_file.as_deref(),
        clock.now_ms(),
    )
    .await?;
    let (peers, cluster_wiring) = match cluster::nats::connect(&config.cluster).await? {
        Some((peers, wiring)) => (peers, Some(wiring)),
        None => (cluster::Peers::default(), None),
    };
    let core = core::Core {
        audit_keys,
        peers,
        audit: Audit::new(store.clone(), clock.clone()),
        store,
        config: Arc::new(config),
        clock,
        registry: DeviceRegistry::default(),
        sessions: sessions::SessionTable::default(),
        shutdown: CancellationToken::new(),
        closing: CancellationToken::new(),
        calls: TaskTracker::new(),
        team_names: Default::default(),
    };
    let deliverer = webhooks::deliver::Deliverer::new(core.config.webhooks.clone())
        .map_err(|e| BindError::Webhooks(e.to_string()))?;
    let state = AppState::new(core, Arc::from(base.as_str()), Arc::new(deliverer));
    let metrics_addr = match (state.config.metrics_listen, telemetry::metrics::install()) {
        (Some(addr), Some(handle)) => Some(
            telemetry::metrics::serve(addr, handle, state.shutdown.clone())
                .await
                .map_err(|source| BindError::Listen { addr, source })?,
        ),
        _ => None,
    };
    metrics::gauge!(telemetry::metrics::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"))
        .set(1.0);
    let limits = &state.config.limits;
    state
        .tasks
        .spawn(devices::grant_sweep::grant_sweeper(state.core.clone()));
    state.tasks.spawn(sessions::lifetime::idle_reaper(
        state.core.clone(),
        Duration::from_millis(limits.session_idle_timeout_ms),
        Duration::from_millis(limits.session_reaper_interval_ms),
    ));
    state
        .tasks
        .spawn(auth::token_sweep::token_sweeper(state.clone()));
    state
        .tasks
        .spawn(rate_limits::cluster_charges::pruner(state.clone()));
    state.tasks.spawn(audit_keeping::keeper(state.core.clone()));
    state.tasks.spawn(mcp::choices_keeper(state.core.clone()));
    state
        .tasks
        .spawn(devices::expiry_notices::notifier(state.core.clone()));
    state.tasks.spawn(webhooks::deliver::worker(
        state.core.clone(),
        state.webhooks.clone(),
    ));
    state.tasks.spawn(delegation::keys::keep_fresh(
        state.signing_keys.clone(),
        state.core.clone(),
    ));
    if let Some(wiring) = cluster_wiring {
        cluster::nats::spawn(&state, wiring);
    }
    let app = app::router(state.clone(), extra_routes);
    let accept = tokio::spawn(transport::listener::accept_loop(
        listener,
        tls,
        app,
        transport::listener::ListenerLimits {
            setup_timeout: Duration::from_millis(limits.setup_timeout_ms),
            write_stall: Duration::from_millis(limits.write_stall_timeout_ms),
            max_in_setup: limits.max_connections_in_setup,
            max_in_setup_per_peer: limits.max_connections_in_setup_per_peer,
            trusted_proxies: state.config.trusted_proxies.clone(),
        },
        state.shutdown.clone(),
        state.tasks.clone(),
    ));
    tracing::info!(addr = %public_addr, backend = state.store.backend(), public = %base, "latchkeyd listening");
    Ok(ServerHandle {
        public_addr,
        public_base: base,
        bootstrap,
        metrics_addr,
        state,
        accept,
    })
}
