//! Server configuration: defaults, the TOML file, `LATCHKEY_*` variables and flags
//! resolve into one [`Config`], which [`Config::problems`] checks as a whole so an
//! operator sees every mistake at once.

use std::net::SocketAddr;
use std::path::PathBuf;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// Default port of the metrics listener (on loopback).
pub const DEFAULT_METRICS_PORT: u16 = 9652;

/// PEM files for native TLS termination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Log output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Every tunable limit, with the defaults of docs/protocol.md, "Limits".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Default pairing link lifetime.
    pub pairing_ttl_secs: u64,
    /// Longest pairing link lifetime an admin may ask for.
    pub pairing_ttl_max_secs: u64,
    /// Unused, unexpired pairing links a tenant may hold.
    pub max_unused_pairings: u32,
    /// Unused, unexpired pairing links made for one member (by an admin or by the
    /// member): a member's own token cannot use up the tenant's links.
    pub max_unused_pairings_per_member: u32,
    /// Device grant lifetime.
    pub device_ttl_secs: u64,
    /// When the extension should renew, counted from the grant.
    pub renew_after_secs: u64,
    /// `/extension/authorize` requests per peer address per minute, renewals of
    /// known devices excepted.
    pub authorize_per_minute: u32,
    /// Renewals per device per minute (a real extension retries at most once a
    /// minute).
    pub renewals_per_minute_per_device: u32,
    /// `GET /extension` upgrades per peer address per minute.
    pub upgrades_per_minute: u32,
    /// Web console sign-in attempts per client address per minute
    /// (docs/console.md, "Signing in").
    pub console_sign_ins_per_minute: u32,
    /// Agent API requests (REST requests and agent-socket frames) per token per second.
    pub agent_calls_per_second_per_token: u32,
    /// Agent API requests per tenant per second, all its tokens together.
    pub agent_calls_per_second_per_tenant: u32,
    /// First-frame limit after the upgrade.
    pub handshake_timeout_ms: u64,
    /// Drop a device silent this long (after its first heartbeat). The protocol forbids
    /// dropping sooner than 60 s; only tests shorten it.
    pub liveness_timeout_ms: u64,
    /// How often silence is checked.
    pub reaper_interval_ms: u64,
    /// A device quiet this long (no frame at all) is sent a WebSocket Ping, which
    /// browsers answer on their own, heartbeat or not.
    pub ping_after_ms: u64,
    /// Drop any device, heartbeating or not, from which nothing at all (not even a
    /// Pong) arrived this long: a dead peer behind a half-open TCP connection.
    pub silent_peer_timeout_ms: u64,
    /// How often a live connection re-reads its grant from the store.
    pub grant_recheck_ms: u64,
    /// Close live sockets after the store has been unreadable this long (fail closed).
    pub store_failure_grace_ms: u64,
    /// Largest WebSocket message and frame.
    pub max_message_bytes: usize,
    /// TLS handshake and HTTP header read limit per new connection.
    pub setup_timeout_ms: u64,
    /// Connections in TLS/HTTP setup at once; at the cap the oldest is dropped.
    pub max_connections_in_setup: usize,
    /// Of those, how many one client address may hold (an IPv6 /64 counts as one
    /// address; a trusted proxy's connections are not counted together).
    pub max_connections_in_setup_per_peer: usize,
    /// Devices online (handshaken) on this node; a new one beyond gets 503.
    pub max_online_devices: usize,
    /// Agent WebSockets open on this node, all tokens together.
    pub max_agent_sockets: usize,
    /// A write to a peer that cannot complete this long closes the connection
    /// (a peer that stops reading must not pin memory or a task).
    pub write_stall_timeout_ms: u64,
    /// How long an `/authorize` body may take to arrive.
    pub body_timeout_ms: u64,
    /// SQLite writer lock wait before a request is answered 503.
    pub sqlite_busy_timeout_ms: u64,
    /// PostgreSQL connection wait before a request is answered 503.
    pub pg_acquire_timeout_ms: u64,
    /// Graceful shutdown budget.
    pub drain_timeout_ms: u64,
    /// Calls in flight per device; more are refused with `capacity_reached`.
    pub max_calls_in_flight_per_device: usize,
    /// Stop sessions idle this long (busy ones are skipped).
    pub session_idle_timeout_ms: u64,
    /// How often idle sessions are looked for.
    pub session_reaper_interval_ms: u64,
    /// `tool.session_start` reply wait (docs/protocol.md, "Limits": 15 s).
    pub session_start_timeout_ms: u64,
    /// Agent WebSockets open at once per API token.
    pub max_agent_sockets_per_token: usize,
    /// Sessions (Agent Windows) open at once on one browser; one more is refused
    /// with `capacity_reached` and `Retry-After`.
    pub max_sessions_per_device: usize,
    /// Sessions open at once per API token; one more is refused with `limit_reached`.
    pub max_sessions_per_token: usize,
    /// A device replaced by a new socket of its own more often than this in a
    /// minute is refused at the upgrade (429, `Retry-After`) for the rest of the
    /// minute: two copies of one device must not knock each other offline forever.
    pub max_replacements_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        const DAY: u64 = 86_400;
        Self {
            pairing_ttl_secs: 300,
            pairing_ttl_max_secs: 3600,
            max_unused_pairings: 100,
            max_unused_pairings_per_member: 5,
            device_ttl_secs: 90 * DAY,
            renew_after_secs: 30 * DAY,
            authorize_per_minute: 60,
            renewals_per_minute_per_device: 10,
            upgrades_per_minute: 600,
            console_sign_ins_per_minute: 10,
            agent_calls_per_second_per_token: 200,
            agent_calls_per_second_per_tenant: 1_000,
            handshake_timeout_ms: 5_000,
            liveness_timeout_ms: 60_000,
            reaper_interval_ms: 15_000,
            ping_after_ms: 30_000,
            silent_peer_timeout_ms: 120_000,
            grant_recheck_ms: 5_000,
            store_failure_grace_ms: 30_000,
            max_message_bytes: 16 << 20,
            setup_timeout_ms: 5_000,
            max_connections_in_setup: crate::transport::setup::DEFAULT_MAX_IN_SETUP,
            max_connections_in_setup_per_peer:
                crate::transport::setup::DEFAULT_MAX_IN_SETUP_PER_PEER,
            max_online_devices: 50_000,
            max_agent_sockets: 10_000,
            write_stall_timeout_ms: 10_000,
            body_timeout_ms: 5_000,
            sqlite_busy_timeout_ms: 500,
            pg_acquire_timeout_ms: 3_000,
            drain_timeout_ms: 10_000,
            max_calls_in_flight_per_device: 8,
            session_idle_timeout_ms: 300_000,
            session_reaper_interval_ms: 15_000,
            session_start_timeout_ms: latchkey_protocol::effect::SESSION_START_TIMEOUT_MS,
            max_agent_sockets_per_token: 16,
            max_sessions_per_device: 8,
            max_sessions_per_token: 16,
            max_replacements_per_minute: 10,
        }
    }
}

