//! The servers under measurement, each in a child process of its own so that
//! /proc accounts for it alone: latchkeyd (the real server library, run through
//! `latchkey-load serve-latchkeyd`, the same code path as the `latchkeyd` binary)
//! and the bare relay (`latchkey-load serve-relay`).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use latchkey_protocol::api::Role;
use latchkey_testkit::reqwest;
use latchkey_testkit::tls::TestCerts;
use latchkey_testkit::{AdminClient, FakeAgent, FakeExtension};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::procfs::{self, ProcSample};

/// How long a child has to print its addresses.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Lift the limits that would refuse the generator itself: it is one client pairing
/// and connecting `devices` devices and calling as fast as it can on purpose, so
/// rate limits would measure themselves, not the gateway. Everything else stays at
/// its default.
pub fn unthrottled(limits: &mut latchkey_server::config::Limits, devices: usize) {
    limits.authorize_per_minute = 60_000;
    limits.upgrades_per_minute = 1_000_000;
    limits.agent_calls_per_second_per_token = 100_000_000;
    limits.agent_calls_per_second_per_tenant = 100_000_000;
    limits.max_unused_pairings = u32::try_from(devices + 100).unwrap_or(u32::MAX);
    // One agent holds a session per call in flight, and every device is renewed
    // by the same generator: per-device and per-token caps would refuse it.
    limits.max_sessions_per_device = 100_000;
    limits.max_sessions_per_token = 100_000;
    limits.renewals_per_minute_per_device = 60_000;
}

/// How latchkeyd is started for a scenario.
pub struct ServerOptions {
    pub tls: bool,
    pub devices: usize,
    pub calls_in_flight_per_device: usize,
    /// Behind a proxy listening on 127.0.0.1 at this port: latchkeyd's public URL
    /// names it, and 127.0.0.1 is its trusted proxy.
    pub behind_proxy: Option<u16>,
}

/// Environment variable: a command line that latchkeyd's process is started under.
pub const SERVER_WRAPPER: &str = "LATCHKEY_LOAD_SERVER_WRAPPER";

/// A child process and what it printed at start.
struct ChildProcess {
    child: Child,
    pid: u32,
    /// Lines printed on stdout before it was ready.
    lines: Vec<String>,
    /// Started under a wrapper, in a process group of its own.
    group: bool,
}

impl ChildProcess {
    /// Spawn `latchkey-load <args>`; read stdout until a line starts with `ready`.
    async fn spawn(args: &[String], log: &Path, ready: &str) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let log_file = std::fs::File::create(log)?;
        // A profiler in front of latchkeyd (e.g. `heaptrack -o /tmp/idle`), for
        // finding where its time or memory goes; the figures of such a run measure
        // the wrapper too and are not comparable with others.
        let wrapper: Vec<String> = match std::env::var(SERVER_WRAPPER) {
            Ok(w) if args.first().is_some_and(|a| a == "serve-latchkeyd") => {
                w.split_whitespace().map(str::to_string).collect()
            }
            _ => Vec::new(),
        };
        // Pinned (`--pin`): the server on its core under `taskset`, which execs it
        // (same pid, so /proc still reads the server), and the generator off it.
        crate::pin::pin_generator()?;
        let prefix: Vec<String> = crate::pin::server_prefix()
            .into_iter()
            .chain(wrapper.iter().cloned())
            .collect();
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        if !wrapper.is_empty() {
            // Its own process group, so that stopping it reaches latchkeyd behind
            // a wrapper that does not pass signals on.
            command.process_group(0);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().context("child exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut reader = BufReader::new(stdout).lines();
        let mut lines = Vec::new();
        let read = async {
            while let Some(line) = reader.next_line().await? {
                let done = line.starts_with(ready);
                lines.push(line);
                if done {
                    return anyhow::Ok(true);
                }
            }
            anyhow::Ok(false)
        };
        match tokio::time::timeout(START_DEADLINE, read).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                bail!(
                    "{} exited before it was ready:\n{}",
                    args.first().map_or("child", String::as_str),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => bail!("child not ready within {START_DEADLINE:?}"),
        }
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = reader.next_line().await {} });
        Ok(Self {
            child,
            pid,
            lines,
            group: !wrapper.is_empty(),
        })
    }

    async fn stop(mut self) {
        if self.group {
            // `kill` the whole group; std offers no group signal without unsafe code.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.pid)])
                .status()
                .await;
        }
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// With `tls`: test certificates (ECDSA P-256 from rcgen) written into `dir` and
/// passed as `--tls-cert`/`--tls-key`; both servers take the same flags.
fn tls_args(tls: bool, dir: &Path, args: &mut Vec<String>) -> anyhow::Result<Option<TestCerts>> {
    if !tls {
        return Ok(None);
    }
    let certs = TestCerts::generate()?;
    let (cert, key) = certs.write(dir)?;
    args.extend([
        "--tls-cert".into(),
        cert.display().to_string(),
        "--tls-key".into(),
        key.display().to_string(),
    ]);
    Ok(Some(certs))
}

fn http_client(certs: Option<&TestCerts>) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(64)
        // Let a connection go before latchkeyd closes it as idle
        // (docs/security.md, `setup_timeout_ms`), never reuse it as it closes.
        .pool_idle_timeout(latchkey_testkit::POOL_IDLE)
        .timeout(Duration::from_secs(60));
    if let Some(certs) = certs {
        builder =
            builder.tls_certs_only([reqwest::Certificate::from_pem(certs.ca_pem.as_bytes())?]);
    }
    Ok(builder.build()?)
}

