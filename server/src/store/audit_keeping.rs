//! Keeping the audit trail (docs/operations.md, "Tamper evidence", "Retention",
//! "Export"): the gateway's audit keys, the signed checkpoints written into each
//! tenant's chain, pruning rows past the team's retention, and the bounds of an
//! export.
//!
//! A checkpoint extends the chain like any row: inside a write transaction that
//! holds the tenant's `audit_head` row, so it takes its turn with the group
//! commit's writers on every replica. Pruning deletes only up to a checkpoint, so
//! what is left starts at a signed place and verifies on its own.

use async_trait::async_trait;

use super::StoreError;

/// One audit key.
#[derive(Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditKeyRecord {
    pub kid: String,
    /// PKCS#8, base64; `None` for a key kept outside the store.
    pub private_key: Option<String>,
    /// Raw public key, base64url.
    pub public_key: String,
    pub created_at: i64,
}

impl std::fmt::Debug for AuditKeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private half.
        f.debug_struct("AuditKeyRecord")
            .field("kid", &self.kid)
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

/// Signs a checkpoint over `(seq, hash)`, returning the checkpoint row's detail.
pub type CheckpointSigner<'a> = &'a (dyn Fn(i64, &str) -> Result<String, StoreError> + Send + Sync);

/// What a prune removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Every row before this place is gone; the row here is a checkpoint.
    pub kept_from: i64,
    pub rows: u64,
}

#[async_trait]
pub trait AuditKeepingStore: Send + Sync {
    /// Every audit key, oldest first.
    async fn audit_keys(&self) -> Result<Vec<AuditKeyRecord>, StoreError>;
    /// Record a key (a second record of the same kid is ignored).
    async fn add_audit_key(&self, key: &AuditKeyRecord) -> Result<(), StoreError>;
    /// Up to `limit` tenants whose chain has grown since its last checkpoint.
    async fn audit_checkpoints_due(&self, limit: i64) -> Result<Vec<String>, StoreError>;
    /// Append a checkpoint to the tenant's chain at `at`, signed over the head by
    /// `sign`; its place, or `None` when the head already is a checkpoint (or the
    /// chain is empty).
    async fn write_audit_checkpoint(
        &self,
        tenant_id: &str,
        at: i64,
        sign: CheckpointSigner<'_>,
    ) -> Result<Option<i64>, StoreError>;
    /// Every tenant with its retention in days (`None`: the gateway's default).
    async fn audit_retentions(&self) -> Result<Vec<(String, Option<i64>)>, StoreError>;
    /// Set the tenant's retention (`None`: back to the gateway's default).
    async fn set_audit_retention(
        &self,
        tenant_id: &str,
        days: Option<i64>,
    ) -> Result<(), StoreError>;
    /// Delete the tenant's rows before its newest checkpoint written before
    /// `before_at`.
    async fn prune_audit(
        &self,
        tenant_id: &str,
        before_at: i64,
    ) -> Result<Option<Pruned>, StoreError>;
    /// The first place at or after `since` and the last place before `until`
    /// (either unset: unbounded).
    async fn audit_seq_bounds(
        &self,
        tenant_id: &str,
        since: Option<i64>,
        until: Option<i64>,
    ) -> Result<(Option<i64>, Option<i64>), StoreError>;
    /// The first checkpoint at place `from` or after.
    async fn audit_next_checkpoint(
        &self,
        tenant_id: &str,
        from: i64,
    ) -> Result<Option<i64>, StoreError>;
}

