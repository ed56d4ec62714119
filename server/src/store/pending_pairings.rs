//! Pairing links not yet used (docs/pairing-and-grants.md, "Pending links"): what
//! an admin lists and voids. A trait of its own beside [`Store`], so each stays
//! small; issuing and redeeming links stay in [`Store`]. Every method is scoped by
//! tenant and never reads a link's secret hash.
//!
//! [`Store`]: super::Store

use async_trait::async_trait;

use super::StoreError;

/// A pairing link that can still be redeemed: no secret, not even its hash.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PendingPairingRecord {
    pub id: String,
    pub tenant_id: String,
    pub label: Option<String>,
    /// The API token that made it, by name.
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// The member whose browser it will pair.
    pub owner_id: Option<String>,
}

#[async_trait]
pub trait PendingPairingStore: Send + Sync {
    /// The tenant's unused, unexpired links, newest first. There are at most the
    /// tenant's quota of them, so the list needs no paging.
    async fn pending_pairings(
        &self,
        tenant_id: &str,
        now: i64,
    ) -> Result<Vec<PendingPairingRecord>, StoreError>;
    /// Void one unused, unexpired link so it can never be redeemed (it is marked
    /// used, like the links `revoke_all_devices` voids). `None` when the tenant has
    /// no such pending link: used, voided, expired, foreign and unknown look alike.
    async fn void_pairing(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<PendingPairingRecord>, StoreError>;
}

/// The columns of [`PendingPairingRecord`], in order.
macro_rules! pending_pairing_columns {
    () => {
        "id, tenant_id, label, created_by, created_at, expires_at, owner_id"
    };
}

/// [`PendingPairingStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_pending_pairings {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::PendingPairingStore for $store {
            async fn pending_pairings(
                &self,
                tenant_id: &str,
                now: i64,
            ) -> Result<Vec<$crate::store::PendingPairingRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", pending_pairing_columns!(), " FROM pairing \
                     WHERE tenant_id = $1 AND used_at IS NULL AND expires_at > $2 \
                     ORDER BY created_at DESC, id"))
                .bind(tenant_id)
                .bind(now)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn void_pairing(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::PendingPairingRecord>, $crate::store::StoreError> {
                // One statement: a redemption racing this either committed first (and
                // this finds the link used) or finds it used itself.
                Ok(sqlx::query_as(concat!(
                    "UPDATE pairing SET used_at = $3 \
                     WHERE tenant_id = $1 AND id = $2 AND used_at IS NULL AND expires_at > $3 \
                     RETURNING ", pending_pairing_columns!()))
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?)
            }
        }
    };
}

pub(super) use {impl_sql_pending_pairings, pending_pairing_columns};
