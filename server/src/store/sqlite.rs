//! SQLite, the embedded default: one file in `--data-dir`, WAL journal, writes in
//! `BEGIN IMMEDIATE` so a writer takes the lock before reading what it will change.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};

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
use super::write_tx::{WriteQueue, WriteTx};

/// File name of the database inside the data directory.
pub const SQLITE_FILE: &str = "latchkey.sqlite3";
/// Connections to the file at most, in all: the group commit's own one and the
/// shared pool's (one writer at a time, SQLite's lock, and readers).
pub const SQLITE_MAX_CONNECTIONS: u32 = 8;

#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// The group commit's own connection, whose SQLite thread runs at a lower
    /// priority than the threads that relay calls (store/commit_thread.rs).
    group_commit: SqlitePool,
    /// This process's writers, in turn (store/write_tx.rs).
    writers: WriteQueue,
}

impl Backend for SqliteStore {
    type Db = Sqlite;
    const ROW_LOCKS: bool = false;
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

impl SqliteStore {
    /// Open (creating if needed) `<data_dir>/latchkey.sqlite3`. `busy_timeout` bounds
    /// how long a writer waits for the lock before the request is answered with 503.
    pub async fn open(data_dir: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        let path = data_dir.join(SQLITE_FILE);
        private_files(data_dir, &path)?;
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| StoreError::Internal(e.to_string()))?
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(busy_timeout);
        // A store that cannot be read at start is fatal, and the operator needs to
        // know which file: every failure here names it.
        let unreadable = |e: sqlx::Error| {
            StoreError::Internal(format!(
                "cannot open the SQLite store {}: {e}",
                path.display()
            ))
        };
        // The group commit's own connection, made now and kept: its SQLite thread
        // runs at a lower priority (store/commit_thread.rs), which a connection
        // of the shared pool, serving the reads a peer waits on, must not.
        let group_commit = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(|_conn, _meta| {
                Box::pin(async {
                    super::commit_thread::lower_sqlite_threads();
                    Ok(())
                })
            })
            .after_release(|conn, _meta| Box::pin(super::release_clean(conn)))
            .connect_with(
                options
                    .clone()
                    .thread_name(super::commit_thread::sqlite_thread_name),
            )
            .await
            .map_err(unreadable)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(SQLITE_MAX_CONNECTIONS - 1)
            .acquire_timeout(Duration::from_secs(5))
            .after_release(|conn, _meta| Box::pin(super::release_clean(conn)))
            .connect_with(options)
            .await
            .map_err(unreadable)?;
        // Connecting reads nothing: make SQLite read the header and the schema now,
        // so a corrupt or foreign file is refused here rather than on a request.
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .execute(&pool)
            .await
            .map_err(unreadable)?;
        Ok(Self {
            pool,
            group_commit,
            writers: WriteQueue::default(),
        })
    }

    /// The writer's turn first, then SQLite's lock (`BEGIN IMMEDIATE`), held to the
    /// end of the transaction.
    async fn begin_write(&self) -> Result<WriteTx<Sqlite>, sqlx::Error> {
        self.begin_write_on(&self.pool).await
    }

    /// [`Self::begin_write`] on the group commit's own connection.
    async fn begin_group_commit(&self) -> Result<WriteTx<Sqlite>, sqlx::Error> {
        self.begin_write_on(&self.group_commit).await
    }

    async fn begin_write_on(&self, pool: &SqlitePool) -> Result<WriteTx<Sqlite>, sqlx::Error> {
        let turn = self.writers.turn().await?;
        let tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        Ok(WriteTx::new(tx, Some(turn)))
    }
}

/// The data directory (0700) and the database file (0600), whatever the umask:
/// they hold every token hash and the audit trail. SQLite creates the `-wal` and
/// `-shm` files with the database file's mode, so they follow.
fn private_files(data_dir: &Path, db: &Path) -> Result<(), StoreError> {
    let failed = |what: &Path, e: std::io::Error| {
        StoreError::Unavailable(format!("cannot prepare {}: {e}", what.display()))
    };
    std::fs::create_dir_all(data_dir).map_err(|e| failed(data_dir, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let private_dir = std::fs::Permissions::from_mode(0o700);
        std::fs::set_permissions(data_dir, private_dir).map_err(|e| failed(data_dir, e))?;
        // Created here with 0600 if it is new, so it never exists with another mode.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(db)
            .map_err(|e| failed(db, e))?;
        for file in [db.to_path_buf(), suffixed(db, "-wal"), suffixed(db, "-shm")] {
            if file.exists() {
                let private_file = std::fs::Permissions::from_mode(0o600);
                std::fs::set_permissions(&file, private_file).map_err(|e| failed(&file, e))?;
            }
        }
    }
    Ok(())
}

fn suffixed(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    name.into()
}

impl_sql_audit_chain!(SqliteStore);
impl_sql_audit_keeping!(SqliteStore);
impl_sql_expiry_notices!(SqliteStore);
impl_sql_webhooks!(SqliteStore);
impl_sql_batches!(SqliteStore);
impl_sql_members!(SqliteStore);
impl_sql_policies!(SqliteStore);
impl_sql_mcp_choices!(SqliteStore);
impl_sql_console_sessions!(SqliteStore);
impl_sql_delegations!(SqliteStore);
impl_sql_pairings!(SqliteStore);
impl_sql_audit_reads!(SqliteStore);
impl_sql_pending_pairings!(SqliteStore);
impl_sql_store!(SqliteStore, "sqlite", MIGRATOR);
