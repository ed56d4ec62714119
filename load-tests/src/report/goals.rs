//! The goals table: each goal of the load-test issue against its measured figure.

use std::fmt::Write;

use super::Results;
use crate::idle::kib;
use crate::stats::{RoundSpread, ms};

pub(super) struct Goal {
    pub(super) what: &'static str,
    pub(super) target: String,
    pub(super) measured: String,
    pub(super) met: Option<bool>,
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not run",
    }
}

pub(super) fn section(md: &mut String, r: &Results) {
    let mut goals = Vec::new();
    let server = |targets: &[crate::idle::Target]| {
        targets
            .iter()
            .find(|t| t.target == "latchkeyd")
            .map(|t| t.all_in_per_device)
    };
    let idle = r.idle.as_ref().and_then(|i| server(&i.targets));
    goals.push(Goal {
        what: "Idle memory per WSS device, all in",
        target: "≤ 16 KiB (≥ 64,000 devices per GiB)".into(),
        measured: idle
            .map(|b| {
                format!(
                    "{} ({:.0} per GiB)",
                    kib(b),
                    (1u64 << 30) as f64 / b.max(1.0)
                )
            })
            .unwrap_or_default(),
        met: idle.map(|b| b <= 16.0 * 1024.0),
    });
    goals.push(latency(r));
    goals.push(throughput(r));
    goals.push(payload(r));
    goals.push(handshakes(r));
    goals.push(storm(r));
    goals.push(revocation(r));
    let rv = r.revoke.as_ref();
    goals.push(Goal {
        what: "API token revocation → agent socket Close, one node",
        target: "p99 ≤ 5 ms".into(),
        measured: rv
            .and_then(|x| {
                x.token_p99_us
                    .map(|p99| format!("p99 {} ({} tokens)", ms(p99), x.samples))
            })
            .unwrap_or_default(),
        met: rv.and_then(|x| x.token_p99_us.map(|p99| p99 <= 5000)),
    });
    goals.push(super::audit_mcp::audited_calls(r));
    goals.push(super::audit_mcp::mcp(r));
    md.push_str("## Goals\n\n| goal | target | measured | |\n| --- | --- | --- | --- |\n");
    for g in goals {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            g.what,
            g.target,
            g.measured,
            verdict(g.met)
        );
    }
    md.push_str(
        "\nEach goal is a ratio to the bare relay measured in the same run, so that the\n\
         machine's own speed cancels out; where the scenario alternates latchkeyd and relay\n\
         rounds, the figure is the median of the per-round ratios, with their range.\n\
         Scenarios run with `--pin` have every server on core 0 alone and the generator on\n\
         the other core, so \"per server core\" is literal.\n\n",
    );
}

/// A goal's figure and its text: the rounds' median with their spread, or for a
/// run from before the rounds were kept, the pooled ratio, said as such.
pub(super) fn median_or_pooled(rounds: Option<&RoundSpread>, pooled: f64) -> (f64, String) {
    rounds.map_or((pooled, format!("{pooled:.2}× (pooled)")), |s| {
        (s.median, spread(s))
    })
}

/// "median M× (min–max, N rounds)" of a spread.
pub(super) fn spread(s: &RoundSpread) -> String {
    format!(
        "median {:.2}× ({:.2}–{:.2}, {} rounds)",
        s.median, s.min, s.max, s.rounds
    )
}

fn latency(r: &Results) -> Goal {
    let lat = r.latency.as_ref();
    // The rounds' medians; a run from before the rounds has only the pooled ratios.
    let figures = lat.map(|l| match (&l.rounds_p50, &l.rounds_p99) {
        (Some(p50), Some(p99)) => (
            p50.median,
            p99.median,
            format!("p50 {}, p99 {}", spread(p50), spread(p99)),
        ),
        _ => (
            l.socket_p50_ratio,
            l.socket_p99_ratio,
            format!(
                "p50 {:.2}×, p99 {:.2}× (pooled)",
                l.socket_p50_ratio, l.socket_p99_ratio
            ),
        ),
    });
    Goal {
        what: "Latency, 200 B, one at a time (agent socket / relay)",
        target: "p50 ≤ 1.15×, p99 ≤ 1.3×".into(),
        measured: figures.as_ref().map(|f| f.2.clone()).unwrap_or_default(),
        met: figures.map(|(p50, p99, _)| p50 <= 1.15 && p99 <= 1.3),
    }
}

fn throughput(r: &Results) -> Goal {
    let tp = r.throughput.as_ref();
    let ratio = tp.map(|t| median_or_pooled(t.rounds_per_core.as_ref(), t.ratio_per_core));
    // Calls that failed make any rate meaningless: they count against the goal.
    let errors = tp.map(|t| t.errors()).unwrap_or_default();
    Goal {
        what: "Throughput, 64 in flight (per server core)",
        target: "≥ 0.85×, no errors".into(),
        measured: ratio
            .as_ref()
            .map(|x| format!("{}; {errors} errors", x.1))
            .unwrap_or_default(),
        met: ratio.map(|x| x.0 >= 0.85 && errors == 0),
    }
}

