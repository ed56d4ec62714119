//! MCP callers' choices (docs/mcp.md, "Sessions"): the browser a caller picked
//! and the session open on it, shared by every replica through the store. A
//! write names the version it read, so concurrent writers on two replicas never
//! both replace one choice: the second learns it lost and reads again.

use std::time::Instant;

use async_trait::async_trait;

use super::StoreError;
use super::timed::{TimedStore, timed};
use crate::telemetry::metrics::STORE_QUERY;

/// A token's callers kept; past this the least recently changed is forgotten
/// (a client sending a new `Latchkey-Session-Key` per request cannot grow the
/// table without bound).
pub const MAX_CHOICES_PER_TOKEN: i64 = 256;

/// Whose choice: a tenant's token and the client's key (empty for none).
#[derive(Debug, Clone, Copy)]
pub struct ChoiceKey<'a> {
    pub tenant_id: &'a str,
    pub token_id: &'a str,
    pub caller_key: &'a str,
}

/// One caller's stored choice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpChoiceRecord {
    pub device_id: Option<String>,
    pub session_id: Option<String>,
    /// The wire name of the end reason that halted the caller, if one did.
    pub halted: Option<String>,
    /// 1 for the first write, one more for each after it.
    pub version: i64,
}

#[async_trait]
pub trait McpChoiceStore: Send + Sync {
    /// The caller's choice; `None` when it has made none (or it was pruned).
    async fn mcp_choice(&self, key: ChoiceKey<'_>) -> Result<Option<McpChoiceRecord>, StoreError>;
    /// Store `choice` (its `version` is ignored) if the stored version is still
    /// `read` (`None`: no row yet). False, and nothing written, when another
    /// writer came first.
    async fn put_mcp_choice(
        &self,
        key: ChoiceKey<'_>,
        choice: &McpChoiceRecord,
        read: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Forget choices not written since `before_ms`; returns how many went.
    async fn prune_mcp_choices(&self, before_ms: i64) -> Result<u64, StoreError>;
}

#[async_trait]
impl McpChoiceStore for TimedStore {
    async fn mcp_choice(&self, key: ChoiceKey<'_>) -> Result<Option<McpChoiceRecord>, StoreError> {
        timed!("mcp_choice", self.inner.mcp_choice(key))
    }
    async fn put_mcp_choice(
        &self,
        key: ChoiceKey<'_>,
        choice: &McpChoiceRecord,
        read: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        timed!(
            "put_mcp_choice",
            self.inner.put_mcp_choice(key, choice, read, now_ms)
        )
    }
    async fn prune_mcp_choices(&self, before_ms: i64) -> Result<u64, StoreError> {
        timed!("prune_mcp_choices", self.inner.prune_mcp_choices(before_ms))
    }
}

/// [`McpChoiceStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_mcp_choices {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::McpChoiceStore for $store {
            async fn mcp_choice(
                &self,
                key: $crate::store::ChoiceKey<'_>,
            ) -> Result<Option<$crate::store::McpChoiceRecord>, $crate::store::StoreError> {
                let row: Option<(Option<String>, Option<String>, Option<String>, i64)> =
                    sqlx::query_as(
                        "SELECT device_id, session_id, halted, version FROM mcp_choice \
                         WHERE tenant_id = $1 AND token_id = $2 AND caller_key = $3",
                    )
                    .bind(key.tenant_id)
                    .bind(key.token_id)
                    .bind(key.caller_key)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(|(device_id, session_id, halted, version)| {
                    $crate::store::McpChoiceRecord {
                        device_id,
                        session_id,
                        halted,
                        version,
                    }
                }))
            }

            async fn put_mcp_choice(
                &self,
                key: $crate::store::ChoiceKey<'_>,
                choice: &$crate::store::McpChoiceRecord,
                read: Option<i64>,
                now_ms: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let written = match read {
                    Some(version) => sqlx::query(
                        "UPDATE mcp_choice SET device_id = $4, session_id = $5, halted = $6, \
                         version = version + 1, changed_at = $7 \
                         WHERE tenant_id = $1 AND token_id = $2 AND caller_key = $3 AND version = $8",
                    )
                    .bind(key.tenant_id)
                    .bind(key.token_id)
                    .bind(key.caller_key)
                    .bind(&choice.device_id)
                    .bind(&choice.session_id)
                    .bind(&choice.halted)
                    .bind(now_ms)
                    .bind(version)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected(),
                    None => sqlx::query(
                        "INSERT INTO mcp_choice (tenant_id, token_id, caller_key, device_id, \
                         session_id, halted, version, changed_at) VALUES ($1, $2, $3, $4, $5, $6, 1, $7) \
                         ON CONFLICT (tenant_id, token_id, caller_key) DO NOTHING",
                    )
                    .bind(key.tenant_id)
                    .bind(key.token_id)
                    .bind(key.caller_key)
                    .bind(&choice.device_id)
                    .bind(&choice.session_id)
                    .bind(&choice.halted)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected(),
                };
                if written == 1 && read.is_none() {
                    sqlx::query(
                        "DELETE FROM mcp_choice WHERE tenant_id = $1 AND token_id = $2 \
                         AND caller_key NOT IN (SELECT caller_key FROM mcp_choice \
                         WHERE tenant_id = $1 AND token_id = $2 \
                         ORDER BY changed_at DESC, caller_key LIMIT $3)",
                    )
                    .bind(key.tenant_id)
                    .bind(key.token_id)
                    .bind($crate::store::mcp_choices::MAX_CHOICES_PER_TOKEN)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(written == 1)
            }

            async fn prune_mcp_choices(
                &self,
                before_ms: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = sqlx::query("DELETE FROM mcp_choice WHERE changed_at < $1")
                    .bind(before_ms)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(gone)
            }
        }
    };
}

pub(super) use impl_sql_mcp_choices;
