//! The real nginx (Debian's package) in front of a latchkeyd, run from the files
//! we ship: `deploy/nginx/nginx.conf` (the main context, with its connection
//! sizing), `deploy/nginx/latchkey.conf` (the site) and
//! `deploy/nginx/latchkey-upstream.conf` (the replicas), each with the test's
//! ports and paths put in. Every literal replaced must be in the shipped file, so
//! a test follows what operators install.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::tls::TestCerts;
use crate::wait_until;

/// The shipped main context and site.
const SHIPPED_MAIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/nginx/nginx.conf");
const SHIPPED_SITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/nginx/latchkey.conf");
const SHIPPED_UPSTREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/nginx/latchkey-upstream.conf"
);

/// A running nginx; killed when dropped.
pub struct Nginx {
    child: tokio::process::Child,
    dir: tempfile::TempDir,
    /// The TLS port it listens on, on 127.0.0.1.
    pub port: u16,
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct NginxOptions {
    /// latchkeyd's plain address, `127.0.0.1:PORT`: one, or several replicas.
    pub upstreams: Vec<String>,
    /// The port to listen on (the public URL latchkeyd was given names it).
    pub port: u16,
    /// The shipped 300 s read timeouts replaced by this (a test of timeouts
    /// scales them down).
    pub read_timeout: Option<String>,
}

impl Nginx {
    /// Debian's nginx binary, when installed.
    pub fn binary() -> Option<PathBuf> {
        ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    }

