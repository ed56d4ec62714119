//! `latchkey-load quick`: every scenario at small sizes, as CI runs it.

use std::path::Path;

use crate::{
    audit_export, audit_writer, behind_nginx, cluster_calls, cluster_revoke, cluster_rolling,
    cluster_throughput, handshake, idle, latency, mcp_path, millis, pairing, payload, report,
    revoke, save, storm, throughput,
};

/// Every scenario at small sizes; any error fails the run, figures are only printed.
/// A scenario that counts its failed calls rather than stopping on the first (the
/// points with many in flight, the storm's devices) is checked here after it is
/// saved, so the figures of a failing run are still on disk to read.
pub async fn quick(out: &Path) -> anyhow::Result<()> {
    let r = idle::run(200, 2, 1.0).await?;
    idle::print(&r);
    save(out, "idle", &r)?;
    let r = latency::run(200, false, true).await?;
    latency::print(&r);
    save(out, "latency", &r)?;
    let r = throughput::run(&[1, 16], 1.0, 500, 150, false).await?;
    throughput::print(&r);
    save(out, "throughput", &r)?;
    none_failed("throughput", r.errors())?;
    // Under a policy, every call must still pass: a refusal is an error here.
    let r = throughput::run(&[16], 1.0, 0, 150, true).await?;
    throughput::print(&r);
    save(out, "throughput-policy", &r)?;
    none_failed("throughput under a policy", r.errors())?;
    let r = mcp_path::run(16, 1.0).await?;
    mcp_path::print(&r);
    save(out, "mcp", &r)?;
    none_failed("mcp", r.errors())?;
    let r = payload::run(&[256 << 10], 1.0).await?;
    payload::print(&r);
    save(out, "payload", &r)?;
    none_failed("payload", r.points.iter().map(|p| p.errors).sum())?;
    let r = handshake::run(8, 0.5, 2).await?;
    handshake::print(&r);
    save(out, "handshake", &r)?;
    none_failed("handshake", r.points.iter().map(|p| p.failures).sum())?;
    let r = storm::run(200, &millis(&[0, 200]), 2).await?;
    storm::print(&r);
    save(out, "storm", &r)?;
    // A 503 with Retry-After is the one answer a storm may get; anything else fails.
    let refused = r.runs.iter().map(|run| run.refused_other + run.failures);
    none_failed("storm", refused.sum())?;
    let r = revoke::revoke(20, 20, false).await?;
    revoke::print(&r);
    save(out, "revoke", &r)?;
    let r = cluster_revoke::run(40).await?;
    cluster_revoke::print(&r);
    save(out, "cluster-revoke", &r)?;
    let r = cluster_calls::run(200).await?;
    cluster_calls::print(&r);
    save(out, "cluster-calls", &r)?;
    let r = cluster_throughput::run(1.0).await?;
    cluster_throughput::print(&r);
    save(out, "cluster-throughput", &r)?;
    let r = cluster_rolling::run(150).await?;
    cluster_rolling::print(&r);
    save(out, "cluster-rolling", &r)?;
    // A store that works answers every pairing: a refusal is an error here.
    let r = pairing::run(300, 64, false).await?;
    pairing::print(&r);
    anyhow::ensure!(r.retried == 0, "{} pairings were refused", r.retried);
    save(out, "pairing-sqlite", &r)?;
    // The shipped nginx holds more browsers than Debian's stock main context
    // (about 380 per worker): every one of 1,200 must connect and stay.
    let r = behind_nginx::run(1_200).await?;
    behind_nginx::print(&r);
    behind_nginx::all_online(&r)?;
    save(out, "nginx", &r)?;
    let r = audit_writer::sqlite(2_000).await?;
    audit_writer::print(&r);
    save(out, "audit-writer-sqlite", &r)?;
    let r = audit_export::run(2_000, false).await?;
    audit_export::print(&r);
    save(out, "audit-export-sqlite", &r)?;
    // The report renders from what was just measured (into the output directory, so
    // docs/ is untouched).
    report::write(
        out,
        &out.join("benchmarks.md"),
        Path::new("load-tests/notes.md"),
    )
}

/// Fail the run when a scenario counted failures.
fn none_failed(scenario: &str, failed: u64) -> anyhow::Result<()> {
    anyhow::ensure!(
        failed == 0,
        "{scenario}: {failed} calls or connections failed (the first is printed above)"
    );
    Ok(())
}
