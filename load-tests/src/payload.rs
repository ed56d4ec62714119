//! Large results: the device answers every call with `size` bytes of data; one call
//! at a time through latchkeyd's agent socket and through the bare relay, in
//! alternating rounds.

use std::time::Duration;

use crate::agents;
use crate::pairs;
use crate::procfs::{Machine, machine};
use crate::stats::{RoundSpread, Summary, ms, summarize};
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
    /// latchkeyd / relay MiB/s over all rounds, per size.
    pub ratios: Vec<(usize, f64)>,
    /// The spread of the rounds' ratios, per size (absent in runs before rounds).
    #[serde(default)]
    pub round_ratios: Vec<(usize, RoundSpread)>,
}

/// Each size is measured in this many rounds, the two targets taking turns (and
/// turns at going first), so that a host that speeds up or slows down during the
/// run weighs on both alike: on a shared virtual machine the relay's own rate moved
/// by a factor of 1.7 within an hour (load-tests/notes.md).
pub const ROUNDS: u32 = 10;

pub async fn run(sizes: &[usize], seconds: f64) -> anyhow::Result<PayloadReport> {
    let server = Latchkeyd::start(&ServerOptions {
        tls: false,
        devices: sizes.len(),
        calls_in_flight_per_device: 8,
        behind_proxy: None,
    })
    .await?;
    let relay = Relay::start(false).await?;
    let mut points = Vec::new();
    let mut ratios = Vec::new();
    let mut spreads = Vec::new();
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
        let warm = Duration::from_secs_f64(seconds.min(1.0) / 2.0);
        agents::closed_loop(&mut on_relay.agents, 1, warm, 0, agents::CallKind::Echo).await?;
        agents::closed_loop(&mut on_server.agents, 1, warm, 0, agents::CallKind::Echo).await?;
        let round = Duration::from_secs_f64(seconds / f64::from(ROUNDS));
        let (mut relay_total, mut server_total) = Default::default();
        let mut round_ratios = Vec::new();
        for n in 0..ROUNDS {
            let (relay_round, server_round) = if n % 2 == 0 {
                let r =
                    agents::closed_loop(&mut on_relay.agents, 1, round, 0, agents::CallKind::Echo)
                        .await?;
                (
                    r,
                    agents::closed_loop(&mut on_server.agents, 1, round, 0, agents::CallKind::Echo)
                        .await?,
                )
            } else {
                let s =
                    agents::closed_loop(&mut on_server.agents, 1, round, 0, agents::CallKind::Echo)
                        .await?;
                (
                    agents::closed_loop(&mut on_relay.agents, 1, round, 0, agents::CallKind::Echo)
                        .await?,
                    s,
                )
            };
            round_ratios
                .push(server_round.calls_per_sec() / relay_round.calls_per_sec().max(0.001));
            agents::LoopResult::then(&mut relay_total, relay_round);
            agents::LoopResult::then(&mut server_total, server_round);
        }
        let relay_point = measure("relay", relay_total);
        let server_point = measure("latchkeyd", server_total);
        ratios.push((
            bytes,
            server_point.mib_per_sec / relay_point.mib_per_sec.max(0.001),
        ));
        if let Some(spread) = RoundSpread::of(round_ratios) {
            spreads.push((bytes, spread));
        }
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
        round_ratios: spreads,
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
        let spread = spread_note(r, *bytes, "x");
        println!(
            "latchkeyd / relay at {} KiB: {ratio:.2}x{spread}",
            bytes / 1024
        );
    }
}

/// " (10 rounds from 0.71x to 1.10x, median 0.93x)" for a size measured in rounds
/// (`times` is the sign after each ratio).
pub fn spread_note(r: &PayloadReport, bytes: usize, times: &str) -> String {
    r.round_ratios
        .iter()
        .find(|(b, _)| *b == bytes)
        .map(|(_, s)| {
            format!(
                " ({} rounds from {:.2}{times} to {:.2}{times}, median {:.2}{times})",
                s.rounds, s.min, s.max, s.median
            )
        })
        .unwrap_or_default()
}