fn payload(r: &Results) -> Goal {
    let mib = r.payload.as_ref().and_then(|p| {
        p.round_ratios
            .iter()
            .find(|(bytes, _)| *bytes == 1 << 20)
            .map(|(_, s)| s)
    });
    // A failed call on either server makes the ratio of rates a ratio of something
    // else, as in the throughput goal.
    let errors: u64 = r
        .payload
        .iter()
        .flat_map(|p| &p.points)
        .map(|p| p.errors)
        .sum();
    Goal {
        what: "Payload, 1 MiB (MiB/s)",
        target: "≥ 0.9× (median round), no errors".into(),
        measured: mib
            .map(|s| format!("{}; {errors} errors", spread(s)))
            .unwrap_or_default(),
        met: mib.map(|s| s.median >= 0.9 && errors == 0),
    }
}

fn handshakes(r: &Results) -> Goal {
    let hs = r.handshake.as_ref();
    let figure = hs.map(|h| median_or_pooled(h.rounds_per_core.as_ref(), h.ratio_per_core));
    let failures: u64 = hs.iter().flat_map(|h| &h.points).map(|p| p.failures).sum();
    Goal {
        what: "Full TLS handshakes (ECDSA P-256, per server core)",
        target: "≥ 0.95×, no failures".into(),
        measured: figure
            .as_ref()
            .map(|f| format!("{}; {failures} failures", f.1))
            .unwrap_or_default(),
        met: figure.map(|(ratio, _)| ratio >= 0.95 && failures == 0),
    }
}

/// Judged per jitter window on the median of the per-round ratios (each
/// latchkeyd run against the relay's run of the same round and jitter), the
/// worse window counting; and on every failure of any run.
fn storm(r: &Results) -> Goal {
    let report = r.storm.as_ref();
    let runs = report.map(|s| s.runs.as_slice()).unwrap_or(&[]);
    let ratios = report.map(|s| s.ratios()).unwrap_or_default();
    let time = ratios.iter().map(|x| x.time.median).reduce(f64::max);
    let cpu = ratios
        .iter()
        .map(|x| x.cpu_per_reconnect.median)
        .reduce(f64::max);
    let failures: u64 = runs
        .iter()
        .filter(|x| x.target == "latchkeyd")
        .map(|x| x.failures + x.refused_other)
        .sum();
    let devices = runs.iter().map(|x| x.devices).max().unwrap_or(0);
    let windows: Vec<String> = ratios
        .iter()
        .map(|x| {
            format!(
                "{} ms jitter: time {}, CPU per reconnect {}",
                x.jitter_ms,
                spread(&x.time),
                spread(&x.cpu_per_reconnect)
            )
        })
        .collect();
    Goal {
        what: "Reconnect storm, 10,000 TLS devices",
        target: "all back ≤ 1.25× the relay's time; server CPU per reconnect ≤ 1.3× the relay's; \
                 no failures but 503 + Retry-After"
            .into(),
        measured: if windows.is_empty() {
            String::new()
        } else {
            format!(
                "{devices} devices; {}; {failures} failures in all runs",
                windows.join("; ")
            )
        },
        met: time
            .zip(cpu)
            .map(|(t, c)| devices >= 10_000 && t <= 1.25 && c <= 1.3 && failures == 0),
    }
}

fn revocation(r: &Results) -> Goal {
    let line = |x: &crate::revoke::RevokeReport| {
        format!("{} p99 {} ({} devices)", x.backend, ms(x.p99_us), x.devices)
    };
    let both: Vec<_> = [r.revoke.as_ref(), r.revoke_pg.as_ref()]
        .into_iter()
        .flatten()
        .collect();
    Goal {
        what: "Revocation → Close, 1,000 live devices",
        target: "p99 ≤ 1 ms on SQLite and PostgreSQL".into(),
        measured: both.iter().map(|x| line(x)).collect::<Vec<_>>().join("; "),
        met: (both.len() == 2).then(|| both.iter().all(|x| x.p99_us <= 1000)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn handshake_run(failures: u64) -> Results {
        let point = |target: &str, failures: u64| {
            json!({
                "target": target, "round": 1, "handshakes": 1000, "failures": failures,
                "per_sec": 1000.0, "server_cpu_secs": 0.25, "per_server_core": 4000.0,
                "key_exchange": "X25519", "cipher_suite": "TLS13_AES_128_GCM_SHA256"
            })
        };
        let report = json!({
            "scenario": "handshake",
            "machine": {
                "cpu": "test", "cores": 2, "memory_gib": 1.0, "kernel": "test",
                "latchkey_version": "0", "git_commit": "0", "command": "test", "date": "0"
            },
            "concurrency": 8, "seconds": 1.0,
            "points": [point("relay", 0), point("latchkeyd", failures)],
            "ratio_per_core": 1.0,
        });
        Results {
            handshake: Some(serde_json::from_value(report).expect("a handshake report")),
            ..Results::default()
        }
    }

    #[test]
    fn a_failed_handshake_fails_the_goal_whatever_the_rate() {
        assert_eq!(handshakes(&handshake_run(0)).met, Some(true));
        let failed = handshakes(&handshake_run(3));
        assert_eq!(failed.met, Some(false));
        assert!(
            failed.measured.contains("3 failures"),
            "{}",
            failed.measured
        );
    }
}
