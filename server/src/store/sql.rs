//! The one SQL implementation of [`Store`](super::Store), instantiated for SQLite and
//! PostgreSQL by [`impl_sql_store!`]. The SQL is portable on purpose: `$N`
//! placeholders, `BIGINT` milliseconds, `TEXT` ids and hashes, `RETURNING`.
//! Each backend supplies `pool` and `begin_write()` (SQLite takes the write lock up
//! front with `BEGIN IMMEDIATE`; PostgreSQL relies on row locks).

/// The device columns in [`DeviceRecord`](super::DeviceRecord) order, as a literal
/// so that queries stay `&'static str` (sqlx runs only static SQL unasserted).
macro_rules! device_columns {
    () => {
        "id, tenant_id, label, browser_name, browser_version, created_by, created_at, \
         token_hash, previous_hash, expires_at, renew_after, last_seen_at, revoked_at, owner_id"
    };
}

pub(super) use device_columns;

/// Rows in one multi-row statement: 9 parameters each stays far under SQLite's
/// 32,766 and PostgreSQL's 65,535.
pub(crate) const ROWS_PER_STATEMENT: usize = 256;

macro_rules! impl_sql_store {
    ($store:ty, $backend:literal, $migrator:expr) => {
        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> &'static str {
                $backend
            }

            async fn migrate(&self) -> Result<(), $crate::store::StoreError> {
                $migrator
                    .run(&self.pool)
                    .await
                    .map_err(|e| $crate::store::StoreError::Internal(format!("migration failed: {e}")))?;
                // Rows written before the audit chain existed join it now.
                let chained = chain_audit_backlog(self).await?;
                if chained > 0 {
                    tracing::info!(rows = chained, "audit rows written before the hash chain were chained");
                }
                Ok(())
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn create_tenant(&self, t: &$crate::store::TenantRecord) -> Result<(), $crate::store::StoreError> {
                sqlx::query("INSERT INTO tenant (id, name, created_at) VALUES ($1, $2, $3)")
                    .bind(&t.id)
                    .bind(&t.name)
                    .bind(t.created_at)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn list_tenants(&self) -> Result<Vec<$crate::store::TenantRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as("SELECT id, name, created_at FROM tenant ORDER BY created_at, name")
                    .fetch_all(&self.pool)
                    .await?)
            }

            async fn tenant_by_name(&self, name: &str) -> Result<Option<$crate::store::TenantRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as("SELECT id, name, created_at FROM tenant WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn bootstrap(
                &self,
                t: &$crate::store::TenantRecord,
                token: &$crate::store::ApiTokenRecord,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM tenant")
                    .fetch_one(&mut *tx)
                    .await?;
                if count > 0 {
                    return Ok(false);
                }
                sqlx::query("INSERT INTO tenant (id, name, created_at) VALUES ($1, $2, $3)")
                    .bind(&t.id)
                    .bind(&t.name)
                    .bind(t.created_at)
                    .execute(&mut *tx)
                    .await?;
                insert_api_token(&mut *tx, token).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn insert_api_token(&self, token: &$crate::store::ApiTokenRecord) -> Result<(), $crate::store::StoreError> {
                insert_api_token(&self.pool, token).await
            }

            async fn api_token_by_hash(&self, hash: &str) -> Result<Option<$crate::store::ApiTokenRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT id, tenant_id, name, role, token_hash, created_at, expires_at, revoked_at, last_used_at, member_id \
                     FROM api_token WHERE token_hash = $1",
                )
                .bind(hash)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn list_api_tokens(&self, tenant_id: &str) -> Result<Vec<$crate::store::ApiTokenRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT id, tenant_id, name, role, token_hash, created_at, expires_at, revoked_at, last_used_at, member_id \
                     FROM api_token WHERE tenant_id = $1 ORDER BY created_at, id",
                )
                .bind(tenant_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn revoke_api_token(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::ApiTokenRecord>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "UPDATE api_token SET revoked_at = $3 WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL",
                )
                .bind(tenant_id)
                .bind(id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let token = sqlx::query_as(
                    "SELECT id, tenant_id, name, role, token_hash, created_at, expires_at, revoked_at, last_used_at, member_id \
                     FROM api_token WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(token)
            }

            async fn touch_api_token(&self, tenant_id: &str, id: &str, now: i64) -> Result<(), $crate::store::StoreError> {
                sqlx::query("UPDATE api_token SET last_used_at = $3 WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant_id)
                    .bind(id)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn insert_pairing(
                &self,
                p: &$crate::store::NewPairing,
                now: i64,
                quota: $crate::store::PairingQuota,
            ) -> Result<$crate::store::PairingInsert, $crate::store::StoreError> {
                insert_pairing_rows(self, p, now, quota).await
            }

            async fn redeem_pairing(
                &self,
                secret_hash: &str,
                d: &$crate::store::NewDevice,
            ) -> Result<Option<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                redeem_pairing_rows(self, secret_hash, d).await
            }

            async fn devices_by_token_hash(&self, hashes: &[String]) -> Result<Vec<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                devices_by_token_hash_rows(&self.pool, hashes).await
            }

            async fn device_for_bearer(
                &self,
                bearer_hash: &str,
            ) -> Result<Option<(String, String)>, $crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT tenant_id, id FROM device WHERE token_hash = $1 OR previous_hash = $1",
                )
                .bind(bearer_hash)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn rotate_device_token(
                &self,
                bearer_hash: &str,
                next_hash: &str,
                g: $crate::store::GrantTimes,
            ) -> Result<$crate::store::RotateOutcome, $crate::store::StoreError> {
                use $crate::store::{DeviceRecord, RotateOutcome};
                let mut tx = self.begin_write().await?;
                let rotated: Option<DeviceRecord> = sqlx::query_as(concat!(
                    "UPDATE device SET previous_hash = token_hash, token_hash = $2, expires_at = $4, renew_after = $5, expiry_notice = NULL \
                     WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $3 RETURNING ", device_columns!(), ""))
                .bind(bearer_hash)
                .bind(next_hash)
                .bind(g.now)
                .bind(g.expires_at)
                .bind(g.renew_after)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(device) = rotated {
                    tx.commit().await?;
                    return Ok(RotateOutcome::Rotated(device));
                }
                let retry: Option<DeviceRecord> = sqlx::query_as(concat!(
                    "SELECT ", device_columns!(), " FROM device WHERE previous_hash = $1 AND token_hash = $2 \
                     AND revoked_at IS NULL AND expires_at > $3"))
                .bind(bearer_hash)
                .bind(next_hash)
                .bind(g.now)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(device) = retry {
                    return Ok(RotateOutcome::ExactRetry(device));
                }
                let known: Option<(String, String)> = sqlx::query_as(
                    "SELECT tenant_id, id FROM device WHERE token_hash = $1 OR previous_hash = $1",
                )
                .bind(bearer_hash)
                .fetch_optional(&mut *tx)
                .await?;
                Ok(RotateOutcome::Refused(known))
            }

            async fn device(&self, tenant_id: &str, id: &str) -> Result<Option<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", device_columns!(), " FROM device WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn list_devices(&self, tenant_id: &str) -> Result<Vec<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as(concat!(
                    "SELECT ", device_columns!(), " FROM device WHERE tenant_id = $1 ORDER BY created_at, id"))
                .bind(tenant_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn device_grants(
                &self,
                tenant_id: &str,
                ids: &[String],
            ) -> Result<Vec<$crate::store::DeviceGrant>, $crate::store::StoreError> {
                device_grants_rows(&self.pool, tenant_id, ids).await
            }

            async fn charge_peer(
                &self,
                peer: &str,
                minute: i64,
            ) -> Result<u32, $crate::store::StoreError> {
                let (charges,): (i32,) = sqlx::query_as(
                    "INSERT INTO peer_charge (peer, minute, charges) VALUES ($1, $2, 1) \
                     ON CONFLICT (peer, minute) DO UPDATE SET charges = peer_charge.charges + 1 \
                     RETURNING charges",
                )
                .bind(peer)
                .bind(minute)
                .fetch_one(&self.pool)
                .await?;
                Ok(u32::try_from(charges).unwrap_or(0))
            }

            async fn prune_peer_charges(&self, minute: i64) -> Result<u64, $crate::store::StoreError> {
                Ok(sqlx::query("DELETE FROM peer_charge WHERE minute < $1")
                    .bind(minute)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            }

            async fn unrevoked_token_ids(
                &self,
                tenant_id: &str,
                ids: &[String],
            ) -> Result<Vec<String>, $crate::store::StoreError> {
                unrevoked_token_ids_rows(&self.pool, tenant_id, ids).await
            }

            async fn rename_device(
                &self,
                tenant_id: &str,
                id: &str,
                label: &str,
            ) -> Result<Option<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let device = sqlx::query_as(concat!(
                    "UPDATE device SET label = $3 WHERE tenant_id = $1 AND id = $2 RETURNING ", device_columns!(), ""))
                .bind(tenant_id)
                .bind(id)
                .bind(label)
                .fetch_optional(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(device)
            }

            async fn revoke_device(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<Option<$crate::store::DeviceRecord>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                sqlx::query("UPDATE device SET revoked_at = $3 WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL")
                    .bind(tenant_id)
                    .bind(id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let device = sqlx::query_as(concat!(
                    "SELECT ", device_columns!(), " FROM device WHERE tenant_id = $1 AND id = $2"))
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(device)
            }

            async fn revoke_all_devices(&self, tenant_id: &str, now: i64) -> Result<(Vec<String>, u64), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                if <$store as $crate::store::sql::Backend>::ROW_LOCKS {
                    // In the group commit's order (docs/operations.md, "How
                    // writers take turns"): a replica committing these devices'
                    // last-seen times never waits on this in a cycle, which
                    // PostgreSQL would break by failing one, the revocation
                    // perhaps.
                    sqlx::query(
                        "SELECT 1 FROM device WHERE tenant_id = $1 AND revoked_at IS NULL \
                         ORDER BY tenant_id, id FOR UPDATE",
                    )
                    .bind(tenant_id)
                    .execute(&mut *tx)
                    .await?;
                }
                let ids: Vec<(String,)> = sqlx::query_as(
                    "UPDATE device SET revoked_at = $2 WHERE tenant_id = $1 AND revoked_at IS NULL RETURNING id",
                )
                .bind(tenant_id)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
                // A voided pairing is marked used: it can never be redeemed again.
                let voided = sqlx::query(
                    "UPDATE pairing SET used_at = $2 WHERE tenant_id = $1 AND used_at IS NULL",
                )
                .bind(tenant_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok((ids.into_iter().map(|(id,)| id).collect(), voided))
            }

            async fn ensure_local_device(
                &self,
                tenant_id: &str,
                d: &$crate::store::NewDevice,
            ) -> Result<$crate::store::DeviceRecord, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                // A revoked device is not touched: a refused connection changes nothing.
                let device: Option<$crate::store::DeviceRecord> = sqlx::query_as(concat!(
                    "INSERT INTO device (id, tenant_id, label, created_by, created_at, token_hash, expires_at, renew_after) \
                     VALUES ($1, $2, $3, 'local', $4, $5, $6, $7) \
                     ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at, renew_after = excluded.renew_after, expiry_notice = NULL \
                     WHERE device.tenant_id = excluded.tenant_id AND device.revoked_at IS NULL RETURNING ", device_columns!(), ""))
                .bind(&d.id)
                .bind(tenant_id)
                .bind(&d.label)
                .bind(d.created_at)
                .bind(&d.token_hash)
                .bind(d.expires_at)
                .bind(d.renew_after)
                .fetch_optional(&mut *tx)
                .await?;
                let device = match device {
                    Some(d) => Some(d),
                    None => sqlx::query_as(concat!(
                        "SELECT ", device_columns!(), " FROM device WHERE tenant_id = $1 AND id = $2"))
                    .bind(tenant_id)
                    .bind(&d.id)
                    .fetch_optional(&mut *tx)
                    .await?,
                };
                tx.commit().await?;
                device.ok_or_else(|| $crate::store::StoreError::Conflict("device id belongs to another tenant".into()))
            }

            async fn forget_device(
                &self,
                tenant_id: &str,
                id: &str,
                now: i64,
            ) -> Result<$crate::store::Forget, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let found: Option<(i64, Option<i64>)> = sqlx::query_as(
                    "SELECT expires_at, revoked_at FROM device WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((expires_at, revoked_at)) = found else {
                    return Ok($crate::store::Forget::NotFound);
                };
                if revoked_at.is_none() && expires_at > now {
                    return Ok($crate::store::Forget::Live);
                }
                sqlx::query("DELETE FROM device WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant_id)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok($crate::store::Forget::Forgotten)
            }

            async fn record_activity(
                &self,
                seen: &[$crate::store::DeviceSeen],
                events: &[$crate::store::NewAuditEvent],
            ) -> Result<(), $crate::store::StoreError> {
                record_activity_rows(self, seen, events).await
            }

            async fn insert_audit(&self, e: &$crate::store::NewAuditEvent) -> Result<(), $crate::store::StoreError> {
                self.record_activity(&[], std::slice::from_ref(e)).await
            }

            async fn list_audit(
                &self,
                tenant_id: &str,
                f: &$crate::store::AuditFilter,
                limit: i64,
            ) -> Result<Vec<$crate::store::AuditRecord>, $crate::store::StoreError> {
                list_audit_rows(self, tenant_id, f, limit).await
            }
        }

        async fn insert_api_token<'e, E>(executor: E, t: &$crate::store::ApiTokenRecord) -> Result<(), $crate::store::StoreError>
        where
            E: sqlx::Executor<'e, Database = <$store as $crate::store::sql::Backend>::Db>,
        {
            sqlx::query(
                "INSERT INTO api_token (id, tenant_id, name, role, token_hash, created_at, expires_at, member_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&t.id)
            .bind(&t.tenant_id)
            .bind(&t.name)
            .bind(&t.role)
            .bind(&t.token_hash)
            .bind(t.created_at)
            .bind(t.expires_at)
            .bind(&t.member_id)
            .execute(executor)
            .await?;
            Ok(())
        }
    };
}

pub(super) use impl_sql_store;

/// Ties a store type to its sqlx database, for helpers generic over the executor.
pub(super) trait Backend {
    type Db: sqlx::Database;
    /// Whether writers lock rows (PostgreSQL: `SELECT … FOR UPDATE` exists and
    /// several writers run at once) rather than the whole database (SQLite,
    /// one writer at a time).
    const ROW_LOCKS: bool;
}
