//! Large results: the device answers every call with `size` bytes of data; one call
//! at a time through latchkeyd's agent socket and through the bare relay.

use std::time::Duration;

use crate::agents;
use crate::pairs;
use crate::procfs::{Machine, machine};
use crate::stats::{Summary, ms, summarize};
use crate::target::{Latchkeyd, Relay, ServerOptions};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub target: String,
    pub bytes: usize,
    pub calls: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub mib_per_sec: f64,
    pub latency: Summary,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct PayloadReport {
    pub scenario: String,
    pub machine: Machine,
    pub seconds_per_point: f64,
    pub points: Vec<Point>,
    /// latchkeyd / relay MiB/s, per size.
    pub ratios: Vec<(usize, f64)>,
}

pub async fn run(sizes: &[usize], seconds: f64) -> anyhow::Result<PayloadReport> {
    let server = Latchkeyd::start(&ServerOptions {
        tls: false,
        devices: sizes.len(),
        calls_in_flight_per_device: 8,
    })
    .await?;
    let relay = Relay::start(false).await?;
    let mut points = Vec::new();
    let mut ratios = Vec::new();
    for &bytes in sizes {
        let mut on_relay = pairs::on_relay(&relay, 1, bytes).await?;
        let mut on_server = pairs::on_latchkeyd(&server, 1, 1, bytes).await?;
        let measure = |name: &'static str, r: agents::LoopResult| Point {
            target: name.to_string(),
            bytes,
            calls: r.calls,
            errors: r.errors,
            first_error: r.first_error,
            mib_per_sec: (r.calls as f64 * bytes as f64)
                / (1 << 20) as f64
                / r.elapsed.as_secs_f64(),
            latency: summarize(r.latencies),
        };
        let d = Duration::from_secs_f64(seconds);
        let warm = Duration::from_secs_f64(seconds.min(1.0) / 2.0);
        agents::closed_loop(&mut on_relay.agents, 1, warm, 0).await?;
        agents::closed_loop(&mut on_server.agents, 1, warm, 0).await?;
        let relay_point = measure(
            "relay",
            agents::closed_loop(&mut on_relay.agents, 1, d, 0).await?,
        );
        let server_point = measure(
            "latchkeyd",
            agents::closed_loop(&mut on_server.agents, 1, d, 0).await?,
        );
        ratios.push((
            bytes,
            server_point.mib_per_sec / relay_point.mib_per_sec.max(0.001),
        ));
        points.push(relay_point);
        points.push(server_point);
        on_relay.stop().await;
        on_server.stop().await;
    }
    server.stop().await;
    relay.stop().await;
    Ok(PayloadReport {
        scenario: "payload".to_string(),
        machine: machine(),
        seconds_per_point: seconds,
        points,
        ratios,
    })
}

pub fn print(r: &PayloadReport) {
    println!(
        "payload: one call at a time, {:.0}s per point",
        r.seconds_per_point
    );
    println!("target      size      calls   MiB/s     p50       p99       errors");
    for p in &r.points {
        println!(
            "{:<11} {:<9} {:<7} {:<9.0} {:<9} {:<9} {}",
            p.target,
            format!("{} KiB", p.bytes / 1024),
            p.calls,
            p.mib_per_sec,
            ms(p.latency.p50_us),
            ms(p.latency.p99_us),
            p.errors
        );
    }
    for p in &r.points {
        if let Some(e) = &p.first_error {
            println!("first error from {}: {e}", p.target);
        }
    }
    for (bytes, ratio) in &r.ratios {
        println!("latchkeyd / relay at {} KiB: {ratio:.2}x", bytes / 1024);
    }
}
