//! The audit writer on its own (docs/operations.md, "Audit"): how many rows a second
//! the group commit sustains on SQLite and on PostgreSQL, queued from many tasks at
//! once as tool calls queue them, and the storage a million rows take. The rows are
//! shaped like a tool call's (`session.call`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use latchkey_server::store::group_commit::{GroupCommit, Priority};
use latchkey_server::store::{NewAuditEvent, PostgresStore, SqliteStore, Store, TenantRecord};
use latchkey_testkit::{Backend, ScratchDatabase};

/// Tasks queueing rows at once (a busy node's calls in flight).
const WRITERS: usize = 64;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct AuditWriterReport {
    pub scenario: String,
    pub backend: String,
    pub rows: usize,
    pub seconds: f64,
    pub rows_per_sec: f64,
    /// Bytes the store grew by per million rows (SQLite: the database and its
    /// write-ahead log after a checkpoint; PostgreSQL: the audit table with its
    /// indexes and TOAST).
    pub bytes_per_million: f64,
}

fn row(tenant: &str, i: usize) -> NewAuditEvent {
    NewAuditEvent {
        tenant_id: tenant.to_string(),
        at: 1_800_000_000_000 + i as i64,
        actor: "token:research-agent".into(),
        action: "session.call".into(),
        target: format!("session:{:032x}", i / 50),
        outcome: "ok".into(),
        detail: Some(format!("tool.click host:shop.example.com {}ms", i % 400)),
    }
}

/// Queue `rows` tool-call rows from [`WRITERS`] tasks and wait for their commit.
pub async fn fill(store: Arc<dyn Store>, tenant: &str, rows: usize) -> Duration {
    let writer = GroupCommit::start(store);
    let started = Instant::now();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (writer, tenant) = (writer.clone(), tenant.to_string());
            tokio::spawn(async move {
                for i in (w..rows).step_by(WRITERS) {
                    writer.enqueue(Priority::Background, row(&tenant, i)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    // Every row queued before it is committed once this is.
    let _ = writer.commit(Priority::Background, None, None).await;
    started.elapsed()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

async fn tenant(store: &dyn Store) -> anyhow::Result<String> {
    let t = TenantRecord {
        id: "t_audit_load".into(),
        name: "audit-load".into(),
        created_at: 0,
    };
    store.create_tenant(&t).await?;
    Ok(t.id)
}

pub async fn sqlite(rows: usize) -> anyhow::Result<AuditWriterReport> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path(), Duration::from_secs(5)).await?;
    store.migrate().await?;
    let store: Arc<dyn Store> = Arc::new(store);
    let tenant = tenant(store.as_ref()).await?;
    let before = dir_bytes(dir.path());
    let took = fill(store.clone(), &tenant, rows).await;
    store.ping().await?;
    drop(store);
    let grown = dir_bytes(dir.path()).saturating_sub(before);
    Ok(report("sqlite", rows, took, grown))
}

pub async fn postgres(rows: usize) -> anyhow::Result<AuditWriterReport> {
    let Some(Backend::Postgres { admin_url }) = Backend::postgres().await else {
        anyhow::bail!("PostgreSQL not reachable");
    };
    let scratch = ScratchDatabase::create(&admin_url).await?;
    let result = async {
        let store = PostgresStore::connect(&scratch.url, Duration::from_secs(5)).await?;
        store.migrate().await?;
        let url = scratch.url.clone();
        let size = || async {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let (bytes,): (i64,) = sqlx::query_as("SELECT pg_total_relation_size('audit_event')")
                .fetch_one(&mut conn)
                .await
                .context("table size")?;
            let _ = conn.close().await;
            anyhow::Ok(bytes)
        };
        let before = size().await?;
        let store = Arc::new(store);
        let tenant = tenant(store.as_ref()).await?;
        let took = fill(store.clone(), &tenant, rows).await;
        let grown = size().await?.saturating_sub(before);
        anyhow::Ok(report("postgres", rows, took, grown as u64))
    }
    .await;
    scratch.drop_database().await;
    result
}

fn report(backend: &str, rows: usize, took: Duration, grown: u64) -> AuditWriterReport {
    let seconds = took.as_secs_f64();
    AuditWriterReport {
        scenario: "audit_writer".into(),
        backend: backend.into(),
        rows,
        seconds,
        rows_per_sec: rows as f64 / seconds.max(1e-9),
        bytes_per_million: grown as f64 * 1e6 / rows.max(1) as f64,
    }
}

pub fn print(r: &AuditWriterReport) {
    println!(
        "audit writer ({}): {} rows in {:.2} s = {:.0} rows/s; {:.0} MB per million rows",
        r.backend,
        r.rows,
        r.seconds,
        r.rows_per_sec,
        r.bytes_per_million / 1e6
    );
}
