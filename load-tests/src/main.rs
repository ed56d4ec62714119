//! `latchkey-load`: scenarios that measure latchkeyd over real sockets on loopback.
//!
//! `revoke`: N devices paired and online; revoke them one at a time and time each
//! from the admin's DELETE to the device seeing the Close frame (the figure the
//! gateway-foundation issue promises: p99 under 5 ms with 1,000 live devices).
//! `latency`: one relayed call at a time on latchkeyd and on a bare relay, side by side.
//! `quick`: small runs of each, for CI; it fails only on errors.

#![allow(clippy::expect_used)]

mod latency;
mod relay;
mod revoke;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "latchkey-load")]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
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
        /// Write the figures as JSON here.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// Added latency of one relayed call, against a bare relay.
    Latency {
        #[arg(long, default_value_t = 5000)]
        calls: usize,
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// A small run for CI: checks for errors only.
    Quick,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    latchkey_testkit::install_crypto_provider();
    match Cli::parse().scenario {
        Scenario::Revoke {
            devices,
            samples,
            postgres,
            json,
        } => {
            let report = revoke::revoke(devices, samples, postgres).await?;
            revoke::print(&report);
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
        }
        Scenario::Latency { calls, json } => {
            let report = latency::run(calls).await?;
            latency::print(&report);
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
            }
        }
        Scenario::Quick => {
            revoke::print(&revoke::revoke(20, 20, false).await?);
            latency::print(&latency::run(200).await?);
        }
    }
    Ok(())
}
