//! Web console sign-ins (docs/console.md, "Signing in"): one row per signed-in
//! browser, found by the hash of its cookie. Kept in the store, not in the
//! cookie, so that signing out or removing the member ends it at once, on every
//! replica.

use std::time::Instant;

use async_trait::async_trait;

use super::StoreError;
use super::timed::{TimedStore, timed};
use crate::telemetry::metrics::STORE_QUERY;

/// One console sign-in.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConsoleSessionRecord {
    /// SHA-256 of the cookie's secret.
    pub id_hash: String,
    pub tenant_id: String,
    /// SHA-256 of the API token signed in with; `None` for a sign-in through
    /// single sign-on, which names its member instead.
    pub token_hash: Option<String>,
    /// The person signed in (always set without a token).
    pub member_id: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
}

#[async_trait]
pub trait ConsoleSessionStore: Send + Sync {
    /// Keep a new sign-in, and drop the ones that expired before `now_ms`.
    async fn put_console_session(
        &self,
        record: &ConsoleSessionRecord,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// The sign-in whose cookie hashes to `id_hash`, if it has not expired.
    async fn console_session(
        &self,
        id_hash: &str,
        now_ms: i64,
    ) -> Result<Option<ConsoleSessionRecord>, StoreError>;
    /// Sign out: true if it was there.
    async fn delete_console_session(&self, id_hash: &str) -> Result<bool, StoreError>;
    /// End every sign-in of a member of the tenant (the member was removed);
    /// returns how many ended.
    async fn delete_member_console_sessions(
        &self,
        tenant_id: &str,
        member_id: &str,
    ) -> Result<u64, StoreError>;
}

#[async_trait]
impl ConsoleSessionStore for TimedStore {
    async fn put_console_session(
        &self,
        record: &ConsoleSessionRecord,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        timed!(
            "put_console_session",
            self.inner.put_console_session(record, now_ms)
        )
    }
    async fn console_session(
        &self,
        id_hash: &str,
        now_ms: i64,
    ) -> Result<Option<ConsoleSessionRecord>, StoreError> {
        timed!(
            "console_session",
            self.inner.console_session(id_hash, now_ms)
        )
    }
    async fn delete_console_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        timed!(
            "delete_console_session",
            self.inner.delete_console_session(id_hash)
        )
    }
    async fn delete_member_console_sessions(
        &self,
        tenant_id: &str,
        member_id: &str,
    ) -> Result<u64, StoreError> {
        timed!(
            "delete_member_console_sessions",
            self.inner
                .delete_member_console_sessions(tenant_id, member_id)
        )
    }
}

/// [`ConsoleSessionStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_console_sessions {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ConsoleSessionStore for $store {
            async fn put_console_session(
                &self,
                record: &$crate::store::ConsoleSessionRecord,
                now_ms: i64,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("DELETE FROM console_session WHERE expires_at <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO console_session (id_hash, tenant_id, token_hash, member_id, \
                     created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&record.id_hash)
                .bind(&record.tenant_id)
                .bind(&record.token_hash)
                .bind(&record.member_id)
                .bind(record.created_at)
                .bind(record.expires_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn console_session(
                &self,
                id_hash: &str,
                now_ms: i64,
            ) -> Result<Option<$crate::store::ConsoleSessionRecord>, $crate::store::StoreError>
            {
                Ok(sqlx::query_as(
                    "SELECT id_hash, tenant_id, token_hash, member_id, created_at, expires_at \
                     FROM console_session WHERE id_hash = $1 AND expires_at > $2",
                )
                .bind(id_hash)
                .bind(now_ms)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn delete_console_session(
                &self,
                id_hash: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = sqlx::query("DELETE FROM console_session WHERE id_hash = $1")
                    .bind(id_hash)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(gone == 1)
            }

            async fn delete_member_console_sessions(
                &self,
                tenant_id: &str,
                member_id: &str,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let gone = sqlx::query(
                    "DELETE FROM console_session WHERE tenant_id = $1 AND member_id = $2",
                )
                .bind(tenant_id)
                .bind(member_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(gone)
            }
        }
    };
}

pub(super) use impl_sql_console_sessions;
