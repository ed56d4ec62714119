//! Pairing in bulk (docs/benchmarks.md, "Pairing in bulk"): `devices` links made
//! and redeemed over HTTP against latchkeyd in its own process, `concurrency` at a
//! time, as an admin enrolling a fleet would; pairings a second, and how many were
//! refused and retried (a refusal is a 503 from a store that was busy, never a
//! rate limit: the generator's own are lifted).

use std::time::Instant;

use crate::fleet;
use crate::target::{Latchkeyd, ServerOptions};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct PairingReport {
    pub scenario: String,
    pub backend: String,
    pub devices: usize,
    pub concurrency: usize,
    pub seconds: f64,
    pub pairings_per_sec: f64,
    /// Pairings retried after a refusal.
    pub retried: u64,
}

pub async fn run(
    devices: usize,
    concurrency: usize,
    postgres: bool,
) -> anyhow::Result<PairingReport> {
    let options = ServerOptions {
        tls: false,
        devices,
        calls_in_flight_per_device: 8,
        behind_proxy: None,
    };
    let (server, scratch) = if postgres {
        let admin_url = match latchkey_testkit::Backend::postgres().await {
            Some(latchkey_testkit::Backend::Postgres { admin_url }) => admin_url,
            _ => anyhow::bail!("PostgreSQL not reachable"),
        };
        let db = latchkey_testkit::ScratchDatabase::create(&admin_url).await?;
        (
            Latchkeyd::start_on(&options, Some(&db.url)).await?,
            Some(db),
        )
    } else {
        (Latchkeyd::start(&options).await?, None)
    };
    let before = fleet::pair_retries();
    let started = Instant::now();
    let paired = fleet::pair(&server, devices, concurrency).await;
    let seconds = started.elapsed().as_secs_f64();
    server.stop().await;
    if let Some(db) = scratch {
        db.drop_database().await;
    }
    let paired = paired?;
    Ok(PairingReport {
        scenario: "pairing".into(),
        backend: if postgres { "postgres" } else { "sqlite" }.into(),
        devices: paired.len(),
        concurrency,
        seconds,
        pairings_per_sec: paired.len() as f64 / seconds.max(1e-9),
        retried: fleet::pair_retries() - before,
    })
}

pub fn print(r: &PairingReport) {
    println!(
        "pairing on {}: {} devices, {} at a time, in {:.2} s: {:.0} pairings/s, {} retried after a refusal",
        r.backend, r.devices, r.concurrency, r.seconds, r.pairings_per_sec, r.retried
    );
}
