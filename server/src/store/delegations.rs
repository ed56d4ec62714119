//! Delegation tokens' rows (docs/delegation.md): the gateway's signing keys
//! (gateway-wide, like tenants) and each delegation minted, scoped by tenant.

use async_trait::async_trait;

use super::StoreError;

/// One signing key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SigningKeyRecord {
    pub kid: String,
    pub algorithm: String,
    /// PKCS#8, base64: never leaves the store but to sign.
    pub private_key: String,
    /// Raw public key, base64url.
    pub public_key: String,
    pub created_at: i64,
    pub retired_at: Option<i64>,
}

/// One delegation minted.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DelegationRecord {
    pub id: String,
    pub tenant_id: String,
    pub root_token_id: String,
    /// Space-separated: the root token, then each delegation down to this one.
    pub chain: String,
    pub name: String,
    /// The scope's JSON.
    pub scope: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

#[async_trait]
pub trait DelegationStore: Send + Sync {
    /// Every signing key, newest first.
    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>, StoreError>;
    /// Add `key` and retire every older key that still signs, in one transaction.
    async fn rotate_signing_key(&self, key: &SigningKeyRecord) -> Result<(), StoreError>;
    /// Drop keys retired before `before` (every token they signed has expired).
    async fn drop_signing_keys(&self, before: i64) -> Result<u64, StoreError>;
    async fn insert_delegation(&self, d: &DelegationRecord) -> Result<(), StoreError>;
    async fn delegation(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Option<DelegationRecord>, StoreError>;
    /// The delegation if it, and the API token at its root, are live at `now`:
    /// the one read a request with a delegation token makes.
    async fn live_delegation(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<DelegationRecord>, StoreError>;
    /// The team's delegations whose chain includes `id` (a token or a delegation),
    /// newest first.
    async fn delegations_under(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Vec<DelegationRecord>, StoreError>;
    /// The team's live delegations (not revoked, not expired at `now`), newest
    /// first, at most `limit`: what an admin reviews.
    async fn live_delegations(
        &self,
        tenant_id: &str,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DelegationRecord>, StoreError>;
    /// Revoke delegation `id` and every one below it in the chain; the ids
    /// revoked now. Empty when the team has no such live delegation.
    async fn revoke_delegation(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Vec<String>, StoreError>;
}

macro_rules! delegation_columns {
    () => {
        "id, tenant_id, root_token_id, chain, name, scope, created_at, expires_at, revoked_at"
    };
}

/// [`DelegationStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_delegations {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::DelegationStore for $store {
            async fn signing_keys(
                &self,
            ) -> Result<Vec<$crate::store::SigningKeyRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT kid, algorithm, private_key, public_key, created_at, retired_at \
                     FROM signing_key ORDER BY created_at DESC, kid",
                )
                .fetch_all(&self.pool)
                .await?)
            }

            async fn rotate_signing_key(
                &self,
                key: &$crate::store::SigningKeyRecord,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("UPDATE signing_key SET retired_at = $1 WHERE retired_at IS NULL")
                    .bind(key.created_at)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO signing_key (kid, algorithm, private_key, public_key, created_at, retired_at) \
                     VALUES ($1, $2, $3, $4, $5, NULL)",
                )
                .bind(&key.kid)
                .bind(&key.algorithm)
                .bind(&key.private_key)
                .bind(&key.public_key)
                .bind(key.created_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn drop_signing_keys(&self, before: i64) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let n = sqlx::query("DELETE FROM signing_key WHERE retired_at < $1")
                    .bind(before)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                Ok(n)
            }

            async fn insert_delegation(
                &self,
                d: &$crate::store::DelegationRecord,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(concat!(
                    "INSERT INTO delegation (", delegation_columns!(), ") \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"))
                .bind(&d.id)
                .bind(&d.tenant_id)
                .bind(&d.root_token_id)
                .bind(&d.chain)
                .bind(&d.name)
                .bind(&d.scope)
                .bind(d.created_at)
                .bind(d.expires_at)
                .bind(d.revoked_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn delegation(
                &self,
                tenant_id: &str,
                id: &str,
            ) -> Result<Option<$crate::store::DelegationRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", delegation_columns!(), " FROM delegation WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn live_delegation(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::DelegationRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT d.id, d.tenant_id, d.root_token_id, d.chain, d.name, d.scope, \
                     d.created_at, d.expires_at, d.revoked_at \
                     FROM delegation d JOIN api_token t \
                     ON t.id = d.root_token_id AND t.tenant_id = d.tenant_id \
                     WHERE d.tenant_id = $1 AND d.id = $2 AND d.revoked_at IS NULL \
                     AND d.expires_at > $3 AND t.revoked_at IS NULL \
                     AND (t.expires_at IS NULL OR t.expires_at > $3)",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn delegations_under(
                &self,
                tenant_id: &str,
                id: &str,
            ) -> Result<Vec<$crate::store::DelegationRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", delegation_columns!(), " FROM delegation \
                     WHERE tenant_id = $1 AND (' ' || chain || ' ') LIKE ('% ' || $2 || ' %') \
                     ORDER BY created_at DESC, id"))
                .bind(tenant_id)
                .bind(id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn live_delegations(
                &self,
                tenant_id: &str,
                now: i64,
                limit: i64,
            ) -> Result<Vec<$crate::store::DelegationRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", delegation_columns!(), " FROM delegation \
                     WHERE tenant_id = $1 AND revoked_at IS NULL AND expires_at > $2 \
                     ORDER BY created_at DESC, id LIMIT $3"))
                .bind(tenant_id)
                .bind(now)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn revoke_delegation(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let live: Option<(String,)> = sqlx::query_as(
                    "SELECT id FROM delegation WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL",
                )
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                if live.is_none() {
                    return Ok(vec![]);
                }
                let revoked: Vec<(String,)> = sqlx::query_as(
                    "UPDATE delegation SET revoked_at = $3 \
                     WHERE tenant_id = $1 AND revoked_at IS NULL \
                     AND (' ' || chain || ' ') LIKE ('% ' || $2 || ' %') RETURNING id",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(revoked.into_iter().map(|(id,)| id).collect())
            }
        }
    };
}

pub(super) use {delegation_columns, impl_sql_delegations};
