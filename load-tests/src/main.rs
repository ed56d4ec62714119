//! `latchkey-load`: scenarios that measure latchkeyd over real sockets on loopback,
//! each beside a bare relay measured in the same run (see docs/benchmarks.md).
//!
//! The servers run in child processes of their own (`serve-latchkeyd` runs the real
//! server library exactly as the `latchkeyd` binary does; `serve-relay` the bare
//! relay), so their CPU time and memory are read from /proc apart from the
//! generator's. Every scenario prints a table and writes JSON into `--out`.

#![allow(clippy::expect_used)]

/// The allocator `latchkeyd` ships with, since this binary runs the server library
/// as `latchkeyd` does; the relay and the generator run on it too, so the ratios
/// compare servers on one allocator.
#[global_allocator]
static ALLOCATOR: latchkey_server::Allocator = latchkey_server::Allocator;

mod agents;
mod audit_export;
mod audit_writer;
mod behind_nginx;
mod cluster_calls;
mod cluster_revoke;
mod cluster_rolling;
mod cluster_throughput;
mod fleet;
mod handshake;
mod idle;
mod latency;
mod mcp_path;
mod mcp_plain;
mod pairing;
mod pairs;
mod payload;
mod pin;
mod policed;
mod procfs;
mod profile;
mod quick;
mod relay;
mod report;
mod revoke;
mod stats;
mod storm;
mod svg;
mod target;
mod throughput;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "latchkey-load", about = "Load scenarios for latchkeyd")]
struct Cli {
    /// Run every server process on core 0 alone and the generator on the other
    /// cores (`taskset`), so that "per server core" is literal. Scenarios whose
    /// servers run inside the generator (latency, revoke) are not pinned.
    #[arg(long, global = true)]
    pin: bool,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Args)]
