//! Policies (docs/policy.md): the team's on its tenant row, a browser's on its
//! device row, each the normalised JSON its setter wrote. A trait of its own
//! beside [`Store`], scoped by tenant like every other.
//!
//! [`Store`]: super::Store

use async_trait::async_trait;

use super::StoreError;

/// The stored policies a session on one browser runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRows {
    /// The team's policy document, if one was set.
    pub team: Option<String>,
    /// The browser's, if one was set.
    pub device: Option<String>,
    /// The team's name, for the person's consent prompt.
    pub team_name: String,
}

#[async_trait]
pub trait PolicyStore: Send + Sync {
    /// The team's policy document; `None` when none is set.
    async fn team_policy(&self, tenant_id: &str) -> Result<Option<String>, StoreError>;
    /// Set (or with `None` clear) the team's policy.
    async fn set_team_policy(
        &self,
        tenant_id: &str,
        policy: Option<&str>,
    ) -> Result<(), StoreError>;
    /// The team's and a browser's policy in one read; `None` when the team has
    /// no such browser (revoked ones included: their policy can still be read).
    async fn device_policies(
        &self,
        tenant_id: &str,
        device_id: &str,
    ) -> Result<Option<PolicyRows>, StoreError>;
    /// Set (or clear) a browser's policy; false when the team has no such browser.
    async fn set_device_policy(
        &self,
        tenant_id: &str,
        device_id: &str,
        policy: Option<&str>,
    ) -> Result<bool, StoreError>;
}

/// [`PolicyStore`] in portable SQL, for each backend beside `impl_sql_store!`.
macro_rules! impl_sql_policies {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::PolicyStore for $store {
            async fn team_policy(
                &self,
                tenant_id: &str,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                let row: Option<(Option<String>,)> =
                    sqlx::query_as("SELECT policy FROM tenant WHERE id = $1")
                        .bind(tenant_id)
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(row.and_then(|(p,)| p))
            }

            async fn set_team_policy(
                &self,
                tenant_id: &str,
                policy: Option<&str>,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("UPDATE tenant SET policy = $2 WHERE id = $1")
                    .bind(tenant_id)
                    .bind(policy)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn device_policies(
                &self,
                tenant_id: &str,
                device_id: &str,
            ) -> Result<Option<$crate::store::PolicyRows>, $crate::store::StoreError> {
                let row: Option<(Option<String>, Option<String>, String)> = sqlx::query_as(
                    "SELECT t.policy, d.policy, t.name FROM device d JOIN tenant t ON t.id = d.tenant_id \
                     WHERE d.tenant_id = $1 AND d.id = $2",
                )
                .bind(tenant_id)
                .bind(device_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(team, device, team_name)| $crate::store::PolicyRows { team, device, team_name }))
            }

            async fn set_device_policy(
                &self,
                tenant_id: &str,
                device_id: &str,
                policy: Option<&str>,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let changed =
                    sqlx::query("UPDATE device SET policy = $3 WHERE tenant_id = $1 AND id = $2")
                        .bind(tenant_id)
                        .bind(device_id)
                        .bind(policy)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                tx.commit().await?;
                Ok(changed == 1)
            }
        }
    };
}

pub(super) use impl_sql_policies;
