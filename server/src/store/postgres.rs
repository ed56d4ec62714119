//! PostgreSQL, the production store. Concurrency comes from row locks: every
//! state change is a conditional `UPDATE … WHERE <expected state>`, so two racing
//! writers can never both win.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};

use super::StoreError;
use super::audit_chain::{chained_columns, impl_sql_audit_chain};
use super::audit_keeping::impl_sql_audit_keeping;
use super::audit_reads::impl_sql_audit_reads;
use super::console_sessions::impl_sql_console_sessions;
use super::delegations::{delegation_columns, impl_sql_delegations};
use super::expiry_notices::impl_sql_expiry_notices;
use super::mcp_choices::impl_sql_mcp_choices;
use super::members::{impl_sql_members, member_columns};
use super::pending_pairings::{impl_sql_pending_pairings, pending_pairing_columns};
use super::policies::impl_sql_policies;
use super::sql::{Backend, device_columns, impl_sql_store};
use super::sql_batches::impl_sql_batches;
use super::sql_pairings::impl_sql_pairings;
use super::webhooks::{impl_sql_webhooks, webhook_columns};

#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl Backend for PostgresStore {
    type Db = Postgres;
    const ROW_LOCKS: bool = true;
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl PostgresStore {
    /// Connect to `url` (`postgres://…`). `acquire_timeout` bounds how long a request
    /// waits for a connection when the server is down, before it is answered with 503.
    pub async fn connect(url: &str, acquire_timeout: Duration) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("invalid database URL: {e}")))?
            .application_name("latchkeyd");
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(acquire_timeout)
            .after_release(|conn, _meta| Box::pin(super::release_clean(conn)))
            .before_acquire(|conn, _meta| {
                Box::pin(async move {
                    if !super::error::read_only_recently() {
                        return Ok(true);
                    }
                    // A demoted primary: hand out only connections that can write;
                    // the others are closed, and new ones find the new primary.
                    let read_only: bool = sqlx::query_scalar(
                        "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
                    )
                    .fetch_one(&mut *conn)
                    .await?;
                    if read_only {
                        tracing::warn!("evicting a read-only PostgreSQL connection");
                    }
                    Ok(!read_only)
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }

    async fn begin_write(&self) -> Result<super::write_tx::WriteTx<Postgres>, sqlx::Error> {
        Ok(super::write_tx::WriteTx::new(
            self.pool.begin().await?,
            None,
        ))
    }

    /// [`Self::begin_write`]: PostgreSQL runs the statements in its own processes.
    async fn begin_group_commit(&self) -> Result<super::write_tx::WriteTx<Postgres>, sqlx::Error> {
        self.begin_write().await
    }
}

impl_sql_audit_chain!(PostgresStore);
impl_sql_audit_keeping!(PostgresStore);
impl_sql_expiry_notices!(PostgresStore);
impl_sql_webhooks!(PostgresStore);
impl_sql_batches!(PostgresStore);
impl_sql_members!(PostgresStore);
impl_sql_policies!(PostgresStore);
impl_sql_mcp_choices!(PostgresStore);
impl_sql_console_sessions!(PostgresStore);
impl_sql_delegations!(PostgresStore);
impl_sql_pairings!(PostgresStore);
impl_sql_audit_reads!(PostgresStore);
impl_sql_pending_pairings!(PostgresStore);
impl_sql_store!(PostgresStore, "postgres", MIGRATOR);
