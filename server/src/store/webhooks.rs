//! Webhook endpoints and their delivery log (docs/webhooks.md). An endpoint
//! follows its team's audit trail by place (`cursor_seq`): the trail is the
//! outbox, so an event is delivered exactly when its row is committed, and a
//! restart or another replica resumes where the last one stopped. A replica
//! takes an endpoint for a while (`lease_until`) before delivering to it, so two
//! replicas never deliver the same endpoint at once.

use async_trait::async_trait;

use super::StoreError;

/// One endpoint as stored.
#[derive(Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct WebhookRecord {
    pub id: String,
    pub tenant_id: String,
    pub url: String,
    pub events: String,
    pub description: Option<String>,
    /// The signing secret: only the delivery worker reads it.
    pub secret: String,
    pub created_at: i64,
    pub cursor_seq: i64,
    pub attempts: i64,
    pub failing_since: Option<i64>,
    pub next_attempt_at: i64,
    pub disabled_at: Option<i64>,
}

impl std::fmt::Debug for WebhookRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("WebhookRecord")
            .field("id", &self.id)
            .field("tenant_id", &self.tenant_id)
            .field("cursor_seq", &self.cursor_seq)
            .finish_non_exhaustive()
    }
}

impl WebhookRecord {
    /// Whether the endpoint follows `action`.
    pub fn follows(&self, action: &str) -> bool {
        self.events.split(' ').any(|e| e == action)
    }
}

/// One attempt, as logged.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeliveryRecord {
    pub endpoint_id: String,
    pub seq: i64,
    pub event_type: String,
    pub attempt: i64,
    pub at: i64,
    pub delivered: bool,
    pub status: Option<i64>,
    pub error: Option<String>,
}

/// Where an endpoint stands after a round of deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub cursor_seq: i64,
    pub attempts: i64,
    pub failing_since: Option<i64>,
    pub next_attempt_at: i64,
    pub disabled_at: Option<i64>,
}

/// Attempts kept per endpoint in the log.
pub const DELIVERIES_KEPT: i64 = 100;

