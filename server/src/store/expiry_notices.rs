//! Expiry notices (docs/pairing-and-grants.md, "Expiry notices"): a device whose
//! grant runs out within 7 days, and again within 1 day, gets one
//! `device.expiring` audit row each. The device row is claimed and the audit row
//! written in one transaction, so a notice is written once however many replicas
//! look, and a crash between the two loses neither. A renewal clears the claim,
//! so the next grant gets its own notices.

use async_trait::async_trait;

use super::StoreError;

/// A notice written.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ExpiryNotice {
    pub tenant_id: String,
    pub device_id: String,
    pub expires_at: i64,
}

/// A notice's audit detail, from the notice and its level.
pub type NoticeDetail = fn(&ExpiryNotice, i64) -> String;

#[async_trait]
pub trait ExpiryNoticeStore: Send + Sync {
    /// Claim every live device whose grant ends after `now` and within
    /// `within_ms` and that has had no notice this close yet (`level`: 7 or 1,
    /// the days), and write each one's `device.expiring` row, its detail
    /// `detail(notice, level)`.
    async fn claim_expiry_notices(
        &self,
        now: i64,
        within_ms: i64,
        level: i64,
        detail: NoticeDetail,
    ) -> Result<Vec<ExpiryNotice>, StoreError>;
}

/// [`ExpiryNoticeStore`] in portable SQL, for each backend beside
/// `impl_sql_audit_chain!` (whose `insert_chained_events` it uses).
macro_rules! impl_sql_expiry_notices {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ExpiryNoticeStore for $store {
            async fn claim_expiry_notices(
                &self,
                now: i64,
                within_ms: i64,
                level: i64,
                detail: $crate::store::expiry_notices::NoticeDetail,
            ) -> Result<Vec<$crate::store::expiry_notices::ExpiryNotice>, $crate::store::StoreError>
            {
                let mut tx = self.begin_write().await?;
                if <$store as $crate::store::sql::Backend>::ROW_LOCKS {
                    // The devices in the group commit's order (docs/operations.md,
                    // "How writers take turns"), so the two never deadlock.
                    sqlx::query(
                        "SELECT 1 FROM device \
                         WHERE revoked_at IS NULL AND expires_at > $1 AND expires_at <= $1 + $2 \
                         AND (expiry_notice IS NULL OR expiry_notice > $3) \
                         ORDER BY tenant_id, id FOR UPDATE",
                    )
                    .bind(now)
                    .bind(within_ms)
                    .bind(level)
                    .execute(&mut *tx)
                    .await?;
                }
                let claimed: Vec<$crate::store::expiry_notices::ExpiryNotice> = sqlx::query_as(
                    "UPDATE device SET expiry_notice = $3 \
                     WHERE revoked_at IS NULL AND expires_at > $1 AND expires_at <= $1 + $2 \
                     AND (expiry_notice IS NULL OR expiry_notice > $3) \
                     RETURNING tenant_id, id AS device_id, expires_at",
                )
                .bind(now)
                .bind(within_ms)
                .bind(level)
                .fetch_all(&mut *tx)
                .await?;
                if claimed.is_empty() {
                    tx.rollback().await?;
                    return Ok(claimed);
                }
                let events: Vec<$crate::store::NewAuditEvent> = claimed
                    .iter()
                    .map(|n| $crate::store::NewAuditEvent {
                        tenant_id: n.tenant_id.clone(),
                        at: now,
                        actor: "system".into(),
                        action: $crate::audit::action::DEVICE_EXPIRING.into(),
                        target: $crate::audit::device_ref(&n.device_id),
                        outcome: "ok".into(),
                        detail: Some(detail(n, level)),
                    })
                    .collect();
                insert_chained_events(&mut tx, &events).await?;
                tx.commit().await?;
                Ok(claimed)
            }
        }
    };
}

pub(super) use impl_sql_expiry_notices;
