//! An audit export end to end (docs/operations.md, "Export"): a team's trail of
//! tool-call rows, written by the group commit, streamed by the real
//! `GET /v1/admin/audit/export` over HTTP, then checked as `latchkey audit
//! verify-file` checks it (the same walk, in process). Rows a second for each
//! half, and the bytes a row takes in the file.

use std::time::Instant;

use latchkey_protocol::audit_chain::{AuditKeySet, ExportHeader, ExportedRow, VerifyingKeys, Walk};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct AuditExportReport {
    pub scenario: String,
    pub backend: String,
    /// Rows in the export (the filled ones, the team's own and the checkpoint).
    pub rows: usize,
    pub export_seconds: f64,
    pub export_rows_per_sec: f64,
    pub bytes_per_row: f64,
    pub verify_seconds: f64,
    pub verify_rows_per_sec: f64,
}

pub async fn run(rows: usize, postgres: bool) -> anyhow::Result<AuditExportReport> {
    let backend = if postgres {
        Backend::postgres()
            .await
            .ok_or_else(|| anyhow::anyhow!("PostgreSQL not reachable"))?
    } else {
        Backend::Sqlite
    };
    let server = TestServer::start(backend).await?;
    let result = measure(&server, rows, if postgres { "postgres" } else { "sqlite" }).await;
    server.stop().await;
    result
}

async fn measure(
    server: &TestServer,
    rows: usize,
    backend: &str,
) -> anyhow::Result<AuditExportReport> {
    let tenant = server.default_tenant_id().await?;
    crate::audit_writer::fill(server.state().store.clone(), &tenant, rows).await;
    let admin = server.admin();
    let (status, keys) = admin.raw(Method::GET, "/v1/admin/audit/keys", None).await?;
    anyhow::ensure!(status == 200, "keys: HTTP {status}");
    let keys = VerifyingKeys::from_set(&serde_json::from_value::<AuditKeySet>(keys)?)
        .map_err(anyhow::Error::msg)?;

    let started = Instant::now();
    let (status, text) = admin.text("/v1/admin/audit/export").await?;
    let export = started.elapsed().as_secs_f64();
    anyhow::ensure!(status == 200, "export: HTTP {status}");

    let started = Instant::now();
    let mut lines = text.lines();
    let header: ExportHeader = serde_json::from_str(lines.next().unwrap_or_default())?;
    let mut walk = Walk::after(&keys, header.after_seq, header.after_hash.clone());
    let mut exported = 0;
    for line in lines {
        let row: ExportedRow = serde_json::from_str(line)?;
        walk.step(&row.as_row(&header.tenant_id))?;
        exported += 1;
    }
    let verify = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        walk.summary().unsigned() == 0,
        "the export ends at a checkpoint"
    );
    Ok(AuditExportReport {
        scenario: "audit_export".into(),
        backend: backend.into(),
        rows: exported,
        export_seconds: export,
        export_rows_per_sec: exported as f64 / export.max(1e-9),
        bytes_per_row: text.len() as f64 / exported.max(1) as f64,
        verify_seconds: verify,
        verify_rows_per_sec: exported as f64 / verify.max(1e-9),
    })
}

pub fn print(r: &AuditExportReport) {
    println!(
        "audit export ({}): {} rows exported in {:.2} s = {:.0} rows/s ({:.0} bytes a row); verified in {:.2} s = {:.0} rows/s",
        r.backend,
        r.rows,
        r.export_seconds,
        r.export_rows_per_sec,
        r.bytes_per_row,
        r.verify_seconds,
        r.verify_rows_per_sec
    );
}
