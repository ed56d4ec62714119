//! Devices through the nginx we ship (`deploy/nginx/nginx.conf` and
//! `latchkey.conf`, Debian's nginx binary): do all of them connect, how long does
//! it take, and what does each cost nginx. Debian's stock main context
//! (`worker_connections 768`) dropped every device past about 380 per worker
//! without an HTTP status; the shipped one is sized for thousands
//! (docs/deploy.md, "Sizing nginx").
//!
//! The devices pair with latchkeyd directly (pairing thousands through nginx
//! would meet its own per-address request limit, which is the point of that
//! limit), then dial their WebSockets through nginx over TLS, each from an
//! address of its own.

use std::time::{Duration, Instant};

use anyhow::Context;
use latchkey_testkit::tls::TestCerts;
use latchkey_testkit::{Nginx, NginxOptions};

use crate::fleet::{self, Behaviour, Fleet, Report};
use crate::procfs::{self, Machine, machine};
use crate::target::{Latchkeyd, ServerOptions};

const ONLINE_DEADLINE: Duration = Duration::from_secs(300);
/// How long the devices heartbeat through nginx once all are online: a socket
/// nginx drops shows up as a device going offline.
const HEARTBEAT_WINDOW: Duration = Duration::from_secs(5);
/// How long the kernel and allocators get to settle before a memory reading.
const SETTLE: Duration = Duration::from_secs(2);

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct NginxReport {
    pub scenario: String,
    pub machine: Machine,
    pub devices: usize,
    /// Devices online at once through nginx, after the heartbeat window.
    pub online: usize,
    /// Seconds from launch until every device was online.
    pub seconds_to_all_online: f64,
    /// Upgrades answered with an HTTP status instead of a socket.
    pub refused: usize,
    /// Attempts that failed otherwise (a connection reset: what a full nginx
    /// worker does).
    pub failed: usize,
    /// nginx's RSS growth per device (one TLS connection in, one plain out).
    pub nginx_rss_per_device: f64,
    pub nginx_error_log_lines: usize,
}

pub async fn run(devices: usize) -> anyhow::Result<NginxReport> {
    // The generator, nginx (two per device; it inherits this limit) and
    // latchkeyd's files all count against it.
    procfs::check_fd_limit(devices * 3 + 500)?;
    let binary = Nginx::binary().context("nginx is not installed (apt-get install nginx)")?;
    let port = latchkey_testkit::nginx::free_port()?;
    let server = Latchkeyd::start(&ServerOptions {
        tls: false,
        devices,
        calls_in_flight_per_device: 8,
        behind_proxy: Some(port),
    })
    .await?;
    let certs = TestCerts::generate()?;
    let nginx = Nginx::start(
        &binary,
        &certs,
        &NginxOptions {
            upstreams: vec![server.addr.to_string()],
            port,
            read_timeout: None,
        },
    )
    .await?;
    let nginx_pid = nginx.pid().context("nginx has no pid")?;
    let tls = Some(certs.client_config()?);
    let mut extensions = fleet::pair(&server, devices, 64).await?;
    for ext in &mut extensions {
        ext.via(&format!("wss://localhost:{port}/extension"), tls.clone());
    }
    tokio::time::sleep(SETTLE).await;
    let before = procfs::sample(nginx_pid)?;
    let started = Instant::now();
    let mut fleet = Fleet::launch(
        extensions,
        Behaviour {
            result_bytes: 0,
            delay: Duration::ZERO,
            handshake: true,
        },
    );
    let reports = fleet.wait_online(devices, ONLINE_DEADLINE).await;
    let seconds_to_all_online = started.elapsed().as_secs_f64();
    let reports = reports.with_context(|| {
        format!(
            "through nginx; its error log: {}",
            last_lines(&nginx.error_log(), 5)
        )
    })?;
    fleet.set_heartbeat(Some(Duration::from_secs(1)));
    tokio::time::sleep(HEARTBEAT_WINDOW).await;
    let online = fleet.online();
    tokio::time::sleep(SETTLE).await;
    let after = procfs::sample(nginx_pid)?;
    let refused = reports
        .iter()
        .filter(|r| matches!(r, Report::Refused { .. }))
        .count();
    let failed = reports
        .iter()
        .filter(|r| matches!(r, Report::Failed(_)))
        .count();
    let error_log = nginx.error_log();
    fleet.stop().await;
    nginx.stop().await;
    server.stop().await;
    Ok(NginxReport {
        scenario: "nginx".to_string(),
        machine: machine(),
        devices,
        online,
        seconds_to_all_online,
        refused,
        failed,
        nginx_rss_per_device: (after.rss_bytes as f64 - before.rss_bytes as f64)
            / devices.max(1) as f64,
        nginx_error_log_lines: error_log.lines().count(),
    })
}

/// Fails unless every device stayed online through nginx.
pub fn all_online(r: &NginxReport) -> anyhow::Result<()> {
    anyhow::ensure!(
        r.online == r.devices,
        "only {} of {} devices stayed online through nginx",
        r.online,
        r.devices
    );
    Ok(())
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn print(r: &NginxReport) {
    println!(
        "nginx: {} WSS devices through the shipped deploy/nginx files",
        r.devices
    );
    println!(
        "online {} of {} after {:.1}s of heartbeats; all online {:.1}s after launch; \
         {} refused, {} failed attempts; nginx {:.1} KiB per device; {} error log lines",
        r.online,
        r.devices,
        HEARTBEAT_WINDOW.as_secs_f64(),
        r.seconds_to_all_online,
        r.refused,
        r.failed,
        r.nginx_rss_per_device / 1024.0,
        r.nginx_error_log_lines
    );
}
