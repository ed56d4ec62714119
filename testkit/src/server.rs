//! [`TestServer`]: the real `latchkeyd` library bound on 127.0.0.1:0.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use latchkey_server::clock::Clock;
use latchkey_server::config::{Config, Limits, TlsFiles};
use latchkey_server::{ServerHandle, bind_with_clock};
use sqlx::Connection;

use crate::tls::TestCerts;

/// Where the server under test keeps its data.
#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite,
    /// A database of its own on the machine's PostgreSQL.
    Postgres {
        admin_url: String,
    },
}

/// The PostgreSQL server tests use; override with `LATCHKEY_TEST_PG_URL`.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn pg_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("LATCHKEY_REQUIRE_PG").is_some()
}

impl Backend {
    /// PostgreSQL if reachable. In CI (or with `LATCHKEY_REQUIRE_PG`) an unreachable
    /// server fails the test; elsewhere it is skipped, loudly.
    pub async fn postgres() -> Option<Backend> {
        let admin_url =
            std::env::var("LATCHKEY_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_string());
        match sqlx::PgConnection::connect(&admin_url).await {
            Ok(conn) => {
                let _ = conn.close().await;
                Some(Backend::Postgres { admin_url })
            }
            Err(e) => {
                assert!(
                    !pg_required(),
                    "PostgreSQL is required here but not reachable at {admin_url}: {e}"
                );
                eprintln!(
                    "\n!!! SKIPPED: PostgreSQL not reachable at {admin_url} ({e}); \
                     set LATCHKEY_REQUIRE_PG=1 to make this a failure !!!\n"
                );
                None
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres { .. } => "postgres",
        }
    }
}

/// A fresh database on the PostgreSQL server, dropped by [`TestServer::stop`] (or
/// [`ScratchDatabase::drop_database`]). Databases left behind by crashed runs are
/// dropped after two hours.
#[derive(Debug)]
pub struct ScratchDatabase {
    admin_url: String,
    name: String,
    /// The URL a server under test connects with.
    pub url: String,
}

type PgDatabase = ScratchDatabase;

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ScratchDatabase {
    /// Create a database of its own on the server at `admin_url`.
    pub async fn create(admin_url: &str) -> anyhow::Result<Self> {
        let mut conn = sqlx::PgConnection::connect(admin_url).await?;
        let stale: Vec<(String,)> =
            sqlx::query_as("SELECT datname FROM pg_database WHERE datname LIKE 'lk\\_t\\_%'")
                .fetch_all(&mut conn)
                .await?;
        let cutoff = unix_secs().saturating_sub(7200);
        for (name,) in stale {
            let created = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
            if created.is_some_and(|c| c < cutoff) {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await;
            }
        }
        let name = format!("lk_t_{}_{}", unix_secs(), rand::random::<u32>());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await?;
        let _ = conn.close().await;
        let mut url = url_with_db(admin_url, &name)?;
        url.push_str(if url.contains('?') { "&" } else { "?" });
        url.push_str("sslmode=disable");
        Ok(Self {
            admin_url: admin_url.to_string(),
            name,
            url,
        })
    }

    pub async fn drop_database(&self) {
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin_url).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
            let _ = conn.close().await;
        }
    }
}

