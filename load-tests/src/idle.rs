//! Idle devices: N extensions connected over WSS, first quiet and then heartbeating.
//! Measures the server's RSS and the kernel's socket memory as devices are added
//! (memory per device), the server's CPU while they sit quiet, and its CPU per
//! 10,000 heartbeats (heartbeating window minus quiet window of the same length).

use std::time::Duration;

use crate::fleet::{self, Behaviour, Fleet};
use crate::procfs::{self, KernelSample, Machine, ProcSample, machine};
use crate::target::{Latchkeyd, Relay, ServerOptions};

/// How long the kernel and allocator get to settle before a memory reading.
const SETTLE: Duration = Duration::from_secs(2);
const ONLINE_DEADLINE: Duration = Duration::from_secs(300);

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Step {
    pub devices: usize,
    pub rss_bytes: u64,
    pub slab_bytes: u64,
    pub tcp_buffer_bytes: u64,
    pub fds: usize,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub target: String,
    pub steps: Vec<Step>,
    /// Server RSS growth per device, from no devices to all of them.
    pub rss_per_device: f64,
    /// Kernel memory growth per connection (slab + TCP buffers), both ends of the
    /// loopback connection counted: the server's share is about half.
    pub kernel_per_connection_both_ends: f64,
    /// RSS per device plus half the kernel figure: what one device costs the server.
    pub all_in_per_device: f64,
    pub quiet_cpu_percent: f64,
    pub heartbeats: u64,
    pub cpu_ms_per_10k_heartbeats: f64,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct IdleReport {
    pub scenario: String,
    pub machine: Machine,
    pub devices: usize,
    pub window_secs: f64,
    pub targets: Vec<Target>,
    /// latchkeyd / relay, all-in bytes per device.
    pub ratio_all_in: f64,
    pub devices_per_gib: f64,
}

fn step(devices: usize, p: ProcSample, k: KernelSample) -> Step {
    Step {
        devices,
        rss_bytes: p.rss_bytes,
        slab_bytes: k.slab_bytes,
        tcp_buffer_bytes: k.tcp_buffer_bytes,
        fds: p.fds,
    }
}

/// Connect the extensions in `steps` increments, reading memory after each, then
/// measure the quiet and heartbeating windows.
async fn measure(
    name: &str,
    extensions: Vec<latchkey_testkit::FakeExtension>,
    handshake: bool,
    sample: impl Fn() -> anyhow::Result<ProcSample>,
    steps: usize,
    window: Duration,
) -> anyhow::Result<Target> {
    let total = extensions.len();
    tokio::time::sleep(SETTLE).await;
    let mut readings = vec![step(0, sample()?, procfs::kernel()?)];
    let mut fleets: Vec<Fleet> = Vec::new();
    let mut rest = extensions;
    let per_step = total.div_ceil(steps.max(1)).max(1);
    while !rest.is_empty() {
        let chunk: Vec<_> = rest.drain(..per_step.min(rest.len())).collect();
        let n = chunk.len();
        let mut f = Fleet::launch(
            chunk,
            Behaviour {
                result_bytes: 0,
                delay: Duration::ZERO,
                handshake,
            },
        );
        f.wait_online(n, ONLINE_DEADLINE).await?;
        fleets.push(f);
        tokio::time::sleep(SETTLE).await;
        let connected = fleets.iter().map(Fleet::online).sum();
        readings.push(step(connected, sample()?, procfs::kernel()?));
    }
    let quiet_start = sample()?;
    tokio::time::sleep(window).await;
    let quiet_cpu = sample()?.cpu_secs - quiet_start.cpu_secs;
    for f in &fleets {
        f.set_heartbeat(Some(Duration::from_secs(1)));
    }
    let hb_start = sample()?;
    let sent_before: u64 = fleets.iter().map(Fleet::heartbeats_sent).sum();
    tokio::time::sleep(window).await;
    let hb_cpu = sample()?.cpu_secs - hb_start.cpu_secs;
    let heartbeats = fleets.iter().map(Fleet::heartbeats_sent).sum::<u64>() - sent_before;
    for f in fleets {
        f.stop().await;
    }
    let first = readings
        .first()
        .map(|s| (s.rss_bytes, s.slab_bytes + s.tcp_buffer_bytes));
    let last = readings
        .last()
        .map(|s| (s.devices, s.rss_bytes, s.slab_bytes + s.tcp_buffer_bytes));
    let (rss_per_device, kernel_per) = match (first, last) {
        (Some((r0, k0)), Some((n, r1, k1))) if n > 0 => (
            (r1 as f64 - r0 as f64) / n as f64,
            (k1 as f64 - k0 as f64) / n as f64,
        ),
        _ => (0.0, 0.0),
    };
    Ok(Target {
        target: name.to_string(),
        steps: readings,
        rss_per_device,
        kernel_per_connection_both_ends: kernel_per,
        all_in_per_device: rss_per_device + kernel_per / 2.0,
        quiet_cpu_percent: quiet_cpu / window.as_secs_f64() * 100.0,
        heartbeats,
        cpu_ms_per_10k_heartbeats: ((hb_cpu - quiet_cpu).max(0.0) * 1000.0)
            / (heartbeats.max(1) as f64)
            * 10_000.0,
    })
}

pub async fn run(devices: usize, steps: usize, window_secs: f64) -> anyhow::Result<IdleReport> {
    procfs::check_fd_limit(devices + 500)?;
    let window = Duration::from_secs_f64(window_secs);
    let relay = Relay::start(true).await?;
    let relay_exts = relay.extensions(devices)?;
    let relay_target = measure("relay", relay_exts, false, relay.sampler(), steps, window).await?;
    relay.stop().await;

    let server = Latchkeyd::start(&ServerOptions {
        tls: true,
        devices,
        calls_in_flight_per_device: 8,
        behind_proxy: None,
    })
    .await?;
    let exts = fleet::pair(&server, devices, 8).await?;
    let server_target = measure("latchkeyd", exts, true, server.sampler(), steps, window).await?;
    server.stop().await;
    let ratio_all_in = server_target.all_in_per_device / relay_target.all_in_per_device.max(1.0);
    let devices_per_gib = (1u64 << 30) as f64 / server_target.all_in_per_device.max(1.0);
    Ok(IdleReport {
        scenario: "idle".to_string(),
        machine: machine(),
        devices,
        window_secs,
        targets: vec![relay_target, server_target],
        ratio_all_in,
        devices_per_gib,
    })
}

pub fn print(r: &IdleReport) {
    println!(
        "idle: {} WSS devices, {:.0}s windows",
        r.devices, r.window_secs
    );
    println!(
        "target      RSS/device  kernel/conn (both ends)  all-in/device  quiet CPU  CPU per 10k heartbeats"
    );
    for t in &r.targets {
        println!(
            "{:<11} {:<11} {:<24} {:<14} {:<10} {:.1} ms",
            t.target,
            kib(t.rss_per_device),
            kib(t.kernel_per_connection_both_ends),
            kib(t.all_in_per_device),
            format!("{:.2}%", t.quiet_cpu_percent),
            t.cpu_ms_per_10k_heartbeats
        );
    }
    println!(
        "latchkeyd all-in per device: {:.2}x the relay; {:.0} devices per GiB",
        r.ratio_all_in, r.devices_per_gib
    );
}

pub fn kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}