/// The resolved configuration `bind` runs with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub listen: SocketAddr,
    /// Base URL the extension dials (`wss://host[:port][/prefix]`); derived from the
    /// listener when absent.
    pub public_url: Option<String>,
    pub data_dir: PathBuf,
    /// `postgres://…` selects PostgreSQL; absent means SQLite in `data_dir`.
    pub database_url: Option<String>,
    pub tls: Option<TlsFiles>,
    /// Proxies whose `X-Forwarded-For` is believed (nginx `real_ip_recursive`).
    pub trusted_proxies: Vec<IpNet>,
    /// Local mode (docs/configuration.md): loopback only.
    pub local: bool,
    /// When non-empty, only these extension ids may connect.
    pub allowed_extension_ids: Vec<String>,
    /// Shown to the extension as `service_name`.
    pub service_name: String,
    pub log_format: LogFormat,
    /// Where Prometheus scrapes `/metrics` (keep it private: loopback or a pod port).
    pub metrics_listen: Option<SocketAddr>,
    /// Add a `tenant` label to call metrics: one series per tenant and method, so
    /// only for a bounded number of tenants.
    pub metrics_tenant_label: bool,
    /// OpenTelemetry trace export (off unless an endpoint is set).
    pub tracing: crate::telemetry::otel::TracingConfig,
    pub limits: Limits,
    pub audit: crate::audit_keeping::AuditConfig,
    pub webhooks: crate::webhooks::WebhooksConfig,
    pub mcp: crate::mcp::McpConfig,
    /// The web console's single sign-on providers (docs/console.md).
    pub console: crate::console::ConsoleConfig,
    /// Cluster mode: replicas on one PostgreSQL store, told over NATS
    /// (docs/cluster.md).
    pub cluster: crate::cluster::ClusterConfig,
}