/// latchkeyd in its own process on SQLite in a temporary directory.
pub struct Latchkeyd {
    process: ChildProcess,
    pub addr: std::net::SocketAddr,
    /// `http(s)://…` for the HTTP API.
    pub http_base: String,
    pub admin_token: String,
    pub http: reqwest::Client,
    pub client_tls: Option<Arc<rustls::ClientConfig>>,
    _dir: tempfile::TempDir,
}

impl Latchkeyd {
    pub async fn start(options: &ServerOptions) -> anyhow::Result<Self> {
        Self::start_on(options, None).await
    }

    /// On PostgreSQL at `database_url`, or SQLite in the temporary directory.
    pub async fn start_on(
        options: &ServerOptions,
        database_url: Option<&str>,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("latchkeyd.toml");
        let mut limits = latchkey_server::config::Limits::default();
        unthrottled(&mut limits, options.devices);
        limits.max_calls_in_flight_per_device = options.calls_in_flight_per_device;
        #[derive(serde::Serialize)]
        struct File<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            database_url: Option<&'a str>,
            limits: latchkey_server::config::Limits,
        }
        let file = File {
            database_url,
            limits,
        };
        std::fs::write(&config, toml::to_string(&file)?)?;
        let mut args: Vec<String> = vec![
            "serve-latchkeyd".into(),
            "--config".into(),
            config.display().to_string(),
            "--data-dir".into(),
            dir.path().join("data").display().to_string(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--metrics-listen".into(),
            "127.0.0.1:0".into(),
        ];
        let certs = tls_args(options.tls, dir.path(), &mut args)?;
        if let Some(port) = options.behind_proxy {
            args.extend([
                "--public-url".into(),
                format!("wss://localhost:{port}"),
                "--trusted-proxy".into(),
                "127.0.0.1/32".into(),
            ]);
        }
        args.push("serve".into());
        let process = ChildProcess::spawn(
            &args,
            &dir.path().join("latchkeyd.log"),
            "latchkeyd listening on ",
        )
        .await?;
        let admin_token = process
            .lines
            .iter()
            .zip(process.lines.iter().skip(1))
            .find(|(l, _)| l.contains("Admin token"))
            .map(|(_, token)| token.trim().to_string())
            .context("latchkeyd printed no admin token")?;
        let addr: std::net::SocketAddr = process
            .lines
            .last()
            .and_then(|l| l.strip_prefix("latchkeyd listening on "))
            .and_then(|l| l.split_whitespace().next())
            .context("no listen address")?
            .parse()?;
        let http_base = match &certs {
            Some(_) => format!("https://localhost:{}", addr.port()),
            None => format!("http://{addr}"),
        };
        Ok(Self {
            addr,
            http_base,
            admin_token,
            http: http_client(certs.as_ref())?,
            client_tls: certs.as_ref().map(TestCerts::client_config).transpose()?,
            process,
            _dir: dir,
        })
    }