struct Out {
    /// Directory the JSON results are written to.
    #[arg(long, default_value = "target/load-results")]
    out: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// N devices connected over WSS: memory per device, CPU idle and per heartbeat.
    Idle {
        #[arg(long, default_value_t = 10_000)]
        devices: usize,
        /// Memory readings taken as the devices are added.
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Length of the quiet and the heartbeating windows, seconds.
        #[arg(long, default_value_t = 10.0)]
        window: f64,
        #[command(flatten)]
        out: Out,
    },
    /// Added latency of one relayed call, against a bare relay.
    Latency {
        #[arg(long, default_value_t = 20_000)]
        calls: usize,
        /// Navigations under a 20-pattern policy instead of echoes (docs/policy.md).
        #[arg(long)]
        policy: bool,
        /// Also make the HTTP calls with a delegation token (docs/delegation.md).
        #[arg(long)]
        delegation: bool,
        #[command(flatten)]
        out: Out,
    },
    /// Relayed calls per second at several concurrencies, and one open-loop rate.
    Throughput {
        #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
        concurrency: Vec<usize>,
        /// Seconds per measured point.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Open-loop calls per second (0: skip).
        #[arg(long, default_value_t = 5_000)]
        rate: u64,
        /// Navigations under a 20-pattern policy instead of echoes (docs/policy.md).
        #[arg(long)]
        policy: bool,
        #[command(flatten)]
        out: Out,
    },
    /// The MCP path against the agent WebSocket: latency one call at a time,
    /// and calls per server core with many in flight (docs/mcp.md).
    Mcp {
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Seconds for the latency rounds, and again for the throughput point.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[command(flatten)]
        out: Out,
    },
    /// N devices through the shipped nginx files: all online, and nginx's memory
    /// per device (docs/deploy.md, "Sizing nginx").
    Nginx {
        #[arg(long, default_value_t = 3_000)]
        devices: usize,
        #[command(flatten)]
        out: Out,
    },
    /// Large results, one call at a time.
    Payload {
        #[arg(long, value_delimiter = ',', default_value = "1048576,2097152")]
        bytes: Vec<usize>,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[command(flatten)]
        out: Out,
    },
    /// Full TLS handshakes per second.
    Handshake {
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Seconds each server is measured in each round.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Rounds, each measuring the relay and latchkeyd in alternating order.
        #[arg(long, default_value_t = 4)]
        rounds: usize,
        #[command(flatten)]
        out: Out,
    },
    /// N WSS devices reconnecting at once, with and without jitter.
    Storm {
        #[arg(long, default_value_t = 10_000)]
        devices: usize,
        /// Jitter windows to run, milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,1000")]
        jitter_ms: Vec<u64>,
        /// Rounds, each a storm per jitter window on the relay and on latchkeyd,
        /// in alternating order.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        #[command(flatten)]
        out: Out,
    },
    /// One call at a time to a browser on another replica in cluster mode
    /// (PostgreSQL and a nats-server of its own), against the same replica in
    /// the same run.
    ClusterCalls {
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        #[command(flatten)]
        out: Out,
    },
    /// Calls per second of three replicas in cluster mode against one, in one
    /// run (PostgreSQL and a nats-server of its own).
    ClusterThroughput {
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[command(flatten)]
        out: Out,
    },
    /// Device reconnect time in a rolling restart of three replicas in cluster
    /// mode (PostgreSQL and a nats-server of its own).
    ClusterRolling {
        #[arg(long, default_value_t = 1500)]
        devices: usize,
        #[command(flatten)]
        out: Out,
    },
    /// Revoke → Close across two replicas in cluster mode (PostgreSQL and a
    /// nats-server of its own), against the same replica in the same run.
    ClusterRevoke {
        #[arg(long, default_value_t = 1000)]
        devices: usize,
        #[command(flatten)]
        out: Out,
    },
    /// Revoke → Close latency with N live devices.
    Revoke {
        #[arg(long, default_value_t = 1000)]
        devices: usize,
        /// How many of them to revoke (one at a time).
        #[arg(long, default_value_t = 500)]
        samples: usize,
        /// Use the machine's PostgreSQL instead of SQLite.
        #[arg(long)]
        postgres: bool,
        #[command(flatten)]
        out: Out,
    },
    /// Pairing in bulk: links made and redeemed, pairings a second, refusals.
    Pairing {
        #[arg(long, default_value_t = 10_000)]
        devices: usize,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Use the machine's PostgreSQL instead of SQLite.
        #[arg(long)]
        postgres: bool,
        #[command(flatten)]
        out: Out,
    },
    /// Rows a second the audit writer sustains, and the storage a million take.
    AuditWriter {
        #[arg(long, default_value_t = 200_000)]
        rows: usize,
        /// Use the machine's PostgreSQL instead of SQLite.
        #[arg(long)]
        postgres: bool,
        #[command(flatten)]
        out: Out,
    },
    /// An audit export streamed over HTTP and verified offline: rows a second
    /// for each, and bytes a row.
    AuditExport {
        #[arg(long, default_value_t = 200_000)]
        rows: usize,
        /// Use the machine's PostgreSQL instead of SQLite.
        #[arg(long)]
        postgres: bool,
        #[command(flatten)]
        out: Out,
    },
    /// Turn a run's JSON into docs/benchmarks.md with SVG charts beside it.
    Report {
        #[arg(long, default_value = "target/load-results")]
        input: PathBuf,
        #[arg(long, default_value = "docs/benchmarks.md")]
        output: PathBuf,
        /// Hand-written notes appended to the report.
        #[arg(long, default_value = "load-tests/notes.md")]
        notes: PathBuf,
    },
    /// Every scenario at small sizes (about a minute), for CI: fails only on errors.
    Quick {
        #[arg(long, default_value = "target/load-results/quick")]
        out: PathBuf,
    },
    /// The real server library in this process, as `latchkeyd <ARGS>` (used by the scenarios).
    #[command(hide = true)]
    ServeLatchkeyd {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The bare relay in this process (used by the scenarios).
    #[command(hide = true)]
    ServeRelay {
        #[arg(long)]
        tls_cert: Option<PathBuf>,
        #[arg(long)]
        tls_key: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    latchkey_testkit::install_crypto_provider();
    let cli = Cli::parse();
    if cli.pin {
        pin::enable();
    }
    if let Scenario::ServeLatchkeyd { args } = cli.scenario {
        // The server builds its own runtime, exactly as in `latchkeyd`.
        return latchkey_server::cli::run_from(
            std::iter::once("latchkeyd".to_string()).chain(args),
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("latchkey-load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.scenario)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("latchkey-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn save(dir: &Path, name: &str, value: &impl serde::Serialize) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(value)?)?;
    println!("(written to {})\n", path.display());
    Ok(())
}

fn millis(list: &[u64]) -> Vec<Duration> {
    list.iter().map(|&ms| Duration::from_millis(ms)).collect()
}

async fn run(scenario: Scenario) -> anyhow::Result<()> {
    match scenario {
        Scenario::Idle {
            devices,
            steps,
            window,
            out,
        } => {
            let r = idle::run(devices, steps, window).await?;
            idle::print(&r);
            save(&out.out, "idle", &r)
        }
        Scenario::Latency {
            calls,
            policy,
            delegation,
            out,
        } => {
            let r = latency::run(calls, policy, delegation).await?;
            latency::print(&r);
            save(&out.out, &r.scenario, &r)
        }
        Scenario::Throughput {
            concurrency,
            seconds,
            rate,
            policy,
            out,
        } => {
            let r = throughput::run(&concurrency, seconds, rate, 150, policy).await?;
            throughput::print(&r);
            save(&out.out, &r.scenario, &r)
        }
        Scenario::Mcp {
            concurrency,
            seconds,
            out,
        } => {
            let r = mcp_path::run(concurrency, seconds).await?;
            mcp_path::print(&r);
            save(&out.out, "mcp", &r)
        }
        Scenario::Nginx { devices, out } => {
            let r = behind_nginx::run(devices).await?;
            behind_nginx::print(&r);
            behind_nginx::all_online(&r)?;
            save(&out.out, "nginx", &r)
        }
        Scenario::Payload {
            bytes,
            seconds,
            out,
        } => {
            let r = payload::run(&bytes, seconds).await?;
            payload::print(&r);
            save(&out.out, "payload", &r)
        }
        Scenario::Handshake {
            concurrency,
            seconds,
            rounds,
            out,
        } => {
            let r = handshake::run(concurrency, seconds, rounds).await?;
            handshake::print(&r);
            save(&out.out, "handshake", &r)
        }
        Scenario::Storm {
            devices,
            jitter_ms,
            rounds,
            out,
        } => {
            let r = storm::run(devices, &millis(&jitter_ms), rounds).await?;
            storm::print(&r);
            save(&out.out, "storm", &r)
        }
        Scenario::ClusterCalls { calls, out } => {
            let r = cluster_calls::run(calls).await?;
            cluster_calls::print(&r);
            save(&out.out, "cluster-calls", &r)
        }
        Scenario::ClusterThroughput { seconds, out } => {
            let r = cluster_throughput::run(seconds).await?;
            cluster_throughput::print(&r);
            save(&out.out, "cluster-throughput", &r)
        }
        Scenario::ClusterRolling { devices, out } => {
            let r = cluster_rolling::run(devices).await?;
            cluster_rolling::print(&r);
            save(&out.out, "cluster-rolling", &r)
        }
        Scenario::ClusterRevoke { devices, out } => {
            let r = cluster_revoke::run(devices).await?;
            cluster_revoke::print(&r);
            save(&out.out, "cluster-revoke", &r)
        }
        Scenario::Revoke {
            devices,
            samples,
            postgres,
            out,
        } => {
            let r = revoke::revoke(devices, samples, postgres).await?;
            revoke::print(&r);
            save(
                &out.out,
                if postgres {
                    "revoke-postgres"
                } else {
                    "revoke"
                },
                &r,
            )
        }
        Scenario::Report {
            input,
            output,
            notes,
        } => report::write(&input, &output, &notes),
        Scenario::AuditWriter {
            rows,
            postgres,
            out,
        } => {
            let r = if postgres {
                audit_writer::postgres(rows).await?
            } else {
                audit_writer::sqlite(rows).await?
            };
            audit_writer::print(&r);
            save(&out.out, &format!("audit-writer-{}", r.backend), &r)
        }
        Scenario::AuditExport {
            rows,
            postgres,
            out,
        } => {
            let r = audit_export::run(rows, postgres).await?;
            audit_export::print(&r);
            save(&out.out, &format!("audit-export-{}", r.backend), &r)
        }
        Scenario::Pairing {
            devices,
            concurrency,
            postgres,
            out,
        } => {
            let r = pairing::run(devices, concurrency, postgres).await?;
            pairing::print(&r);
            save(&out.out, &format!("pairing-{}", r.backend), &r)
        }
        Scenario::Quick { out } => quick::quick(&out).await,
        Scenario::ServeRelay { tls_cert, tls_key } => {
            relay::serve(tls_cert.as_deref(), tls_key.as_deref()).await
        }
        Scenario::ServeLatchkeyd { .. } => unreachable!("handled before the runtime starts"),
    }
}