/// Where data lives when no directory is given: the user's data directory
/// (`$XDG_DATA_HOME/latchkey`, usually `~/.local/share/latchkey`), so `latchkeyd
/// serve` finds the same store from any working directory; `./latchkey-data` only
/// where there is no home directory at all.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir().map_or_else(|| PathBuf::from("./latchkey-data"), |d| d.join("latchkey"))
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 52800)),
            public_url: None,
            data_dir: default_data_dir(),
            database_url: None,
            tls: None,
            trusted_proxies: Vec::new(),
            local: false,
            allowed_extension_ids: Vec::new(),
            service_name: "Latchkey".to_string(),
            log_format: LogFormat::Human,
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_METRICS_PORT))),
            metrics_tenant_label: false,
            tracing: crate::telemetry::otel::TracingConfig::default(),
            limits: Limits::default(),
            audit: Default::default(),
            webhooks: Default::default(),
            mcp: Default::default(),
            console: Default::default(),
            cluster: Default::default(),
        }
    }
}

/// A configuration mistake, reported with all the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigProblem(pub String);

/// Errors while reading configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid configuration:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<ConfigProblem>),
}

pub(crate) fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Whether `id` is a Chromium extension id: 32 characters `a`–`p`.
pub fn is_extension_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

impl Config {
    /// Read a TOML file; unknown keys are errors.
    pub fn from_toml_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Every problem with this configuration (empty when it is usable).
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        let mut problem = |s: String| out.push(ConfigProblem(s));
        let loopback = self.listen.ip().is_loopback();
        if let Some(tls) = &self.tls {
            for (what, path) in [("tls cert", &tls.cert), ("tls key", &tls.key)] {
                if !path.is_file() {
                    problem(format!("{what} {} is not a readable file", path.display()));
                }
            }
            if tls.cert.is_file()
                && tls.key.is_file()
                && let Err(e) = crate::transport::tls::load_server_config(tls)
            {
                problem(format!("TLS files do not load: {e}"));
            }
        } else if !loopback && self.trusted_proxies.is_empty() {
            problem(format!(
                "refusing plain (non-TLS) listening on non-loopback {}: give --tls-cert/--tls-key, \
                 or --trusted-proxy for the TLS-terminating proxy in front",
                self.listen
            ));
        }
        if !loopback && self.public_url.is_none() {
            problem(format!(
                "listening on {} needs --public-url (the wss:// address extensions dial)",
                self.listen
            ));
        }
        if self.local && !loopback {
            problem(format!(
                "--local requires a loopback listen address, not {}",
                self.listen
            ));
        }
        if let Some(public) = &self.public_url {
            match url::Url::parse(public) {
                Err(e) => problem(format!("public URL {public:?} does not parse: {e}")),
                Ok(u) => {
                    let host = u.host();
                    let secure = matches!(u.scheme(), "https" | "wss");
                    let plain = matches!(u.scheme(), "http" | "ws");
                    if !secure && !plain {
                        problem(format!(
                            "public URL scheme must be wss or https, not {:?}",
                            u.scheme()
                        ));
                    }
                    if plain && !host.as_ref().is_some_and(is_loopback_host) {
                        problem(
                            "public URL must be wss:// (plain ws:// only for loopback hosts)"
                                .into(),
                        );
                    }
                    if plain && !self.trusted_proxies.is_empty() {
                        problem(
                            "behind a trusted proxy the public URL must still be wss://".into(),
                        );
                    }
                    if !u.username().is_empty() || u.password().is_some() {
                        problem("public URL must not carry user info".into());
                    }
                    if u.query().is_some() || u.fragment().is_some() {
                        problem("public URL must not carry a query or fragment".into());
                    }
                }
            }
        }
        if let Some(db) = &self.database_url
            && !(db.starts_with("postgres://") || db.starts_with("postgresql://"))
        {
            problem(
                "database URL must start with postgres:// (SQLite is the default without one)"
                    .into(),
            );
        }
        for id in &self.allowed_extension_ids {
            if !is_extension_id(id) {
                problem(format!(
                    "allowed extension id {id:?} is not 32 characters a-p"
                ));
            }
        }
        let l = &self.limits;
        if !(1..=3600).contains(&l.pairing_ttl_max_secs) {
            problem("limits.pairing_ttl_max_secs must be 1..=3600".into());
        }
        if l.pairing_ttl_secs == 0 || l.pairing_ttl_secs > l.pairing_ttl_max_secs {
            problem("limits.pairing_ttl_secs must be 1..=pairing_ttl_max_secs".into());
        }
        if l.device_ttl_secs == 0 || l.device_ttl_secs > 366 * 86_400 {
            problem("limits.device_ttl_secs must be at most 366 days".into());
        }
        if l.renew_after_secs == 0 || l.renew_after_secs >= l.device_ttl_secs {
            problem("limits.renew_after_secs must be below device_ttl_secs".into());
        }
        if !(1..=60_000).contains(&l.authorize_per_minute) {
            problem("limits.authorize_per_minute must be 1..=60000".into());
        }
        if !(1..=60_000).contains(&l.console_sign_ins_per_minute) {
            problem("limits.console_sign_ins_per_minute must be 1..=60000".into());
        }
        for p in self
            .tracing
            .problems()
            .into_iter()
            .chain(self.audit.problems())
            .chain(self.webhooks.problems())
            .chain(self.mcp.problems())
            .chain(crate::console::sso::config::problems(&self.console.sso))
            .chain(self.cluster.problems(self.database_url.is_some()))
        {
            problem(p);
        }
        for (name, value) in [
            ("upgrades_per_minute", l.upgrades_per_minute as usize),
            (
                "renewals_per_minute_per_device",
                l.renewals_per_minute_per_device as usize,
            ),
            (
                "agent_calls_per_second_per_token",
                l.agent_calls_per_second_per_token as usize,
            ),
            (
                "agent_calls_per_second_per_tenant",
                l.agent_calls_per_second_per_tenant as usize,
            ),
            ("max_connections_in_setup", l.max_connections_in_setup),
            (
                "max_connections_in_setup_per_peer",
                l.max_connections_in_setup_per_peer,
            ),
            ("max_online_devices", l.max_online_devices),
            ("max_agent_sockets", l.max_agent_sockets),
            ("max_sessions_per_device", l.max_sessions_per_device),
            ("max_sessions_per_token", l.max_sessions_per_token),
            (
                "max_replacements_per_minute",
                l.max_replacements_per_minute as usize,
            ),
        ] {
            if value == 0 {
                problem(format!("limits.{name} must be at least 1"));
            }
        }
        if l.silent_peer_timeout_ms < l.liveness_timeout_ms
            || l.ping_after_ms >= l.silent_peer_timeout_ms
        {
            problem(
                "limits.silent_peer_timeout_ms must be at least liveness_timeout_ms and above ping_after_ms"
                    .into(),
            );
        }
        if l.write_stall_timeout_ms == 0 {
            problem("limits.write_stall_timeout_ms must be at least 1".into());
        }
        if l.max_calls_in_flight_per_device == 0 {
            problem("limits.max_calls_in_flight_per_device must be at least 1".into());
        }
        if l.max_message_bytes < 16 << 20 {
            problem(
                "limits.max_message_bytes must be at least 16 MiB (the protocol's minimum)".into(),
            );
        }
        out
    }

    /// `Ok` when [`problems`](Self::problems) is empty.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// A copy safe to print: the database password and client secrets are masked.
    pub fn masked(&self) -> Config {
        let mut c = self.clone();
        if let Some(db) = &c.database_url
            && let Ok(mut u) = url::Url::parse(db)
            && u.password().is_some()
        {
            let _ = u.set_password(Some("****"));
            c.database_url = Some(u.to_string());
        }
        c.cluster = c.cluster.masked();
        c.console.sso = c.console.sso.iter().map(|p| p.masked()).collect();
        c
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