fn url_with_db(admin_url: &str, db: &str) -> anyhow::Result<String> {
    let (base, query) = match admin_url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (admin_url, None),
    };
    let cut = base.rfind('/').context("database URL without a path")?;
    let mut out = format!("{}/{db}", &base[..cut]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

/// Options for a test server.
/// A change to the server's configuration before it starts.
type ConfigEdit = Box<dyn FnOnce(&mut Config) + Send>;

pub struct TestServerBuilder {
    backend: Backend,
    tls: bool,
    limits: Limits,
    config_edit: Option<ConfigEdit>,
    capture_logs: bool,
    routes: axum::Router<latchkey_server::app::AppState>,
    /// Another replica on this one's store: its database URL and admin token.
    joins: Option<(String, String)>,
}

impl std::fmt::Debug for TestServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServerBuilder")
            .field("backend", &self.backend)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl TestServerBuilder {
    /// Do not install the log-capturing subscriber (benchmarks: it costs time and memory).
    pub fn without_log_capture(mut self) -> Self {
        self.capture_logs = false;
        self
    }

    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    pub fn limits(mut self, edit: impl FnOnce(&mut Limits)) -> Self {
        edit(&mut self.limits);
        self
    }

    /// Serve these extra routes on the public listener (see [`crate::echo`]).
    pub fn routes(mut self, routes: axum::Router<latchkey_server::app::AppState>) -> Self {
        self.routes = routes;
        self
    }

    pub fn config(mut self, edit: impl FnOnce(&mut Config) + Send + 'static) -> Self {
        self.config_edit = Some(Box::new(edit));
        self
    }

    /// Another replica of `first`: the same PostgreSQL database (which stays
    /// `first`'s to drop) and admin token, a data directory and listeners of
    /// its own. For cluster mode (docs/cluster.md).
    pub fn replica_of(mut self, first: &TestServer) -> Self {
        if let Some(url) = &first.config.database_url {
            self.joins = Some((url.clone(), first.admin_token.clone()));
        }
        self
    }

    pub async fn start(self) -> anyhow::Result<TestServer> {
        if self.capture_logs {
            crate::logs::init();
        }
        crate::install_crypto_provider();
        let dir = tempfile::tempdir()?;
        let pg = match (&self.backend, &self.joins) {
            (Backend::Postgres { admin_url }, None) => Some(PgDatabase::create(admin_url).await?),
            _ => None,
        };
        let certs = if self.tls {
            Some(TestCerts::generate()?)
        } else {
            None
        };
        let mut config = Config {
            listen: "127.0.0.1:0".parse()?,
            data_dir: dir.path().join("data"),
            database_url: pg
                .as_ref()
                .map(|p| p.url.clone())
                .or_else(|| self.joins.as_ref().map(|(url, _)| url.clone())),
            metrics_listen: Some("127.0.0.1:0".parse()?),
            limits: self.limits,
            ..Config::default()
        };
        if let Some(certs) = &certs {
            let (cert, key) = certs.write(dir.path())?;
            config.tls = Some(TlsFiles { cert, key });
        }
        if let Some(edit) = self.config_edit {
            edit(&mut config);
        }
        let clock = Clock::system();
        let handle =
            latchkey_server::bind_with_routes(config.clone(), clock.clone(), self.routes).await?;
        let admin_token = match &self.joins {
            Some((_, token)) => token.clone(),
            None => handle
                .bootstrap
                .as_ref()
                .map(|b| b.admin_token.clone())
                .context("a fresh store must bootstrap an admin token")?,
        };
        let client_tls = certs.as_ref().map(TestCerts::client_config).transpose()?;
        let idle_close = Duration::from_millis(config.limits.setup_timeout_ms);
        let http = build_http_client(certs.as_ref(), idle_close)?;
        Ok(TestServer {
            handle: Some(handle),
            config,
            clock,
            admin_token,
            http,
            client_tls,
            certs,
            pg,
            backend: self.backend,
            _dir: dir,
        })
    }
}

/// How long a test's HTTP client keeps an idle connection for reuse: a fifth of
/// the default `setup_timeout_ms`, after which latchkeyd closes it.
pub const POOL_IDLE: Duration = Duration::from_secs(1);

/// An HTTP client builder for tests: no proxy, and idle connections let go
/// before the server closes them (see [`build_http_client`]).
pub fn http_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(POOL_IDLE)
}

/// [`http_builder`], built.
#[expect(
    clippy::expect_used,
    reason = "a test helper: no client fails the test"
)]
pub fn http_client() -> reqwest::Client {
    http_builder().build().expect("an HTTP client")
}

/// The server closes a kept-alive connection that has sat idle for `idle_close`
/// (docs/security.md, `setup_timeout_ms`). A pooled connection reused just as it
/// closes is reset under the request, so the pool lets connections go well before
/// then, as any long-lived client of latchkeyd should.
fn build_http_client(
    certs: Option<&TestCerts>,
    idle_close: Duration,
) -> anyhow::Result<reqwest::Client> {
    let mut builder = http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(idle_close / 4)
        .timeout(Duration::from_secs(30));
    if let Some(certs) = certs {
        builder =
            builder.tls_certs_only([reqwest::Certificate::from_pem(certs.ca_pem.as_bytes())?]);
    }
    Ok(builder.build()?)
}

