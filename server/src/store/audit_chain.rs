//! The audit trail's hash chain in the store (docs/operations.md, "Tamper
//! evidence"): reading a tenant's chain back for `latchkeyd audit verify`, and the
//! SQL that extends it, used by the group commit's one insert of audit rows and
//! by the start-up step that chains rows written before the chain existed.
//!
//! A chain is extended only inside a write transaction that holds the tenant's
//! `audit_head` row: `UPDATE audit_head … RETURNING` takes its row lock on
//! PostgreSQL (a second replica's writer waits for the commit, then reads the new
//! head), and SQLite's `BEGIN IMMEDIATE` serialises every writer. So the chain
//! never forks.

use async_trait::async_trait;

use super::StoreError;
use crate::audit_chain::ChainedRow;

#[async_trait]
pub trait AuditChainStore: Send + Sync {
    /// Up to `limit` of the tenant's chained rows after place `after`, in chain
    /// order.
    async fn audit_chain_page(
        &self,
        tenant_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<ChainedRow>, StoreError>;
    /// The tenant's chain head: the last row's place and hash (none before the
    /// first row).
    async fn audit_head(&self, tenant_id: &str) -> Result<Option<(i64, String)>, StoreError>;
    /// The id of a row of the tenant that is outside the chain, if any.
    async fn audit_unchained(&self, tenant_id: &str) -> Result<Option<i64>, StoreError>;
}

/// The chained columns, in [`ChainedRow`] order.
macro_rules! chained_columns {
    () => {
        "id, tenant_id, seq, at, actor, action, target, outcome, detail, hash"
    };
}

/// [`AuditChainStore`] and the chain's write path in portable SQL, for each backend
/// beside `impl_sql_store!`.
macro_rules! impl_sql_audit_chain {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::AuditChainStore for $store {
            async fn audit_chain_page(
                &self,
                tenant_id: &str,
                after: i64,
                limit: i64,
            ) -> Result<Vec<$crate::audit_chain::ChainedRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", chained_columns!(), " FROM audit_event \
                     WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"))
                .bind(tenant_id)
                .bind(after)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn audit_head(
                &self,
                tenant_id: &str,
            ) -> Result<Option<(i64, String)>, $crate::store::StoreError> {
                Ok(sqlx::query_as("SELECT seq, hash FROM audit_head WHERE tenant_id = $1")
                    .bind(tenant_id)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn audit_unchained(
                &self,
                tenant_id: &str,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                let row: Option<(i64,)> = sqlx::query_as(
                    "SELECT id FROM audit_event WHERE tenant_id = $1 AND seq IS NULL ORDER BY id LIMIT 1",
                )
                .bind(tenant_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(id,)| id))
            }
        }

        /// Lock the tenant's chain head for this transaction and read it, creating
        /// it at the genesis when the tenant has none yet.
        async fn lock_audit_head(
            tx: &mut $crate::store::write_tx::WriteTx<<$store as $crate::store::sql::Backend>::Db>,
            tenant_id: &str,
        ) -> Result<(i64, String), $crate::store::StoreError> {
            for _ in 0..2 {
                let head: Option<(i64, String)> = sqlx::query_as(
                    "UPDATE audit_head SET seq = seq WHERE tenant_id = $1 RETURNING seq, hash",
                )
                .bind(tenant_id)
                .fetch_optional(&mut **tx)
                .await?;
                if let Some(head) = head {
                    return Ok(head);
                }
                sqlx::query(
                    "INSERT INTO audit_head (tenant_id, seq, hash) VALUES ($1, 0, $2) \
                     ON CONFLICT (tenant_id) DO NOTHING",
                )
                .bind(tenant_id)
                .bind($crate::audit_chain::GENESIS)
                .execute(&mut **tx)
                .await?;
            }
            Err($crate::store::StoreError::Internal(
                "the audit chain head could not be created".into(),
            ))
        }

        /// Each row's place and hash in its tenant's chain, in the order given,
        /// with every tenant's head moved past them (in this transaction).
        async fn extend_audit_chains(
            tx: &mut $crate::store::write_tx::WriteTx<<$store as $crate::store::sql::Backend>::Db>,
            rows: &[$crate::audit_chain::Content<'_>],
        ) -> Result<Vec<(i64, String)>, $crate::store::StoreError> {
            let mut heads: std::collections::HashMap<&str, (i64, String)> =
                std::collections::HashMap::new();
            // Heads in a fixed order (by tenant id), so two writers never wait on
            // each other's heads in opposite orders.
            let tenants: std::collections::BTreeSet<&str> =
                rows.iter().map(|r| r.tenant_id).collect();
            for tenant in tenants {
                heads.insert(tenant, lock_audit_head(tx, tenant).await?);
            }
            let mut placed = Vec::with_capacity(rows.len());
            for row in rows {
                let Some((seq, prev)) = heads.get_mut(row.tenant_id) else {
                    continue;
                };
                *seq += 1;
                *prev = row.hash(prev, *seq);
                placed.push((*seq, prev.clone()));
            }
            for (tenant, (seq, hash)) in &heads {
                sqlx::query("UPDATE audit_head SET seq = $2, hash = $3 WHERE tenant_id = $1")
                    .bind(*tenant)
                    .bind(*seq)
                    .bind(hash)
                    .execute(&mut **tx)
                    .await?;
            }
            Ok(placed)
        }

        /// Insert audit rows, each in its place in its tenant's chain (in this
        /// transaction): one statement per chunk, not per row.
        async fn insert_chained_events(
            tx: &mut $crate::store::write_tx::WriteTx<<$store as $crate::store::sql::Backend>::Db>,
            events: &[$crate::store::NewAuditEvent],
        ) -> Result<(), $crate::store::StoreError> {
            let content: Vec<$crate::audit_chain::Content<'_>> =
                events.iter().map($crate::store::NewAuditEvent::content).collect();
            let placed = extend_audit_chains(tx, &content).await?;
            let rows: Vec<_> = events.iter().zip(&placed).collect();
            for chunk in $crate::store::sql_batches::statement_chunks(&rows) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO audit_event (tenant_id, at, actor, action, target, outcome, detail, seq, hash) ",
                );
                q.push_values(chunk, |mut row, (e, (seq, hash))| {
                    row.push_bind(&e.tenant_id)
                        .push_bind(e.at)
                        .push_bind(&e.actor)
                        .push_bind(&e.action)
                        .push_bind(&e.target)
                        .push_bind(&e.outcome)
                        .push_bind(&e.detail)
                        .push_bind(*seq)
                        .push_bind(hash);
                });
                q.build().execute(&mut **tx).await?;
            }
            Ok(())
        }

        /// Chain the rows written before the chain existed, oldest first, a
        /// thousand per transaction. Run once at start-up, after the migrations.
        async fn chain_audit_backlog(store: &$store) -> Result<u64, $crate::store::StoreError> {
            let mut chained = 0;
            loop {
                let mut tx = store.begin_write().await?;
                let rows: Vec<(i64, String, i64, String, String, String, String, Option<String>)> =
                    sqlx::query_as(
                        "SELECT id, tenant_id, at, actor, action, target, outcome, detail \
                         FROM audit_event WHERE seq IS NULL ORDER BY id LIMIT 1000",
                    )
                    .fetch_all(&mut *tx)
                    .await?;
                if rows.is_empty() {
                    return Ok(chained);
                }
                let content: Vec<$crate::audit_chain::Content<'_>> = rows
                    .iter()
                    .map(|r| $crate::audit_chain::Content {
                        tenant_id: &r.1,
                        at: r.2,
                        actor: &r.3,
                        action: &r.4,
                        target: &r.5,
                        outcome: &r.6,
                        detail: r.7.as_deref(),
                    })
                    .collect();
                let placed = extend_audit_chains(&mut tx, &content).await?;
                for (row, (seq, hash)) in rows.iter().zip(placed) {
                    sqlx::query("UPDATE audit_event SET seq = $2, hash = $3 WHERE id = $1")
                        .bind(row.0)
                        .bind(seq)
                        .bind(hash)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                chained += rows.len() as u64;
            }
        }
    };
}

pub(super) use {chained_columns, impl_sql_audit_chain};