    /// Starts nginx with the shipped files and `certs`, and waits until it
    /// accepts connections.
    pub async fn start(
        binary: &Path,
        certs: &TestCerts,
        options: &NginxOptions,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        certs.write(dir.path())?;
        std::fs::write(dir.path().join("latchkey.conf"), site(options, dir.path())?)?;
        std::fs::write(dir.path().join("upstream.conf"), upstream(options)?)?;
        std::fs::write(dir.path().join("nginx.conf"), main(dir.path())?)?;
        let child = tokio::process::Command::new(binary)
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-p")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting nginx")?;
        let port = options.port;
        let up = wait_until(Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        if !up {
            bail!(
                "nginx did not start: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
        }
        Ok(Self { child, dir, port })
    }

    /// nginx with the shipped files in front of `upstreams`, on `port`, with
    /// certificates made for it (the caller's clients trust their CA).
    pub async fn start_in_front(
        binary: &Path,
        upstreams: Vec<String>,
        port: u16,
    ) -> anyhow::Result<(Self, TestCerts)> {
        let certs = TestCerts::generate()?;
        let options = NginxOptions {
            upstreams,
            port,
            read_timeout: None,
        };
        let nginx = Self::start(binary, &certs, &options).await?;
        Ok((nginx, certs))
    }

    /// Its process id (one process: no master).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The access log so far.
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// The error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Stops nginx and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// `text` with each `(from, to)` replaced; `from` must be there.
fn replace_all(
    mut text: String,
    file: &str,
    replacements: &[(&str, String)],
) -> anyhow::Result<String> {
    for (from, to) in replacements {
        if !text.contains(from) {
            bail!("{file} no longer contains {from:?}");
        }
        text = text.replace(from, to);
    }
    Ok(text)
}

/// The shipped main context, run as one process in `dir`: with a master
/// process, a kill on drop reached only the master and left its worker running.
fn main(dir: &Path) -> anyhow::Result<String> {
    let shipped = std::fs::read_to_string(SHIPPED_MAIN).context(SHIPPED_MAIN)?;
    let d = dir.display();
    let main = replace_all(
        shipped,
        "deploy/nginx/nginx.conf",
        &[
            (
                "user www-data;",
                "daemon off;\nmaster_process off;".to_string(),
            ),
            ("pid /run/nginx.pid;", format!("pid {d}/nginx.pid;")),
            ("/var/log/nginx/error.log", format!("{d}/error.log")),
            (
                "http {",
                format!(
                    "http {{\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    \
                     fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    \
                     scgi_temp_path {d}/scgi;"
                ),
            ),
            (
                "/etc/nginx/conf.d/latchkey.conf",
                format!("{d}/latchkey.conf"),
            ),
        ],
    )?;
    Ok(main)
}

/// The shipped site with the test's ports, certificate and log paths.
fn site(options: &NginxOptions, dir: &Path) -> anyhow::Result<String> {
    let shipped = std::fs::read_to_string(SHIPPED_SITE).context(SHIPPED_SITE)?;
    let mut replacements = vec![
        (
            "listen 443 ssl;",
            format!("listen 127.0.0.1:{} ssl;", options.port),
        ),
        (
            "include /etc/nginx/latchkey-upstream.conf;",
            format!("include {}/upstream.conf;", dir.display()),
        ),
        (
            "server_name gw.example.com;",
            "server_name localhost;".to_string(),
        ),
        (
            "/etc/latchkey/tls/fullchain.pem",
            dir.join("cert.pem").display().to_string(),
        ),
        (
            "/etc/latchkey/tls/privkey.pem",
            dir.join("key.pem").display().to_string(),
        ),
        (
            "/var/log/nginx/latchkey.access.log",
            dir.join("access.log").display().to_string(),
        ),
    ];
    if let Some(timeout) = &options.read_timeout {
        replacements.push(("300s;", format!("{timeout};")));
    }
    replace_all(shipped, "deploy/nginx/latchkey.conf", &replacements)
}

/// The shipped upstream with the test's replicas on its `server` line, each
/// with the line's shipped parameters.
fn upstream(options: &NginxOptions) -> anyhow::Result<String> {
    const SHIPPED_SERVER: &str = "server 127.0.0.1:52800";
    let shipped = std::fs::read_to_string(SHIPPED_UPSTREAM).context(SHIPPED_UPSTREAM)?;
    let line = shipped
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(SHIPPED_SERVER))
        .context("deploy/nginx/latchkey-upstream.conf has no `server 127.0.0.1:52800` line")?;
    let params = &line[SHIPPED_SERVER.len()..];
    let servers = options
        .upstreams
        .iter()
        .map(|u| format!("server {u}{params}"))
        .collect::<Vec<_>>()
        .join("\n    ");
    replace_all(
        shipped.clone(),
        "deploy/nginx/latchkey-upstream.conf",
        &[(line, servers)],
    )
}

/// A port free on 127.0.0.1 now (for a listener that must be named before it
/// starts, such as nginx's, which latchkeyd's public URL names).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// latchkeyd (SQLite, `limits` edited) behind the shipped nginx files on a free
/// port, with the proxy trusted and the public URL naming it; `None` (skipped
/// loudly) where nginx is not installed and this is not CI.
pub async fn start_behind_nginx(
    read_timeout: Option<&str>,
    limits: fn(&mut latchkey_server::config::Limits),
) -> anyhow::Result<Option<(crate::TestServer, Nginx, TestCerts)>> {
    let Some(binary) = Nginx::binary() else {
        anyhow::ensure!(std::env::var_os("CI").is_none(), "nginx is required in CI");
        eprintln!("\n!!! SKIPPED: nginx is not installed (apt-get install nginx) !!!\n");
        return Ok(None);
    };
    let port = free_port()?;
    let public = format!("wss://localhost:{port}");
    let server = crate::TestServer::builder(crate::Backend::Sqlite)
        .limits(limits)
        .config(move |c| {
            c.trusted_proxies = "127.0.0.1/32".parse().into_iter().collect();
            c.public_url = Some(public);
        })
        .start()
        .await?;
    let certs = TestCerts::generate()?;
    let options = NginxOptions {
        upstreams: vec![server.addr().to_string()],
        port,
        read_timeout: read_timeout.map(str::to_string),
    };
    let nginx = Nginx::start(&binary, &certs, &options).await?;
    Ok(Some((server, nginx, certs)))
}
