//! The `latchkeyd` command line: `serve`, `migrate`, `check-config`, `tenant
//! create|list`. Every option also reads `LATCHKEY_<NAME>` and the TOML file given
//! with `--config`; flags win over variables, which win over the file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ipnet::IpNet;

use crate::config::{Config, ConfigError, LogFormat, TlsFiles};
use crate::{auth::bootstrap, clock::Clock, open_store, telemetry};

#[derive(Debug, Parser)]
#[command(
    name = "latchkeyd",
    version,
    about = "Latchkey gateway: lend a home browser to cloud agents, safely"
)]
pub struct Cli {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Print the resolved configuration (secrets masked) and every problem with it.
    CheckConfig,
    /// Operator commands on tenants (run against the same store as the server).
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// The audit trail's tamper evidence (docs/operations.md, "Tamper evidence").
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Start signing delegation tokens with a new key (docs/delegation.md). Tokens
    /// signed with the old one stay valid until they expire; running nodes pick
    /// the new key up within a minute.
    RotateSigningKey,
    /// Print the OpenAPI 3.1 document of the HTTP API, as `/openapi.json` serves
    /// it with MCP on (docs/api.md); needs no store.
    Openapi,
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant and print its first admin token, once.
    Create { name: String },
    /// List tenants.
    List,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk each team's hash chain and name the first row that was changed,
    /// removed or inserted; exits 1 if any chain is broken.
    Verify {
        /// Only this team (by name).
        #[arg(long)]
        tenant: Option<String>,
        /// Check the checkpoints against the public keys in this file (what
        /// `latchkeyd audit keys` printed earlier) rather than those the store
        /// holds, which someone able to write the store could have added to.
        #[arg(long)]
        keys: Option<PathBuf>,
    },
    /// Print the public audit keys as JSON, to keep apart from the store for
    /// `verify --keys` and `latchkey audit verify-file --keys`.
    Keys,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, global = true, env = "LATCHKEY_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:52800].
    #[arg(long, global = true, env = "LATCHKEY_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Public base URL extensions dial, e.g. wss://gw.example.com.
    #[arg(long, global = true, env = "LATCHKEY_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Data directory (holds the SQLite file) [default: ~/.local/share/latchkey].
    #[arg(long, global = true, env = "LATCHKEY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// postgres://… selects PostgreSQL instead of SQLite.
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// PEM certificate chain for native TLS.
    #[arg(long, global = true, env = "LATCHKEY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for native TLS.
    #[arg(long, global = true, env = "LATCHKEY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CIDR of a proxy whose X-Forwarded-For is trusted (repeatable).
    #[arg(
        long = "trusted-proxy",
        global = true,
        env = "LATCHKEY_TRUSTED_PROXY",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<IpNet>,
    /// Allow only these extension ids (repeatable).
    #[arg(
        long = "allowed-extension-id",
        global = true,
        env = "LATCHKEY_ALLOWED_EXTENSION_ID",
        value_delimiter = ','
    )]
    pub allowed_extension_ids: Vec<String>,
    /// Local mode: loopback only, for an agent on the browser's own machine.
    #[arg(long, global = true, env = "LATCHKEY_LOCAL")]
    pub local: bool,
    /// Log format.
    #[arg(long, global = true, env = "LATCHKEY_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Where Prometheus scrapes /metrics [default: 127.0.0.1:9652].
    #[arg(long, global = true, env = "LATCHKEY_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Cluster mode: the NATS server(s) replicas tell each other through, e.g.
    /// nats://nats:4222 (needs a PostgreSQL store; docs/cluster.md).
    #[arg(
        long = "cluster",
        value_name = "NATS_URL",
        global = true,
        env = "LATCHKEY_CLUSTER",
        hide_env_values = true
    )]
    pub cluster: Option<String>,
    /// This replica's name in cluster mode [default: the host name].
    #[arg(long, global = true, env = "LATCHKEY_NODE_ID")]
    pub node_id: Option<String>,
    /// OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces (off by default).
    #[arg(long, global = true, env = "LATCHKEY_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

impl ConfigArgs {
    /// File (or defaults), then variables and flags on top.
    pub fn resolve(&self) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::from_toml_file(path)?,
            None => Config::default(),
        };
        if let Some(v) = self.listen {
            c.listen = v;
        }
        if let Some(v) = &self.public_url {
            c.public_url = Some(v.clone());
        }
        if let Some(v) = &self.data_dir {
            c.data_dir = v.clone();
        }
        if let Some(v) = &self.database_url {
            c.database_url = Some(v.clone());
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            c.tls = Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            });
        }
        if !self.trusted_proxies.is_empty() {
            c.trusted_proxies = self.trusted_proxies.clone();
        }
        if !self.allowed_extension_ids.is_empty() {
            c.allowed_extension_ids = self.allowed_extension_ids.clone();
        }
        if self.local {
            c.local = true;
        }
        if let Some(v) = self.log_format {
            c.log_format = v;
        }
        if let Some(v) = self.metrics_listen {
            c.metrics_listen = Some(v);
        }
        if let Some(v) = &self.cluster {
            c.cluster.nats_url = Some(v.clone());
        }
        if let Some(v) = &self.node_id {
            c.cluster.node_id = Some(v.clone());
        }
        if let Some(v) = &self.otlp_endpoint {
            c.tracing.otlp_endpoint = Some(v.clone());
        }
        Ok(c)
    }
}

/// Parse the process arguments and run.
pub fn main() -> ExitCode {
    run_from(std::env::args_os())
}

