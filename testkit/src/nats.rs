//! [`NatsServer`]: Debian's `nats-server`, started by a test on a port of its
//! own (so the test can stop and restart it), for cluster mode.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A running `nats-server`; killed when dropped.
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    /// Options given at start (TLS, credentials), given again on a restart.
    args: Vec<String>,
    port: u16,
    /// Its monitoring endpoint's port (loopback, chosen by the server): what
    /// it knows of its clients, for tests that wait for it to notice one gone.
    monitor: u16,
    child: Option<tokio::process::Child>,
}

/// How long a start may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(10);

impl NatsServer {
    /// The installed `nats-server`, if any.
    pub fn binary() -> Option<PathBuf> {
        ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    }

    /// The binary, or `None` with a loud skip notice; in CI (or with
    /// `LATCHKEY_REQUIRE_NATS`) a missing binary fails the test.
    pub fn required_binary() -> Option<PathBuf> {
        let found = Self::binary();
        if found.is_none() {
            assert!(
                std::env::var_os("CI").is_none()
                    && std::env::var_os("LATCHKEY_REQUIRE_NATS").is_none(),
                "nats-server is required here but not installed"
            );
            eprintln!("\n!!! SKIPPED: nats-server not installed !!!\n");
        }
        found
    }

    /// Start on a free loopback port (the server picks it) and wait until it
    /// listens.
    pub async fn start(binary: PathBuf) -> anyhow::Result<Self> {
        Self::start_with(binary, Vec::new()).await
    }

    /// [`Self::start`] with more options, e.g. `--tls --tlscert F --tlskey F`
    /// or `--user U --pass P`.
    pub async fn start_with(binary: PathBuf, args: Vec<String>) -> anyhow::Result<Self> {
        let (child, port, monitor) = spawn(&binary, &args, None).await?;
        Ok(Self {
            binary,
            args,
            port,
            monitor,
            child: Some(child),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// How many clients the server has connected now (its `/connz`).
    pub async fn connections(&self) -> anyhow::Result<u64> {
        let url = format!("http://127.0.0.1:{}/connz", self.monitor);
        let body: serde_json::Value = reqwest::get(url).await?.error_for_status()?.json().await?;
        body["num_connections"]
            .as_u64()
            .context("num_connections in /connz")
    }

    /// Kill the server; clients see the connection drop.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Start it again on the same port (clients reconnect to the same URL).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await;
        let (child, _, monitor) = spawn(&self.binary, &self.args, Some(self.port)).await?;
        self.child = Some(child);
        self.monitor = monitor;
        Ok(())
    }
}

/// Start `nats-server` and read its log until it names the port it listens on.
async fn spawn(
    binary: &PathBuf,
    args: &[String],
    port: Option<u16>,
) -> anyhow::Result<(tokio::process::Child, u16, u16)> {
    let port_arg = port.map_or_else(|| "-1".to_string(), |p| p.to_string());
    let mut child = tokio::process::Command::new(binary)
        .args(["-a", "127.0.0.1", "-p", &port_arg, "-m", "-1"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let stderr = child.stderr.take().context("nats-server stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let port_after = |line: &str, words: &str| -> Option<u16> {
        line.split(words)
            .nth(1)?
            .rsplit(':')
            .next()
            .and_then(|p| p.trim().parse().ok())
    };
    let (listening, monitor) = tokio::time::timeout(START_TIMEOUT, async {
        // The monitor is started before the client listener.
        let mut monitor = None;
        while let Some(line) = lines.next_line().await? {
            monitor = monitor.or_else(|| port_after(&line, "Starting http monitor on "));
            if let Some(port) = port_after(&line, "Listening for client connections on ") {
                return Ok((port, monitor.context("monitor port in nats-server's log")?));
            }
        }
        anyhow::bail!("nats-server exited before listening")
    })
    .await
    .context("nats-server did not start in time")??;
    // Keep draining its log so the pipe never fills and blocks it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, listening, monitor))
}
