//! The people of a team (docs/people.md): a trait of its own beside [`Store`], so
//! each stays small. Every method is scoped by tenant.
//!
//! [`Store`]: super::Store

use async_trait::async_trait;

use super::{ApiTokenRecord, MemberRecord, MemberRemoved, StoreError};

#[async_trait]
pub trait MemberStore: Send + Sync {
    /// Add a member. A live member of the team with the same email is a
    /// [`StoreError::Conflict`].
    async fn insert_member(&self, member: &MemberRecord) -> Result<(), StoreError>;
    /// The team's members, oldest first; removed ones too with `include_removed`
    /// (a removed member still owns the browsers that were theirs).
    async fn list_members(
        &self,
        tenant_id: &str,
        include_removed: bool,
    ) -> Result<Vec<MemberRecord>, StoreError>;
    /// One member, removed or not.
    async fn member(&self, tenant_id: &str, id: &str) -> Result<Option<MemberRecord>, StoreError>;
    /// The live member of the team with this (lower-case) email, if any: whom
    /// a single sign-on vouching for that address signs in as.
    async fn member_by_email(
        &self,
        tenant_id: &str,
        email: &str,
    ) -> Result<Option<MemberRecord>, StoreError>;
    /// Give a live member of the team a new role; the member as it is now, or
    /// `None` when the team has no such live member.
    async fn set_member_role(
        &self,
        tenant_id: &str,
        id: &str,
        role: &str,
    ) -> Result<Option<MemberRecord>, StoreError>;
    /// Insert an API token with a person behind it (`member_id` set), if that
    /// member is still in the team: checked under the tenant lock that
    /// [`Self::remove_member`] takes, so no token outlives its person's removal.
    /// False when the member is not (or no longer) in the team.
    async fn insert_member_token(&self, token: &ApiTokenRecord) -> Result<bool, StoreError>;
    /// Remove a live member, and in the same transaction revoke their devices and
    /// the API tokens behind them and void their unused pairing links. `None` when
    /// the team has no such live member.
    async fn remove_member(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<MemberRemoved>, StoreError>;
}

/// The member columns in [`MemberRecord`] order.
macro_rules! member_columns {
    () => {
        "id, tenant_id, display_name, email, role, created_at, removed_at"
    };
}

pub(super) use member_columns;

/// [`MemberStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_members {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::MemberStore for $store {
            async fn insert_member(
                &self,
                m: &$crate::store::MemberRecord,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query(concat!(
                    "INSERT INTO member (", member_columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7)"))
                .bind(&m.id)
                .bind(&m.tenant_id)
                .bind(&m.display_name)
                .bind(&m.email)
                .bind(&m.role)
                .bind(m.created_at)
                .bind(m.removed_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn list_members(
                &self,
                tenant_id: &str,
                include_removed: bool,
            ) -> Result<Vec<$crate::store::MemberRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", member_columns!(), " FROM member \
                     WHERE tenant_id = $1 AND ($2 OR removed_at IS NULL) ORDER BY created_at, id"))
                .bind(tenant_id)
                .bind(include_removed)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn member(
                &self,
                tenant_id: &str,
                id: &str,
            ) -> Result<Option<$crate::store::MemberRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", member_columns!(), " FROM member WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn member_by_email(
                &self,
                tenant_id: &str,
                email: &str,
            ) -> Result<Option<$crate::store::MemberRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", member_columns!(), " FROM member \
                     WHERE tenant_id = $1 AND email = $2 AND removed_at IS NULL"))
                .bind(tenant_id)
                .bind(email)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn set_member_role(
                &self,
                tenant_id: &str,
                id: &str,
                role: &str,
            ) -> Result<Option<$crate::store::MemberRecord>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let member = sqlx::query_as(concat!(
                    "UPDATE member SET role = $3 \
                     WHERE tenant_id = $1 AND id = $2 AND removed_at IS NULL \
                     RETURNING ", member_columns!()))
                .bind(tenant_id)
                .bind(id)
                .bind(role)
                .fetch_optional(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(member)
            }

            async fn insert_member_token(
                &self,
                token: &$crate::store::ApiTokenRecord,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("UPDATE tenant SET name = name WHERE id = $1")
                    .bind(&token.tenant_id)
                    .execute(&mut *tx)
                    .await?;
                let live: Option<(String,)> = sqlx::query_as(
                    "SELECT id FROM member WHERE tenant_id = $1 AND id = $2 AND removed_at IS NULL",
                )
                .bind(&token.tenant_id)
                .bind(&token.member_id)
                .fetch_optional(&mut *tx)
                .await?;
                if live.is_none() {
                    return Ok(false);
                }
                insert_api_token(&mut *tx, token).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn remove_member(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::MemberRemoved>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                // The tenant row lock orders this with `insert_pairing` on PostgreSQL.
                sqlx::query("UPDATE tenant SET name = name WHERE id = $1")
                    .bind(tenant_id)
                    .execute(&mut *tx)
                    .await?;
                let member: Option<$crate::store::MemberRecord> = sqlx::query_as(concat!(
                    "UPDATE member SET removed_at = $3 \
                     WHERE tenant_id = $1 AND id = $2 AND removed_at IS NULL RETURNING ", member_columns!(), ""))
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(member) = member else {
                    return Ok(None);
                };
                if <$store as $crate::store::sql::Backend>::ROW_LOCKS {
                    // The devices in the group commit's order (docs/operations.md,
                    // "How writers take turns"), so the two never deadlock.
                    sqlx::query(
                        "SELECT 1 FROM device WHERE tenant_id = $1 AND owner_id = $2 \
                         AND revoked_at IS NULL ORDER BY tenant_id, id FOR UPDATE",
                    )
                    .bind(tenant_id)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                }
                let devices: Vec<(String,)> = sqlx::query_as(
                    "UPDATE device SET revoked_at = $3 \
                     WHERE tenant_id = $1 AND owner_id = $2 AND revoked_at IS NULL RETURNING id",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
                let tokens: Vec<(String,)> = sqlx::query_as(
                    "UPDATE api_token SET revoked_at = $3 \
                     WHERE tenant_id = $1 AND member_id = $2 AND revoked_at IS NULL RETURNING id",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
                let pairings_voided = sqlx::query(
                    "UPDATE pairing SET used_at = $3 \
                     WHERE tenant_id = $1 AND owner_id = $2 AND used_at IS NULL",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(Some($crate::store::MemberRemoved {
                    member,
                    device_ids: devices.into_iter().map(|(id,)| id).collect(),
                    token_ids: tokens.into_iter().map(|(id,)| id).collect(),
                    pairings_voided,
                }))
            }
        }
    };
}

pub(super) use impl_sql_members;
