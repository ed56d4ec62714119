//! SQLite, the embedded default: one file in `--data-dir`, WAL journal, writes in
//! `BEGIN IMMEDIATE` so a writer takes the lock before reading what it will change.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::StoreError;
use super::sql::{Backend, device_columns, impl_sql_store};

/// File name of the database inside the data directory.
pub const SQLITE_FILE: &str = "latchkey.sqlite3";
/// Pooled connections at most: one writer at a time (SQLite's lock) and readers.
pub const SQLITE_MAX_CONNECTIONS: u32 = 8;

#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl Backend for SqliteStore {
    type Db = Sqlite;
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

impl SqliteStore {
    /// Open (creating if needed) `<data_dir>/latchkey.sqlite3`. `busy_timeout` bounds
    /// how long a writer waits for the lock before the request is answered with 503.
    pub async fn open(data_dir: &Path, busy_timeout: Duration) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot create data dir {}: {e}",
                data_dir.display()
            ))
        })?;
        let path = data_dir.join(SQLITE_FILE);
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
        let pool = SqlitePoolOptions::new()
            .max_connections(SQLITE_MAX_CONNECTIONS)
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
        Ok(Self { pool })
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }
}

impl_sql_store!(SqliteStore, "sqlite", MIGRATOR);
