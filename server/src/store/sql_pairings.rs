//! The pairing-link SQL, generated for each backend by [`impl_sql_pairings!`]
//! beside [`impl_sql_store!`](super::sql), which calls it: a link's insert under
//! the tenant's and the member's quotas, and its one-time redemption into a device.

macro_rules! impl_sql_pairings {
    ($store:ty) => {
        /// `Store::insert_pairing`.
        async fn insert_pairing_rows(
            store: &$store,
            p: &$crate::store::NewPairing,
            now: i64,
            quota: $crate::store::PairingQuota,
        ) -> Result<$crate::store::PairingInsert, $crate::store::StoreError> {
            use $crate::store::PairingInsert;
            let mut tx = store.begin_write().await?;
            // Serialise quota checks per tenant on PostgreSQL (SQLite's write lock
            // already does): lock the tenant row for the transaction. Removing a
            // member takes the same lock, so a link is never made for a member
            // whose removal has committed.
            sqlx::query("UPDATE tenant SET name = name WHERE id = $1")
                .bind(&p.tenant_id)
                .execute(&mut *tx)
                .await?;
            let (unused,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM pairing WHERE tenant_id = $1 AND used_at IS NULL AND expires_at > $2",
            )
            .bind(&p.tenant_id)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            if unused >= quota.per_tenant {
                return Ok(PairingInsert::QuotaReached);
            }
            if let Some(owner) = &p.owner_id {
                let live: Option<(String,)> = sqlx::query_as(
                    "SELECT id FROM member WHERE tenant_id = $1 AND id = $2 AND removed_at IS NULL",
                )
                .bind(&p.tenant_id)
                .bind(owner)
                .fetch_optional(&mut *tx)
                .await?;
                if live.is_none() {
                    return Ok(PairingInsert::NoSuchMember);
                }
                let (theirs,): (i64,) = sqlx::query_as(
                    "SELECT COUNT(*) FROM pairing WHERE tenant_id = $1 AND owner_id = $2 \
                     AND used_at IS NULL AND expires_at > $3",
                )
                .bind(&p.tenant_id)
                .bind(owner)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                if theirs >= quota.per_member {
                    return Ok(PairingInsert::MemberQuotaReached);
                }
            }
            sqlx::query(
                "INSERT INTO pairing (id, tenant_id, secret_hash, label, created_by, created_at, expires_at, owner_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&p.id)
            .bind(&p.tenant_id)
            .bind(&p.secret_hash)
            .bind(&p.label)
            .bind(&p.created_by)
            .bind(p.created_at)
            .bind(p.expires_at)
            .bind(&p.owner_id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(PairingInsert::Inserted)
        }

        /// `Store::redeem_pairing`.
        async fn redeem_pairing_rows(
            store: &$store,
            secret_hash: &str,
            d: &$crate::store::NewDevice,
        ) -> Result<Option<$crate::store::DeviceRecord>, $crate::store::StoreError> {
            let mut tx = store.begin_write().await?;
            let claimed: Option<(String, String, Option<String>, Option<String>)> = sqlx::query_as(
                "UPDATE pairing SET used_at = $2 \
                 WHERE secret_hash = $1 AND used_at IS NULL AND expires_at > $2 \
                 RETURNING tenant_id, created_by, label, owner_id",
            )
            .bind(secret_hash)
            .bind(d.created_at)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((tenant_id, created_by, pairing_label, owner_id)) = claimed else {
                return Ok(None);
            };
            let label = pairing_label.unwrap_or_else(|| d.label.clone());
            let device: $crate::store::DeviceRecord = sqlx::query_as(concat!(
                "INSERT INTO device (id, tenant_id, label, created_by, created_at, token_hash, expires_at, renew_after, owner_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ", device_columns!(), ""))
            .bind(&d.id)
            .bind(&tenant_id)
            .bind(&label)
            .bind(&created_by)
            .bind(d.created_at)
            .bind(&d.token_hash)
            .bind(d.expires_at)
            .bind(d.renew_after)
            .bind(&owner_id)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(device))
        }
    };
}

pub(super) use impl_sql_pairings;
