//! Reconnect storm: N devices online over WSS all lose their sockets at once and
//! dial again, immediately or spread over a jitter window; measured until every one
//! is back (TLS, upgrade and, on latchkeyd, the handshake), with every refusal and
//! failure counted. Against latchkeyd and the bare relay, in alternating rounds:
//! both servers stay up and the generator's fleet moves between them, so drift in
//! the machine's speed hits both alike, and each goal is judged on the median of
//! the per-round ratios (docs/benchmarks.md, "Goals").

use std::time::{Duration, Instant};

use crate::fleet::{self, Behaviour, Fleet, Report};
use crate::procfs::{Machine, ProcSample, machine};
use crate::stats::RoundSpread;
use crate::target::{Latchkeyd, Relay, ServerOptions};

const BACK_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub target: String,
    /// The round this run belongs to, from 1; 0 in runs from before rounds.
    #[serde(default)]
    pub round: usize,
    pub jitter_ms: u64,
    pub devices: usize,
    /// From the drop until the last device was back.
    pub all_back_secs: f64,
    pub half_back_secs: f64,
    /// 503 with `Retry-After`: the one refusal a storm may cause.
    pub refused_503: u64,
    pub refused_other: u64,
    pub failures: u64,
    pub first_failure: Option<String>,
    /// The server's CPU time (user + system, from /proc) from the drop until the
    /// last device was back: what the storm cost it, apart from the generator.
    #[serde(default)]
    pub server_cpu_secs: f64,
    /// The generator's own CPU time over the same span (this process: every
    /// simulated device's TLS client, upgrade and handshake). With the server's, it
    /// says whether the storm was bound by the two cores or by waiting.
    #[serde(default)]
    pub client_cpu_secs: f64,
    /// (seconds since the drop, devices back), about 100 points.
    pub curve: Vec<(f64, usize)>,
}

impl Run {
    fn cpu_per_device(&self) -> f64 {
        self.server_cpu_secs / self.devices.max(1) as f64
    }