/// Run with these arguments (the first is the program name), as `latchkeyd` would.
/// The load generator uses it to run the real server in a child process of its own.
pub fn run_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("latchkeyd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("latchkeyd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = cli.config.resolve()?;
    match cli.command {
        Command::Serve => serve(config).await,
        Command::Openapi => {
            println!(
                "{}",
                serde_json::to_string_pretty(&crate::openapi::document())?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig => check_config(config).await,
        Command::Migrate => {
            config.validate()?;
            let store = open_store(&config).await?;
            store.migrate().await?;
            println!("migrations applied ({})", store.backend());
            Ok(ExitCode::SUCCESS)
        }
        Command::RotateSigningKey => {
            let store = open_store(&config).await?;
            store.migrate().await?;
            let key = crate::delegation::keys::generate(Clock::system().now_ms())?;
            store.rotate_signing_key(&key).await?;
            println!("signing with key {} from now on", key.kid);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(cmd) => {
            let store = open_store(&config).await?;
            store.migrate().await?;
            match cmd {
                AuditCommand::Verify { tenant, keys } => {
                    let keys = match keys {
                        Some(path) => {
                            crate::audit_keys::read_key_set(&path).map_err(anyhow::Error::msg)?
                        }
                        None => stored_audit_keys(store.as_ref()).await?,
                    };
                    verify_audit(store.as_ref(), tenant.as_deref(), &keys).await
                }
                AuditCommand::Keys => {
                    let set = crate::audit_keys::public_set(&store.audit_keys().await?);
                    println!("{}", serde_json::to_string_pretty(&set)?);
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        Command::Tenant(cmd) => {
            let store = open_store(&config).await?;
            store.migrate().await?;
            match cmd {
                TenantCommand::Create { name } => {
                    let t =
                        bootstrap::create_tenant(store.as_ref(), &name, Clock::system().now_ms())
                            .await?;
                    println!("tenant {} created ({})", t.tenant.name, t.tenant.id);
                    println!("admin token (shown once): {}", t.admin_token);
                }
                TenantCommand::List => {
                    for t in store.list_tenants().await? {
                        println!(
                            "{}\t{}\t{}",
                            t.id,
                            t.name,
                            crate::clock::rfc3339(t.created_at)
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The public halves of the audit keys the store holds.
async fn stored_audit_keys(
    store: &dyn crate::store::Store,
) -> anyhow::Result<crate::audit_chain::VerifyingKeys> {
    let set = crate::audit_keys::public_set(&store.audit_keys().await?);
    crate::audit_chain::VerifyingKeys::from_set(&set).map_err(anyhow::Error::msg)
}

/// `latchkeyd audit verify`: one line per team; exit 1 when a chain is broken.
async fn verify_audit(
    store: &dyn crate::store::Store,
    only: Option<&str>,
    keys: &crate::audit_chain::VerifyingKeys,
) -> anyhow::Result<ExitCode> {
    let tenants: Vec<_> = store
        .list_tenants()
        .await?
        .into_iter()
        .filter(|t| only.is_none_or(|name| t.name == name))
        .collect();
    if let (Some(name), true) = (only, tenants.is_empty()) {
        anyhow::bail!("no team is named {name:?}");
    }
    let mut broken = false;
    for t in tenants {
        match crate::audit_chain::verify(store, &t.id, keys).await? {
            Ok(s) => println!("team {}: {}", t.name, crate::audit_chain::describe(&s)),
            Err(fault) => {
                broken = true;
                println!("team {}: BROKEN: {fault}", t.name);
            }
        }
    }
    Ok(if broken {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn serve(config: Config) -> anyhow::Result<ExitCode> {
    let traces = crate::telemetry::otel::provider(&config.tracing)?;
    telemetry::init_logging(config.log_format, traces.as_ref()).map_err(anyhow::Error::msg)?;
    let data_dir = config.data_dir.clone();
    let handle = crate::bind(config).await?;
    if let Some(b) = &handle.bootstrap {
        // Printed to the terminal once, never logged; also in the 0600 file.
        // The whole path, so it can be read from any directory.
        let file = data_dir.join(bootstrap::BOOTSTRAP_TOKEN_FILE);
        let file = std::path::absolute(&file).unwrap_or(file);
        println!(
            "Created tenant `default`. Admin token (shown once, also in {}):\n  {}",
            file.display(),
            b.admin_token
        );
    }
    if let Some(metrics) = handle.metrics_addr {
        println!("metrics on http://{metrics}/metrics");
    }
    println!(
        "latchkeyd listening on {} (extensions dial {}/extension)",
        handle.public_addr, handle.public_base
    );
    wait_for_signal().await;
    tracing::info!("shutting down");
    handle.shutdown().await;
    if let Some(traces) = traces
        && let Err(e) = traces.shutdown()
    {
        eprintln!("latchkeyd: trace export did not flush: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

async fn check_config(config: Config) -> anyhow::Result<ExitCode> {
    let masked = config.masked();
    println!(
        "{}",
        toml::to_string_pretty(&masked).unwrap_or_else(|e| format!("# cannot render: {e}"))
    );
    let mut problems: Vec<String> = config.problems().into_iter().map(|p| p.0).collect();
    if problems.is_empty()
        && let Err(e) = open_store(&config).await
    {
        problems.push(format!("store not reachable: {e}"));
    }
    if problems.is_empty() {
        println!("# configuration OK");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{} problem(s):", problems.len());
        for p in &problems {
            eprintln!("  - {p}");
        }
        Ok(ExitCode::from(2))
    }
}