#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Add an endpoint, unless the tenant has `max` already (then `false`).
    async fn create_webhook(&self, w: &WebhookRecord, max: i64) -> Result<bool, StoreError>;
    async fn list_webhooks(&self, tenant_id: &str) -> Result<Vec<WebhookRecord>, StoreError>;
    async fn get_webhook(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Option<WebhookRecord>, StoreError>;
    /// Remove an endpoint and its log; whether it existed.
    async fn delete_webhook(&self, tenant_id: &str, id: &str) -> Result<bool, StoreError>;
    /// Deliver again from where it stopped; whether it existed.
    async fn enable_webhook(&self, tenant_id: &str, id: &str, now: i64)
    -> Result<bool, StoreError>;
    /// Take up to `limit` endpoints that are enabled, due at `now`, not held by
    /// another replica, and behind their team's trail, holding them until
    /// `now + lease_ms`.
    async fn claim_webhooks(
        &self,
        now: i64,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError>;
    /// Record where a claimed endpoint stands and let it go.
    async fn release_webhook(&self, id: &str, p: &Progress) -> Result<(), StoreError>;
    /// Log an attempt, keeping the newest [`DELIVERIES_KEPT`].
    async fn log_delivery(&self, d: &DeliveryRecord) -> Result<(), StoreError>;
    /// The endpoint's newest attempts first.
    async fn list_deliveries(
        &self,
        endpoint_id: &str,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;
}

/// The endpoint columns, in [`WebhookRecord`] order.
macro_rules! webhook_columns {
    () => {
        "id, tenant_id, url, events, description, secret, created_at, cursor_seq, \
         CAST(attempts AS BIGINT) AS attempts, failing_since, next_attempt_at, disabled_at"
    };
}

/// [`WebhookStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_webhooks {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::WebhookStore for $store {
            async fn create_webhook(
                &self,
                w: &$crate::store::webhooks::WebhookRecord,
                max: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let (count,): (i64,) =
                    sqlx::query_as("SELECT COUNT(*) FROM webhook_endpoint WHERE tenant_id = $1")
                        .bind(&w.tenant_id)
                        .fetch_one(&mut *tx)
                        .await?;
                if count >= max {
                    tx.rollback().await?;
                    return Ok(false);
                }
                sqlx::query(
                    "INSERT INTO webhook_endpoint (id, tenant_id, url, events, description, secret, created_at, cursor_seq) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, \
                       COALESCE((SELECT seq FROM audit_head WHERE tenant_id = $2), 0))",
                )
                .bind(&w.id)
                .bind(&w.tenant_id)
                .bind(&w.url)
                .bind(&w.events)
                .bind(&w.description)
                .bind(&w.secret)
                .bind(w.created_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn list_webhooks(
                &self,
                tenant_id: &str,
            ) -> Result<Vec<$crate::store::webhooks::WebhookRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", webhook_columns!(), " FROM webhook_endpoint \
                     WHERE tenant_id = $1 ORDER BY created_at, id"))
                .bind(tenant_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn get_webhook(
                &self,
                tenant_id: &str,
                id: &str,
            ) -> Result<Option<$crate::store::webhooks::WebhookRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", webhook_columns!(), " FROM webhook_endpoint \
                     WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn delete_webhook(
                &self,
                tenant_id: &str,
                id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let done = sqlx::query("DELETE FROM webhook_endpoint WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant_id)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() > 0 {
                    sqlx::query("DELETE FROM webhook_delivery WHERE endpoint_id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            }

            async fn enable_webhook(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let done = sqlx::query(
                    "UPDATE webhook_endpoint SET disabled_at = NULL, attempts = 0, \
                     failing_since = NULL, next_attempt_at = $3 WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn claim_webhooks(
                &self,
                now: i64,
                lease_ms: i64,
                limit: i64,
            ) -> Result<Vec<$crate::store::webhooks::WebhookRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "UPDATE webhook_endpoint SET lease_until = $1 + $2 WHERE id IN (\
                       SELECT w.id FROM webhook_endpoint w JOIN audit_head h ON h.tenant_id = w.tenant_id \
                       WHERE w.disabled_at IS NULL AND w.next_attempt_at <= $1 AND w.lease_until <= $1 \
                       AND w.cursor_seq < h.seq ORDER BY w.next_attempt_at LIMIT $3) \
                     AND lease_until <= $1 RETURNING ", webhook_columns!()))
                .bind(now)
                .bind(lease_ms)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn release_webhook(
                &self,
                id: &str,
                p: &$crate::store::webhooks::Progress,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "UPDATE webhook_endpoint SET cursor_seq = $2, attempts = $3, failing_since = $4, \
                     next_attempt_at = $5, disabled_at = $6, lease_until = 0 WHERE id = $1",
                )
                .bind(id)
                .bind(p.cursor_seq)
                .bind(p.attempts as i32)
                .bind(p.failing_since)
                .bind(p.next_attempt_at)
                .bind(p.disabled_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn log_delivery(
                &self,
                d: &$crate::store::webhooks::DeliveryRecord,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "INSERT INTO webhook_delivery (endpoint_id, seq, event_type, attempt, at, delivered, status, error) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&d.endpoint_id)
                .bind(d.seq)
                .bind(&d.event_type)
                .bind(d.attempt as i32)
                .bind(d.at)
                .bind(d.delivered)
                .bind(d.status.map(|s| s as i32))
                .bind(&d.error)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "DELETE FROM webhook_delivery WHERE endpoint_id = $1 AND id <= \
                     (SELECT id FROM webhook_delivery WHERE endpoint_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
                )
                .bind(&d.endpoint_id)
                .bind($crate::store::webhooks::DELIVERIES_KEPT)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn list_deliveries(
                &self,
                endpoint_id: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::webhooks::DeliveryRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT endpoint_id, seq, event_type, CAST(attempt AS BIGINT) AS attempt, at, delivered, \
                     CAST(status AS BIGINT) AS status, error FROM webhook_delivery \
                     WHERE endpoint_id = $1 ORDER BY id DESC LIMIT $2",
                )
                .bind(endpoint_id)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }
        }
    };
}

pub(super) use {impl_sql_webhooks, webhook_columns};
