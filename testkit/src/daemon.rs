//! A `latchkeyd` process (the real binary, for tests that signal or kill it): spawn
//! it with stdout piped and read its bound address and first-start admin token from
//! what it prints.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a daemon may take to print that it listens.
const START_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Daemon {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Printed on the first start of an empty store only.
    pub bootstrap_token: Option<String>,
    /// `127.0.0.1:PORT` of `/metrics`, when it serves them.
    pub metrics_addr: Option<String>,
}

impl Daemon {
    /// `EXE --config DIR/latchkey.toml serve --listen 127.0.0.1:0 --metrics-listen
    /// 127.0.0.1:0 --data-dir DIR/data` (no fixed port anywhere),
    /// the config file holding `[limits]` with the given lines; the caller may add
    /// environment variables before [`Daemon::spawn`].
    pub fn serve_command(
        exe: &std::path::Path,
        dir: &std::path::Path,
        limits: &str,
    ) -> anyhow::Result<Command> {
        Self::serve_command_on(exe, dir, limits, "127.0.0.1:0")
    }

    /// [`Daemon::serve_command`] listening on `listen`: a port an earlier run of
    /// the same replica was given, for a restart a fixed upstream (nginx) finds.
    pub fn serve_command_on(
        exe: &std::path::Path,
        dir: &std::path::Path,
        limits: &str,
        listen: &str,
    ) -> anyhow::Result<Command> {
        let config = dir.join("latchkey.toml");
        std::fs::write(&config, format!("[limits]\n{limits}\n"))?;
        let mut command = Command::new(exe);
        command
            .arg("--config")
            .arg(&config)
            .args([
                "serve",
                "--listen",
                listen,
                "--metrics-listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(dir.join("data"));
        Ok(command)
    }

    /// Spawn `command` (a `latchkeyd serve …` the caller built) with its logs going
    /// to `stderr`, and wait until it listens. The process is killed when the handle
    /// is dropped.
    pub async fn spawn(mut command: Command, stderr: Stdio) -> anyhow::Result<Daemon> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .context("spawn latchkeyd")?;
        let stdout = child.stdout.take().context("stdout not piped")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut bootstrap_token = None;
        let mut metrics_addr = None;
        let addr = tokio::time::timeout(START_DEADLINE, async {
            while let Some(line) = lines.next_line().await? {
                let line = line.trim();
                if line.starts_with("lk_") {
                    bootstrap_token = Some(line.to_string());
                }
                if let Some(rest) = line.strip_prefix("metrics on http://") {
                    metrics_addr = rest.strip_suffix("/metrics").map(str::to_string);
                }
                if let Some(rest) = line.strip_prefix("latchkeyd listening on ") {
                    return rest
                        .split_whitespace()
                        .next()
                        .map(str::to_string)
                        .context("no address after `listening on`");
                }
            }
            bail!("latchkeyd exited before listening")
        })
        .await
        .context("latchkeyd did not start in time")??;
        Ok(Daemon {
            child,
            addr,
            bootstrap_token,
            metrics_addr,
        })
    }

    /// `http://ADDR`.
    pub fn http_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// An admin client with the token printed on this daemon's first start.
    pub fn admin(&self, http: &reqwest::Client) -> anyhow::Result<crate::AdminClient> {
        let token = self
            .bootstrap_token
            .clone()
            .context("no admin token: not the first start of this store")?;
        Ok(crate::AdminClient::new(
            http.clone(),
            self.http_base(),
            token,
        ))
    }

    /// The process's resident memory in KiB and its open file descriptors, from /proc.
    pub fn rss_kib_and_fds(&self) -> anyhow::Result<(u64, usize)> {
        let pid = self.child.id().context("process has exited")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS")?;
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        Ok((rss, fds))
    }
}
