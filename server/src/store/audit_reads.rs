//! Reading the audit trail, generated for each backend by [`impl_sql_audit_reads!`]
//! beside [`impl_sql_store!`](super::sql), whose `list_audit` calls it.

macro_rules! impl_sql_audit_reads {
    ($store:ty) => {
        /// `Store::list_audit`: one statement for every filter. An unset one
        /// compares with NULL and admits every row. Newest first along the
        /// tenant's id index.
        async fn list_audit_rows(
            store: &$store,
            tenant_id: &str,
            f: &$crate::store::AuditFilter,
            limit: i64,
        ) -> Result<Vec<$crate::store::AuditRecord>, $crate::store::StoreError> {
            Ok(sqlx::query_as(
                "SELECT id, tenant_id, at, actor, action, target, outcome, detail FROM audit_event \
                 WHERE tenant_id = $1 AND id < $2 \
                 AND ($4 IS NULL OR action = $4) \
                 AND ($5 IS NULL OR substr(action, 1, length($5)) = $5) \
                 AND ($6 IS NULL OR actor = $6) \
                 AND ($7 IS NULL OR target = $7) \
                 AND ($8 IS NULL OR outcome = $8) \
                 AND at >= $9 AND at < $10 \
                 AND ($11 IS NULL OR substr(detail, 1, length($11)) = $11) \
                 ORDER BY id DESC LIMIT $3",
            )
            .bind(tenant_id)
            .bind(f.before.unwrap_or(i64::MAX))
            .bind(limit)
            .bind(f.action.as_deref())
            .bind(f.action_prefix.as_deref())
            .bind(f.actor.as_deref())
            .bind(f.target.as_deref())
            .bind(f.outcome.as_deref())
            .bind(f.since.unwrap_or(i64::MIN))
            .bind(f.until.unwrap_or(i64::MAX))
            .bind(f.detail_prefix.as_deref())
            .fetch_all(&store.pool)
            .await?)
        }
    };
}

pub(super) use impl_sql_audit_reads;
