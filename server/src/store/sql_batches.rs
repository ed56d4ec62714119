//! The SQL that works on many rows at once, generated for each backend by
//! [`impl_sql_batches!`] beside [`impl_sql_store!`](super::sql), which calls it:
//! the grant reads of upgrades that arrive together, the grant sweep, and the group
//! commit (last-seen updates and audit rows in one transaction, one multi-row
//! statement per [`ROWS_PER_STATEMENT`] rows).
//!
//! [`ROWS_PER_STATEMENT`]: super::sql::ROWS_PER_STATEMENT

macro_rules! impl_sql_batches {
    ($store:ty) => {
        /// `Store::devices_by_token_hash`: one query per `TOKEN_BATCH` hashes.
        async fn devices_by_token_hash_rows(
            pool: &sqlx::Pool<<$store as $crate::store::sql::Backend>::Db>,
            hashes: &[String],
        ) -> Result<Vec<$crate::store::DeviceRecord>, $crate::store::StoreError> {
            // Each hash once, or a hash repeated across chunks would return its
            // device twice.
            let hashes: Vec<&String> = hashes
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let mut devices = Vec::with_capacity(hashes.len());
            for batch in hashes.chunks($crate::store::TOKEN_BATCH) {
                let Some(last) = batch.last() else { continue };
                let mut query = sqlx::QueryBuilder::new(concat!(
                    "SELECT ", device_columns!(), " FROM device WHERE token_hash IN ("));
                let mut list = query.separated(", ");
                // Padded with the last hash to a power of two: a handful of
                // statement shapes, each prepared once per pooled connection.
                let padded = batch.len().next_power_of_two();
                for hash in batch.iter().chain(std::iter::repeat(last)).take(padded) {
                    list.push_bind(hash);
                }
                list.push_unseparated(")");
                devices.extend(query.build_query_as().fetch_all(pool).await?);
            }
            Ok(devices)
        }

        /// `Store::device_grants`: one query per `GRANT_BATCH` ids.
        async fn device_grants_rows(
            pool: &sqlx::Pool<<$store as $crate::store::sql::Backend>::Db>,
            tenant_id: &str,
            ids: &[String],
        ) -> Result<Vec<$crate::store::DeviceGrant>, $crate::store::StoreError> {
            let mut grants = Vec::with_capacity(ids.len());
            for batch in ids.chunks($crate::store::GRANT_BATCH) {
                let mut query = sqlx::QueryBuilder::new(
                    "SELECT id, expires_at, revoked_at FROM device WHERE tenant_id = ");
                query.push_bind(tenant_id);
                query.push(" AND id IN (");
                let mut list = query.separated(", ");
                for id in batch {
                    list.push_bind(id);
                }
                list.push_unseparated(")");
                grants.extend(query.build_query_as().fetch_all(pool).await?);
            }
            Ok(grants)
        }

        /// What `Store::record_activity` writes, in one transaction: the audit
        /// rows each in its place in its tenant's hash chain.
        async fn record_activity_rows(
            store: &$store,
            seen: &[$crate::store::DeviceSeen],
            events: &[$crate::store::NewAuditEvent],
        ) -> Result<(), $crate::store::StoreError> {
            // A storm commits thousands of rows at once: one statement per
            // chunk, not per row (each statement is a round trip to the
            // store's worker).
            let seen = $crate::store::DeviceSeen::latest_per_device(seen);
            let mut tx = store.begin_write().await?;
            for chunk in seen.chunks($crate::store::sql::ROWS_PER_STATEMENT) {
                let mut q = sqlx::QueryBuilder::new(
                    "WITH seen (tenant_id, id, seen_at, browser_name, browser_version) AS (",
                );
                q.push_values(chunk, |mut row, s| {
                    let (name, version) = s.browser.as_ref().map(|(n, v)| (n, v)).unzip();
                    row.push_bind(&s.tenant_id)
                        .push_bind(&s.device_id)
                        .push_bind(s.at)
                        .push_bind(name)
                        .push_bind(version);
                });
                q.push(
                    ") UPDATE device SET last_seen_at = seen.seen_at, \
                     browser_name = COALESCE(seen.browser_name, device.browser_name), \
                     browser_version = COALESCE(seen.browser_version, device.browser_version) \
                     FROM seen WHERE device.tenant_id = seen.tenant_id AND device.id = seen.id",
                );
                q.build().execute(&mut *tx).await?;
        }
        insert_chained_events(&mut tx, events).await?;
        tx.commit().await?;
        Ok(())
        }
    };
}

pub(super) use impl_sql_batches;
