//! Relayed calls per second: closed-loop at several concurrencies (P device/agent
//! pairs with up to 8 calls in flight each) and one open-loop run at a fixed rate,
//! on latchkeyd and on the bare relay, with the servers' CPU time from /proc so the
//! figure can be given per server core.

use std::time::Duration;

use crate::agents;
use crate::pairs::{self, Pairs};
use crate::procfs::{Machine, ProcSample, machine};
use crate::stats::{RoundSpread, Summary, summarize};
use crate::target::{Latchkeyd, Relay, ServerOptions};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub target: String,
    pub concurrency: usize,
    pub calls: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub calls_per_sec: f64,
    pub server_cpu_secs: f64,
    /// Calls per second of server CPU time: what one fully busy server core relays.
    pub calls_per_server_core: f64,
    pub latency: Summary,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct OpenLoop {
    pub target: String,
    pub rate: u64,
    pub calls: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub server_cpu_secs: f64,
    pub latency: Summary,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ThroughputReport {
    pub scenario: String,
    pub machine: Machine,
    pub seconds_per_point: f64,
    pub pad_bytes: usize,
    /// What each call asks for; `navigate` under a policy with `--policy`.
    #[serde(default)]
    pub calls: agents::CallKind,
    pub points: Vec<Point>,
    pub open_loop: Vec<OpenLoop>,
    /// latchkeyd / relay, calls per server core, at the highest concurrency.
    pub ratio_per_core: f64,
    /// latchkeyd / relay, calls per second of wall time, at the highest concurrency.
    pub ratio_wall: f64,
    /// latchkeyd / relay, calls per server core at the highest concurrency, in
    /// alternating rounds (absent in runs from before the rounds).
    #[serde(default)]
    pub rounds_per_core: Option<RoundSpread>,
    /// The rounds' own points, in the order they ran: their errors count like
    /// any other's (absent in runs from before they were kept).
    #[serde(default)]
    pub round_points: Vec<Point>,
}

impl ThroughputReport {
    /// Errors in every measured run: the points, the rounds and the open loop.
    pub fn errors(&self) -> u64 {
        let points = self.points.iter().chain(&self.round_points);
        points.map(|p| p.errors).sum::<u64>() + self.open_loop.iter().map(|o| o.errors).sum::<u64>()
    }
}

/// Rounds at the highest concurrency, the two targets taking turns to go first;
/// each a quarter of `seconds`.
const ROUNDS: usize = 8;

/// Most pairs used; higher concurrency means more calls in flight per pair.
const MAX_PAIRS: usize = 8;
/// Sessions per device for the open-loop run (calls in flight per device at once).
const OPEN_LOOP_SESSIONS: usize = 16;

struct Target {
    name: &'static str,
    pairs: Pairs,
    sample: Box<dyn Fn() -> anyhow::Result<ProcSample>>,
}

async fn point(
    t: &mut Target,
    concurrency: usize,
    seconds: f64,
    pad: usize,
    kind: agents::CallKind,
) -> anyhow::Result<Point> {
    let used = concurrency.clamp(1, MAX_PAIRS);
    let in_flight = concurrency.div_ceil(used);
    let before = (t.sample)()?;
    let r = agents::closed_loop(
        &mut t.pairs.agents[..used],
        in_flight,
        Duration::from_secs_f64(seconds),
        pad,
        kind,
    )
    .await?;
    let cpu = (t.sample)()?.cpu_secs - before.cpu_secs;
    Ok(Point {
        target: t.name.to_string(),
        concurrency: used * in_flight,
        calls: r.calls,
        errors: r.errors,
        first_error: r.first_error,
        calls_per_sec: r.calls as f64 / r.elapsed.as_secs_f64(),
        server_cpu_secs: cpu,
        calls_per_server_core: r.calls as f64 / cpu.max(0.01),
        latency: summarize(r.latencies),
    })
}

pub async fn run(
    concurrencies: &[usize],
    seconds: f64,
    rate: u64,
    pad: usize,
    policy: bool,
) -> anyhow::Result<ThroughputReport> {
    // Under a policy every call is a navigation it checks, on both servers alike.
    let kind = if policy {
        agents::CallKind::Navigate
    } else {
        agents::CallKind::Echo
    };
    let options = ServerOptions {
        tls: false,
        devices: MAX_PAIRS,
        calls_in_flight_per_device: 64,
        behind_proxy: None,
    };
    let server = Latchkeyd::start(&options).await?;
    if policy {
        crate::policed::apply(&server.admin(), "/v1/admin/policy").await?;
    }
    let relay = Relay::start(false).await?;
    let mut targets = Vec::new();
    {
        let pairs = pairs::on_relay(&relay, MAX_PAIRS, 0).await?;
        let pid_sample = relay.sampler();
        targets.push(Target {
            name: "relay",
            pairs,
            sample: Box::new(pid_sample),
        });
        let sessions = concurrencies
            .iter()
            .map(|c| c.div_ceil(MAX_PAIRS))
            .max()
            .unwrap_or(1);
        // Open loop needs free sessions for the calls that overlap.
        let pairs =
            pairs::on_latchkeyd(&server, MAX_PAIRS, sessions.max(OPEN_LOOP_SESSIONS), 0).await?;
        targets.push(Target {
            name: "latchkeyd",
            pairs,
            sample: Box::new(server.sampler()),
        });
    }
    let mut points = Vec::new();
    for &c in concurrencies {
        // Warm up both, then measure them back to back.
        for t in targets.iter_mut() {
            point(t, c, seconds.min(1.0) / 2.0, pad, kind).await?;
        }
        for t in targets.iter_mut() {
            points.push(point(t, c, seconds, pad, kind).await?);
        }
    }
    // The goal's figure: the median of per-round ratios, the targets alternating
    // (targets[0] is the relay, targets[1] latchkeyd).
    let top = concurrencies.iter().copied().max().unwrap_or(1);
    let mut round_ratios = Vec::new();
    let mut round_points = Vec::new();
    for n in 0..ROUNDS {
        let order = if n % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut per_core = [0.0; 2];
        for i in order {
            let p = point(&mut targets[i], top, seconds / 4.0, pad, kind).await?;
            per_core[i] = p.calls_per_server_core;
            round_points.push(p);
        }
        round_ratios.push(per_core[1] / per_core[0].max(1.0));
    }
    let mut open_loop = Vec::new();
    if rate > 0 {
        for t in targets.iter_mut() {
            let sockets = std::mem::take(&mut t.pairs.agents);
            let before = (t.sample)()?;
            let r = agents::open_loop(sockets, rate, Duration::from_secs_f64(seconds), pad, kind)
                .await?;
            open_loop.push(OpenLoop {
                target: t.name.to_string(),
                rate,
                calls: r.calls,
                errors: r.errors,
                first_error: r.first_error,
                server_cpu_secs: (t.sample)()?.cpu_secs - before.cpu_secs,
                latency: summarize(r.latencies),
            });
        }
    }
    for t in targets {
        t.pairs.stop().await;
    }
    server.stop().await;
    relay.stop().await;
    let at = |name: &str| {
        points
            .iter()
            .rev()
            .find(|p| p.target == name && p.concurrency >= top.min(MAX_PAIRS))
    };
    let (ratio_per_core, ratio_wall) = match (at("latchkeyd"), at("relay")) {
        (Some(l), Some(r)) => (
            l.calls_per_server_core / r.calls_per_server_core.max(1.0),
            l.calls_per_sec / r.calls_per_sec.max(1.0),
        ),
        _ => (0.0, 0.0),
    };
    Ok(ThroughputReport {
        scenario: if policy {
            "throughput-policy"
        } else {
            "throughput"
        }
        .to_string(),
        machine: machine(),
        seconds_per_point: seconds,
        pad_bytes: pad,
        calls: kind,
        points,
        open_loop,
        ratio_per_core,
        ratio_wall,
        rounds_per_core: RoundSpread::of(round_ratios),
        round_points,
    })
}

pub fn print(r: &ThroughputReport) {
    println!(
        "throughput: closed loop, {:.0}s per point, ~{} B params, {:?} calls",
        r.seconds_per_point, r.pad_bytes, r.calls
    );
    println!("target      conc  calls/s    server CPU s  calls/core-s  p50       p99       errors");
    for p in &r.points {
        println!(
            "{:<11} {:<5} {:<10.0} {:<13.2} {:<13.0} {:<9} {:<9} {}",
            p.target,
            p.concurrency,
            p.calls_per_sec,
            p.server_cpu_secs,
            p.calls_per_server_core,
            crate::stats::ms(p.latency.p50_us),
            crate::stats::ms(p.latency.p99_us),
            p.errors
        );
    }
    for o in &r.open_loop {
        println!(
            "open loop {} at {}/s: {} calls, p50 {} p99 {} p999 {}, server CPU {:.2}s, errors {}",
            o.target,
            o.rate,
            o.calls,
            crate::stats::ms(o.latency.p50_us),
            crate::stats::ms(o.latency.p99_us),
            crate::stats::ms(o.latency.p999_us),
            o.server_cpu_secs,
            o.errors
        );
    }
    let round_errors: u64 = r.round_points.iter().map(|p| p.errors).sum();
    if !r.round_points.is_empty() {
        println!(
            "{} rounds at the top concurrency: {round_errors} errors",
            r.round_points.len() / 2
        );
    }
    for (target, error) in r
        .points
        .iter()
        .chain(&r.round_points)
        .map(|p| (&p.target, &p.first_error))
        .chain(r.open_loop.iter().map(|o| (&o.target, &o.first_error)))
    {
        if let Some(e) = error {
            println!("first error from {target}: {e}");
        }
    }
    println!(
        "latchkeyd / relay at the highest concurrency: {:.2}x per server core, {:.2}x wall",
        r.ratio_per_core, r.ratio_wall
    );
    if let Some(spread) = &r.rounds_per_core {
        println!(
            "per server core in {} alternating rounds: median {:.2}x (min {:.2}x, max {:.2}x)",
            spread.rounds, spread.median, spread.min, spread.max
        );
    }
}