    /// A reader of this process's /proc figures that outlives the borrow.
    pub fn sampler(&self) -> impl Fn() -> anyhow::Result<ProcSample> + 'static {
        let pid = self.process.pid;
        move || procfs::sample(pid)
    }

    pub fn admin(&self) -> AdminClient {
        AdminClient::new(
            self.http.clone(),
            self.http_base.clone(),
            self.admin_token.clone(),
        )
    }

    /// A new agent token and an agent using it.
    pub async fn new_agent(&self) -> anyhow::Result<FakeAgent> {
        let token = self.admin().create_token("load", Role::Agent).await?;
        Ok(FakeAgent::new(
            self.http.clone(),
            self.http_base.clone(),
            token.token,
        ))
    }

    /// A pairing link redeemed by a new extension, directly with latchkeyd even
    /// when the link names a proxy in front of it.
    pub async fn paired_extension(&self) -> anyhow::Result<FakeExtension> {
        let pairing = self.admin().create_pairing(None, None).await?;
        let (_, secret) = pairing
            .link
            .split_once('#')
            .context("link without a secret")?;
        let link = format!(
            "{}/extension#{secret}",
            self.http_base.replacen("http", "ws", 1)
        );
        let mut ext = FakeExtension::from_link(&link, self.http.clone(), self.client_tls.clone())?;
        ext.pair().await?;
        Ok(ext)
    }

    /// `ws(s)://…/v1/agent`.
    pub fn agent_socket_url(&self) -> String {
        let scheme = if self.client_tls.is_some() {
            "wss"
        } else {
            "ws"
        };
        let host = if self.client_tls.is_some() {
            format!("localhost:{}", self.addr.port())
        } else {
            self.addr.to_string()
        };
        format!("{scheme}://{host}/v1/agent")
    }

    pub async fn stop(self) {
        self.process.stop().await;
    }
}

/// The bare relay in its own process.
pub struct Relay {
    process: ChildProcess,
    pub device_addr: std::net::SocketAddr,
    pub agent_addr: std::net::SocketAddr,
    pub client_tls: Option<Arc<rustls::ClientConfig>>,
    _dir: tempfile::TempDir,
}

impl Relay {
    pub async fn start(tls: bool) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut args: Vec<String> = vec!["serve-relay".into()];
        let certs = tls_args(tls, dir.path(), &mut args)?;
        let process =
            ChildProcess::spawn(&args, &dir.path().join("relay.log"), crate::relay::READY).await?;
        let line = process.lines.last().context("relay printed nothing")?;
        let addr = |key: &str| -> anyhow::Result<std::net::SocketAddr> {
            Ok(line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .context("relay address missing")?
                .parse()?)
        };
        Ok(Self {
            device_addr: addr("devices=")?,
            agent_addr: addr("agents=")?,
            client_tls: certs.as_ref().map(TestCerts::client_config).transpose()?,
            process,
            _dir: dir,
        })
    }

    /// A reader of this process's /proc figures that outlives the borrow.
    pub fn sampler(&self) -> impl Fn() -> anyhow::Result<ProcSample> + 'static {
        let pid = self.process.pid;
        move || procfs::sample(pid)
    }

    fn scheme(&self) -> &'static str {
        if self.client_tls.is_some() {
            "wss"
        } else {
            "ws"
        }
    }

    /// `n` extension stand-ins that dial the relay's device port (no pairing
    /// there), each from its own source address.
    pub fn extensions(&self, n: usize) -> anyhow::Result<Vec<FakeExtension>> {
        let http = reqwest::Client::new();
        let host = match self.client_tls {
            Some(_) => format!("localhost:{}", self.device_addr.port()),
            None => self.device_addr.to_string(),
        };
        let link = format!("{}://{host}/extension#relay", self.scheme());
        (0..n)
            .map(|i| {
                let mut ext =
                    FakeExtension::from_link(&link, http.clone(), self.client_tls.clone())?;
                ext.token = Some("relay".to_string());
                ext.local_addr = Some(crate::fleet::source_addr(i));
                Ok(ext)
            })
            .collect()
    }

    pub fn agent_url(&self) -> String {
        match self.client_tls {
            Some(_) => format!("{}://localhost:{}/", self.scheme(), self.agent_addr.port()),
            None => format!("ws://{}/", self.agent_addr),
        }
    }

    pub async fn stop(self) {
        self.process.stop().await;
    }
}