/// A running `latchkeyd` for one test.
pub struct TestServer {
    handle: Option<ServerHandle>,
    config: Config,
    clock: Clock,
    /// The bootstrap admin token of tenant `default`.
    pub admin_token: String,
    /// An HTTP client that trusts this server's certificate and never follows redirects.
    pub http: reqwest::Client,
    client_tls: Option<Arc<rustls::ClientConfig>>,
    certs: Option<TestCerts>,
    pg: Option<PgDatabase>,
    backend: Backend,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub fn builder(backend: Backend) -> TestServerBuilder {
        TestServerBuilder {
            backend,
            tls: false,
            limits: Limits::default(),
            config_edit: None,
            capture_logs: true,
            routes: axum::Router::new(),
            joins: None,
        }
    }

    /// A plain server on the given backend with default limits.
    pub async fn start(backend: Backend) -> anyhow::Result<TestServer> {
        Self::builder(backend).start().await
    }

    fn handle(&self) -> &ServerHandle {
        // Present from start until stop() consumes self.
        self.handle
            .as_ref()
            .unwrap_or_else(|| unreachable!("server handle taken"))
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn state(&self) -> &latchkey_server::app::AppState {
        self.handle().state()
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// `http://127.0.0.1:PORT` or `https://localhost:PORT`.
    pub fn http_base(&self) -> String {
        let addr = self.handle().public_addr;
        if self.certs.is_some() {
            format!("https://localhost:{}", addr.port())
        } else {
            format!("http://{addr}")
        }
    }

    pub fn public_base(&self) -> &str {
        &self.handle().public_base
    }

    /// Where this server serves `/metrics`.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.handle().metrics_addr
    }

    /// Every sample on the metrics listener (see [`crate::metrics::scrape`]).
    pub async fn metrics(&self) -> anyhow::Result<std::collections::HashMap<String, f64>> {
        let addr = self
            .metrics_addr()
            .ok_or_else(|| anyhow::anyhow!("no metrics listener"))?;
        crate::metrics::scrape(&self.http, addr).await
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.handle().public_addr
    }

    /// The PEM of the CA that signed this server's certificate (None for a plain
    /// server), for clients the test builds itself.
    pub fn ca_pem(&self) -> Option<&str> {
        self.certs.as_ref().map(|c| c.ca_pem.as_str())
    }

    /// TLS settings for WebSocket clients (None for a plain server).
    pub fn client_tls(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.client_tls.clone()
    }

    /// Stop and start again on the same store and data directory (a new port).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
        self.handle = Some(bind_with_clock(self.config.clone(), self.clock.clone()).await?);
        Ok(())
    }

    /// Shut down gracefully and drop the test database.
    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
        if let Some(pg) = &self.pg {
            pg.drop_database().await;
        }
    }

    /// PostgreSQL only: refuse (or allow again) every connection to this test's
    /// database and terminate the open ones, as if the database went away.
    pub async fn set_database_reachable(&self, reachable: bool) -> anyhow::Result<()> {
        self.alter_database(
            |name| format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS {reachable}"),
            !reachable,
        )
        .await
    }

    /// PostgreSQL only: make this test's database read-only for new sessions and
    /// end the open ones (a primary demoted to a replica), or writable again for new
    /// sessions only (the open, read-only ones stay as they are, as after a failover).
    pub async fn set_database_read_only(&self, read_only: bool) -> anyhow::Result<()> {
        self.alter_database(
            |name| {
                if read_only {
                    format!("ALTER DATABASE \"{name}\" SET default_transaction_read_only = on")
                } else {
                    format!("ALTER DATABASE \"{name}\" RESET default_transaction_read_only")
                }
            },
            read_only,
        )
        .await
    }

    /// Run one `ALTER DATABASE` on this test's database as the admin, then
    /// optionally terminate every session open on it.
    async fn alter_database(
        &self,
        statement: impl FnOnce(&str) -> String,
        terminate_sessions: bool,
    ) -> anyhow::Result<()> {
        let pg = self
            .pg
            .as_ref()
            .context("only a PostgreSQL test server has a database to alter")?;
        let mut conn = sqlx::PgConnection::connect(&pg.admin_url).await?;
        sqlx::query(sqlx::AssertSqlSafe(statement(&pg.name)))
            .execute(&mut conn)
            .await?;
        if terminate_sessions {
            sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            )
            .bind(&pg.name)
            .execute(&mut conn)
            .await?;
        }
        let _ = conn.close().await;
        Ok(())
    }

    /// The resolved configuration the server runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }
}
