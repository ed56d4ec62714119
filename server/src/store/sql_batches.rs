//! The SQL that works on many rows at once, generated for each backend by
//! [`impl_sql_batches!`] beside [`impl_sql_store!`](super::sql), which calls it:
//! the grant reads of upgrades that arrive together, the grant sweep, and the group
//! commit (last-seen updates and audit rows in one transaction, one multi-row
//! statement per chunk of rows, [`statement_chunks`]).
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

        /// `Store::unrevoked_token_ids`: one query per `GRANT_BATCH` ids of each
        /// kind (API tokens, delegations).
        async fn unrevoked_token_ids_rows(
            pool: &sqlx::Pool<<$store as $crate::store::sql::Backend>::Db>,
            tenant_id: &str,
            ids: &[String],
        ) -> Result<Vec<String>, $crate::store::StoreError> {
            let (tokens, delegations): (Vec<&String>, Vec<&String>) = ids
                .iter()
                .filter(|id| {
                    $crate::ids::TOKEN.holds(id) || $crate::ids::DELEGATION.holds(id)
                })
                .partition(|id| $crate::ids::TOKEN.holds(id));
            let mut live = Vec::with_capacity(ids.len());
            for (ids, head) in [
                (
                    tokens,
                    "SELECT id FROM api_token WHERE revoked_at IS NULL AND tenant_id = ",
                ),
                (
                    delegations,
                    "SELECT d.id FROM delegation d JOIN api_token t \
                     ON t.id = d.root_token_id AND t.tenant_id = d.tenant_id \
                     WHERE d.revoked_at IS NULL AND t.revoked_at IS NULL AND d.tenant_id = ",
                ),
            ] {
                for batch in ids.chunks($crate::store::GRANT_BATCH) {
                    let mut query = sqlx::QueryBuilder::new(head);
                    query.push_bind(tenant_id);
                    query.push(if head.contains("d.id") { " AND d.id IN (" } else { " AND id IN (" });
                    let mut list = query.separated(", ");
                    for id in batch {
                        list.push_bind(*id);
                    }
                    list.push_unseparated(")");
                    let rows: Vec<(String,)> = query.build_query_as().fetch_all(pool).await?;
                    live.extend(rows.into_iter().map(|(id,)| id));
                }
            }
            Ok(live)
        }

        /// What `Store::record_activity` writes, in one transaction: the audit
        /// rows each in its place in its tenant's hash chain. Run again when
        /// another writer's transaction won a lock this one needed, so a batch
        /// is never lost to a race between replicas.
        async fn record_activity_rows(
            store: &$store,
            seen: &[$crate::store::DeviceSeen],
            events: &[$crate::store::NewAuditEvent],
        ) -> Result<(), $crate::store::StoreError> {
            // Devices in one order (tenant, id) in every writer: two replicas
            // committing last-seen times of the same devices lock their rows
            // in the same order, so neither waits on the other in a cycle
            // (which PostgreSQL breaks only after its deadlock_timeout, 1 s,
            // by failing one of them).
            let mut seen = $crate::store::DeviceSeen::latest_per_device(seen);
            seen.sort_by(|a, b| (&a.tenant_id, &a.device_id).cmp(&(&b.tenant_id, &b.device_id)));
            let mut attempt = 1;
            loop {
                match record_activity_once(store, &seen, events).await {
                    Err($crate::store::StoreError::Contended(why))
                        if attempt < $crate::store::sql_batches::CONTENDED_ATTEMPTS =>
                    {
                        tracing::debug!(attempt, %why, "audit commit contended; run again");
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        }

        async fn record_activity_once(
            store: &$store,
            seen: &[$crate::store::DeviceSeen],
            events: &[$crate::store::NewAuditEvent],
        ) -> Result<(), $crate::store::StoreError> {
            // A storm commits thousands of rows at once: one statement per
            // chunk, not per row (each statement is a round trip to the
            // store's worker).
            let mut tx = store.begin_group_commit().await?;
            for chunk in $crate::store::sql_batches::statement_chunks(seen) {
                if <$store as $crate::store::sql::Backend>::ROW_LOCKS {
                    // The UPDATE below locks rows in whatever order its plan
                    // visits them; this takes them in the sorted order first.
                    let mut q = sqlx::QueryBuilder::new(
                        "SELECT 1 FROM device WHERE (tenant_id, id) IN (",
                    );
                    q.push_values(chunk, |mut row, s| {
                        row.push_bind(&s.tenant_id).push_bind(&s.device_id);
                    });
                    q.push(") ORDER BY tenant_id, id FOR UPDATE");
                    q.build().execute(&mut *tx).await?;
                }
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

/// How many times one group commit runs when another writer's transaction keeps
/// winning a lock it needs ([`StoreError::Contended`](super::StoreError::Contended)).
pub(crate) const CONTENDED_ATTEMPTS: u32 = 5;

/// `rows` in chunks for multi-row statements: full chunks of
/// [`ROWS_PER_STATEMENT`](super::sql::ROWS_PER_STATEMENT), then the rest in powers of two (300 rows: 256, 32, 8,
/// 4). Each chunk size is a statement of its own shape, prepared once per
/// pooled connection and kept: nine shapes in all, where a rest of any size
/// would prepare a new statement of up to 2,304 parameters on most commits and
/// push the useful ones out of the statement cache.
pub(crate) fn statement_chunks<T>(rows: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let size = if rest.len() >= super::sql::ROWS_PER_STATEMENT {
            super::sql::ROWS_PER_STATEMENT
        } else {
            // The largest power of two not above what is left.
            1 << rest.len().ilog2()
        };
        let (chunk, after) = rest.split_at(size);
        rest = after;
        Some(chunk)
    })
}

#[cfg(test)]
mod chunk_tests {
    use super::*;

    #[test]
    fn chunks_cover_every_row_once_in_few_shapes() {
        let mut shapes = std::collections::BTreeSet::new();
        for n in 0..=1100usize {
            let rows: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = statement_chunks(&rows).collect();
            let joined: Vec<usize> = chunks.concat();
            assert_eq!(joined, rows, "{n}");
            shapes.extend(chunks.iter().map(|c| c.len()));
        }
        assert_eq!(
            shapes.into_iter().collect::<Vec<_>>(),
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256]
        );
        let sizes: Vec<usize> = statement_chunks(&[0u8; 300]).map(<[u8]>::len).collect();
        assert_eq!(sizes, vec![256, 32, 8, 4]);
    }
}