    /// The share of the machine's cores that the server and the generator kept busy
    /// from the drop until the last device was back. Near 1, the storm was bound by
    /// the CPU both ends needed, not by waiting. None for runs from before the
    /// generator's CPU was read.
    pub fn cores_busy(&self, cores: usize) -> Option<f64> {
        let capacity = self.all_back_secs * cores as f64;
        (self.client_cpu_secs > 0.0 && capacity > 0.0)
            .then(|| (self.server_cpu_secs + self.client_cpu_secs) / capacity)
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct StormReport {
    pub scenario: String,
    pub machine: Machine,
    pub devices: usize,
    pub runs: Vec<Run>,
}

/// One jitter window's per-round ratios of latchkeyd to the relay.
#[derive(Debug)]
pub struct Ratios {
    pub jitter_ms: u64,
    /// All-back time.
    pub time: RoundSpread,
    /// Server CPU per device back.
    pub cpu_per_reconnect: RoundSpread,
}

impl StormReport {
    /// Per jitter window, latchkeyd's run against the relay's of the same round.
    pub fn ratios(&self) -> Vec<Ratios> {
        let mut jitters: Vec<u64> = self.runs.iter().map(|r| r.jitter_ms).collect();
        jitters.sort_unstable();
        jitters.dedup();
        jitters
            .into_iter()
            .filter_map(|jitter_ms| {
                let (mut time, mut cpu) = (Vec::new(), Vec::new());
                let of = |target: &str, round| {
                    self.runs.iter().find(|x| {
                        x.target == target && x.jitter_ms == jitter_ms && x.round == round
                    })
                };
                for l in self.runs.iter().filter(|x| x.jitter_ms == jitter_ms) {
                    let Some(relay) = of("relay", l.round).filter(|_| l.target == "latchkeyd")
                    else {
                        continue;
                    };
                    time.push(l.all_back_secs / relay.all_back_secs.max(1e-9));
                    cpu.push(l.cpu_per_device() / relay.cpu_per_device().max(1e-12));
                }
                Some(Ratios {
                    jitter_ms,
                    time: RoundSpread::of(time)?,
                    cpu_per_reconnect: RoundSpread::of(cpu)?,
                })
            })
            .collect()
    }
}

async fn storm(
    name: &str,
    round: usize,
    fleet: &mut Fleet,
    jitter: Duration,
    sample: &dyn Fn() -> anyhow::Result<ProcSample>,
) -> anyhow::Result<Run> {
    fleet.clear_reports();
    let own = || crate::procfs::sample(std::process::id());
    let (cpu_before, own_before) = (sample()?.cpu_secs, own()?.cpu_secs);
    crate::profile::measured(true)?;
    let start = Instant::now();
    fleet.reconnect_all(jitter);
    let reports = fleet.all_back(BACK_DEADLINE).await?;
    crate::profile::measured(false)?;
    let server_cpu_secs = sample()?.cpu_secs - cpu_before;
    let client_cpu_secs = own()?.cpu_secs - own_before;
    let mut back = Vec::with_capacity(fleet.size);
    let (mut refused_503, mut refused_other, mut failures) = (0, 0, 0);
    let mut first_failure = None;
    for r in reports {
        match r {
            Report::Online { at, .. } => {
                back.push(at.saturating_duration_since(start).as_secs_f64())
            }
            Report::Refused {
                status: 503,
                retry_after: Some(_),
            } => refused_503 += 1,
            Report::Refused { status, .. } => {
                refused_other += 1;
                first_failure.get_or_insert(format!("HTTP {status}"));
            }
            Report::Failed(why) => {
                failures += 1;
                first_failure.get_or_insert(why);
            }
        }
    }
    back.sort_by(f64::total_cmp);
    let n = back.len();
    let step = (n / 100).max(1);
    let mut curve: Vec<(f64, usize)> = back
        .iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i + 1 == n)
        .map(|(i, t)| (*t, i + 1))
        .collect();
    curve.insert(0, (0.0, 0));
    Ok(Run {
        target: name.to_string(),
        round,
        jitter_ms: jitter.as_millis() as u64,
        devices: n,
        all_back_secs: back.last().copied().unwrap_or_default(),
        half_back_secs: back.get(n / 2).copied().unwrap_or_default(),
        refused_503,
        refused_other,
        failures,
        first_failure,
        server_cpu_secs,
        client_cpu_secs,
        curve,
    })
}

/// `rounds` rounds; in each, the fleet comes online on one server, goes through a
/// storm per jitter window, stops, and does the same on the other. The order
/// alternates from round to round, so neither server always runs first.
pub async fn run(
    devices: usize,
    jitters: &[Duration],
    rounds: usize,
) -> anyhow::Result<StormReport> {
    crate::procfs::check_fd_limit(devices + 500)?;
    let relay = Relay::start(true).await?;
    let relay_exts = relay.extensions(devices)?;
    let server = Latchkeyd::start(&ServerOptions {
        tls: true,
        devices,
        calls_in_flight_per_device: 8,
        behind_proxy: None,
    })
    .await?;
    let server_exts = fleet::pair(&server, devices, 8).await?;
    let mut runs = Vec::new();
    for round in 1..=rounds.max(1) {
        let relay_first = round % 2 == 1;
        for on_relay in [relay_first, !relay_first] {
            type Sampler = Box<dyn Fn() -> anyhow::Result<ProcSample>>;
            let (name, exts, sampler): (_, _, Sampler) = if on_relay {
                ("relay", &relay_exts, Box::new(relay.sampler()))
            } else {
                ("latchkeyd", &server_exts, Box::new(server.sampler()))
            };
            let behaviour = Behaviour {
                result_bytes: 0,
                delay: Duration::ZERO,
                handshake: !on_relay,
            };
            let mut f = Fleet::launch(exts.clone(), behaviour);
            f.wait_online(devices, BACK_DEADLINE).await?;
            for &j in jitters {
                runs.push(storm(name, round, &mut f, j, &sampler).await?);
            }
            f.stop().await;
        }
    }
    server.stop().await;
    relay.stop().await;
    Ok(StormReport {
        scenario: "storm".to_string(),
        machine: machine(),
        devices,
        runs,
    })
}

pub fn print(r: &StormReport) {
    println!(
        "storm: {} WSS devices drop and dial again at once",
        r.devices
    );
    println!(
        "target      round  jitter   half back  all back  server CPU s  client CPU s  cores busy  503s    other refusals  failures"
    );
    for run in &r.runs {
        println!(
            "{:<11} {:<6} {:<8} {:<10} {:<9} {:<13} {:<13} {:<11} {:<7} {:<15} {}{}",
            run.target,
            run.round,
            format!("{} ms", run.jitter_ms),
            format!("{:.2}s", run.half_back_secs),
            format!("{:.2}s", run.all_back_secs),
            format!("{:.2}", run.server_cpu_secs),
            format!("{:.2}", run.client_cpu_secs),
            run.cores_busy(r.machine.cores)
                .map(|b| format!("{:.0} %", b * 100.0))
                .unwrap_or_default(),
            run.refused_503,
            run.refused_other,
            run.failures,
            run.first_failure
                .as_ref()
                .map(|f| format!(" (first: {f})"))
                .unwrap_or_default()
        );
    }
    for r in r.ratios() {
        println!(
            "{} ms: all back {:.2}× (median of {}, {:.2}–{:.2}), server CPU per reconnect {:.2}× ({:.2}–{:.2})",
            r.jitter_ms,
            r.time.median,
            r.time.rounds,
            r.time.min,
            r.time.max,
            r.cpu_per_reconnect.median,
            r.cpu_per_reconnect.min,
            r.cpu_per_reconnect.max
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{Run, StormReport};

    fn run(all_back_secs: f64, server_cpu_secs: f64, client_cpu_secs: f64) -> Run {
        Run {
            target: "relay".into(),
            round: 1,
            jitter_ms: 0,
            devices: 10_000,
            all_back_secs,
            half_back_secs: all_back_secs / 2.0,
            refused_503: 0,
            refused_other: 0,
            failures: 0,
            first_failure: None,
            server_cpu_secs,
            client_cpu_secs,
            curve: Vec::new(),
        }
    }

    #[test]
    fn cores_busy_is_both_ends_over_what_the_cores_could_give() {
        let busy = run(4.0, 2.8, 4.8).cores_busy(2).expect("busy");
        assert!((busy - 0.95).abs() < 1e-9, "{busy}");
        // Runs from before the generator's CPU was read, and empty runs, have none.
        assert_eq!(run(4.0, 2.8, 0.0).cores_busy(2), None);
        assert_eq!(run(0.0, 0.0, 1.0).cores_busy(2), None);
    }

    #[test]
    fn ratios_pair_each_latchkeyd_run_with_the_relay_run_of_its_round_and_jitter() {
        let at = |target: &str, round, jitter_ms, all_back_secs, server_cpu_secs| Run {
            target: target.into(),
            round,
            jitter_ms,
            ..run(all_back_secs, server_cpu_secs, 1.0)
        };
        let report = StormReport {
            scenario: "storm".into(),
            machine: crate::procfs::machine(),
            devices: 10_000,
            runs: vec![
                at("relay", 1, 0, 4.0, 2.0),
                at("latchkeyd", 1, 0, 5.0, 4.0),
                at("relay", 1, 1000, 2.0, 2.0),
                at("latchkeyd", 1, 1000, 3.0, 3.0),
                at("latchkeyd", 2, 0, 8.0, 6.0),
                at("relay", 2, 0, 5.0, 3.0),
                at("latchkeyd", 3, 0, 6.0, 5.0),
                at("relay", 3, 0, 4.0, 2.0),
                // A round with no relay run has no ratio.
                at("latchkeyd", 4, 0, 99.0, 99.0),
            ],
        };
        let ratios = report.ratios();
        // To three places: the CPU ratios are quotients of quotients.
        let rounded = |v: &[f64]| {
            v.iter()
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(ratios.len(), 2);
        let (none, jittered) = (&ratios[0], &ratios[1]);
        assert_eq!((none.jitter_ms, jittered.jitter_ms), (0, 1000));
        assert_eq!(rounded(&none.time.ratios), vec![1.25, 1.6, 1.5]);
        assert_eq!(rounded(&[none.time.median]), vec![1.5]);
        assert_eq!(rounded(&none.cpu_per_reconnect.ratios), vec![2.0, 2.0, 2.5]);
        assert_eq!(rounded(&[none.cpu_per_reconnect.median]), vec![2.0]);
        assert_eq!(rounded(&jittered.time.ratios), vec![1.5]);
        assert_eq!(rounded(&jittered.cpu_per_reconnect.ratios), vec![1.5]);
    }
}