/// [`AuditKeepingStore`] in portable SQL, for each backend beside
/// `impl_sql_audit_chain!` (whose `lock_audit_head` it uses).
macro_rules! impl_sql_audit_keeping {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::AuditKeepingStore for $store {
            async fn audit_keys(
                &self,
            ) -> Result<Vec<$crate::store::AuditKeyRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT kid, private_key, public_key, created_at FROM audit_key \
                     ORDER BY created_at, kid",
                )
                .fetch_all(&self.pool)
                .await?)
            }

            async fn add_audit_key(
                &self,
                k: &$crate::store::AuditKeyRecord,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "INSERT INTO audit_key (kid, private_key, public_key, created_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (kid) DO NOTHING",
                )
                .bind(&k.kid)
                .bind(&k.private_key)
                .bind(&k.public_key)
                .bind(k.created_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn audit_checkpoints_due(
                &self,
                limit: i64,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                let rows: Vec<(String,)> = sqlx::query_as(
                    "SELECT tenant_id FROM audit_head WHERE seq > checkpoint_seq \
                     ORDER BY tenant_id LIMIT $1",
                )
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.into_iter().map(|(t,)| t).collect())
            }

            async fn write_audit_checkpoint(
                &self,
                tenant_id: &str,
                at: i64,
                sign: $crate::store::audit_keeping::CheckpointSigner<'_>,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                use latchkey_protocol::audit_chain::{CHECKPOINT_ACTION, Content, GATEWAY_ACTOR};
                let mut tx = self.begin_write().await?;
                let (seq, hash) = lock_audit_head(&mut tx, tenant_id).await?;
                let (checkpointed,): (i64,) =
                    sqlx::query_as("SELECT checkpoint_seq FROM audit_head WHERE tenant_id = $1")
                        .bind(tenant_id)
                        .fetch_one(&mut *tx)
                        .await?;
                if seq == 0 || seq == checkpointed {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let detail = sign(seq, &hash)?;
                let target = format!("chain:{seq}");
                let content = Content {
                    tenant_id,
                    at,
                    actor: GATEWAY_ACTOR,
                    action: CHECKPOINT_ACTION,
                    target: &target,
                    outcome: "ok",
                    detail: Some(&detail),
                };
                let place = seq + 1;
                let new_hash = content.hash(&hash, place);
                sqlx::query(
                    "INSERT INTO audit_event (tenant_id, at, actor, action, target, outcome, detail, seq, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(tenant_id)
                .bind(at)
                .bind(GATEWAY_ACTOR)
                .bind(CHECKPOINT_ACTION)
                .bind(&target)
                .bind("ok")
                .bind(&detail)
                .bind(place)
                .bind(&new_hash)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE audit_head SET seq = $2, hash = $3, checkpoint_seq = $2 WHERE tenant_id = $1",
                )
                .bind(tenant_id)
                .bind(place)
                .bind(&new_hash)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Some(place))
            }

            async fn audit_retentions(
                &self,
            ) -> Result<Vec<(String, Option<i64>)>, $crate::store::StoreError> {
                let rows: Vec<(String, Option<i64>)> = sqlx::query_as(
                    "SELECT id, CAST(audit_retention_days AS BIGINT) FROM tenant ORDER BY id",
                )
                .fetch_all(&self.pool)
                .await?;
                Ok(rows)
            }

            async fn set_audit_retention(
                &self,
                tenant_id: &str,
                days: Option<i64>,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query("UPDATE tenant SET audit_retention_days = $2 WHERE id = $1")
                    .bind(tenant_id)
                    .bind(days.and_then(|d| i32::try_from(d).ok()))
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn prune_audit(
                &self,
                tenant_id: &str,
                before_at: i64,
            ) -> Result<Option<$crate::store::audit_keeping::Pruned>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let (keep_from, first): (Option<i64>, Option<i64>) = sqlx::query_as(
                    "SELECT (SELECT MAX(seq) FROM audit_event WHERE tenant_id = $1 \
                             AND action = 'audit.checkpoint' AND actor = 'gateway' AND at < $2), \
                            (SELECT MIN(seq) FROM audit_event WHERE tenant_id = $1)",
                )
                .bind(tenant_id)
                .bind(before_at)
                .fetch_one(&mut *tx)
                .await?;
                let (Some(keep_from), Some(first)) = (keep_from, first) else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                if first >= keep_from {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let done = sqlx::query("DELETE FROM audit_event WHERE tenant_id = $1 AND seq < $2")
                    .bind(tenant_id)
                    .bind(keep_from)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Some($crate::store::audit_keeping::Pruned {
                    kept_from: keep_from,
                    rows: done.rows_affected(),
                }))
            }

            async fn audit_seq_bounds(
                &self,
                tenant_id: &str,
                since: Option<i64>,
                until: Option<i64>,
            ) -> Result<(Option<i64>, Option<i64>), $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT (SELECT MIN(seq) FROM audit_event WHERE tenant_id = $1 \
                             AND ($2 IS NULL OR at >= $2)), \
                            (SELECT MAX(seq) FROM audit_event WHERE tenant_id = $1 \
                             AND ($3 IS NULL OR at < $3))",
                )
                .bind(tenant_id)
                .bind(since)
                .bind(until)
                .fetch_one(&self.pool)
                .await?)
            }

            async fn audit_next_checkpoint(
                &self,
                tenant_id: &str,
                from: i64,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                let (seq,): (Option<i64>,) = sqlx::query_as(
                    "SELECT MIN(seq) FROM audit_event WHERE tenant_id = $1 AND seq >= $2 \
                     AND action = 'audit.checkpoint' AND actor = 'gateway'",
                )
                .bind(tenant_id)
                .bind(from)
                .fetch_one(&self.pool)
                .await?;
                Ok(seq)
            }
        }
    };
}

pub(super) use impl_sql_audit_keeping;
