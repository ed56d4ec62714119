//! The server's own database opened beside it, for tests that do what an
//! intruder with database access would (change, remove or insert audit rows).

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_server::store::SQLITE_FILE;

use crate::TestServer;

/// A connection to the server's own database, for doing what an intruder would.
pub enum Database {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Database {
    pub async fn open(server: &TestServer) -> Self {
        match &server.config().database_url {
            Some(url) => Self::Postgres(sqlx::PgPool::connect(url).await.expect("postgres")),
            None => {
                let file = server.config().data_dir.join(SQLITE_FILE);
                let url = format!("sqlite://{}", file.display());
                Self::Sqlite(sqlx::SqlitePool::connect(&url).await.expect("sqlite"))
            }
        }
    }

    pub async fn exec(&self, sql: String) {
        let q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        let done = match self {
            Self::Sqlite(pool) => q.execute(pool).await.map(|_| ()),
            Self::Postgres(pool) => sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .execute(pool)
                .await
                .map(|_| ()),
        };
        done.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// How a saved row goes back with its own id.
    pub fn put_back(&self) -> String {
        match self {
            Self::Sqlite(_) => "INSERT INTO audit_event SELECT * FROM saved".into(),
            Self::Postgres(_) => {
                "INSERT INTO audit_event OVERRIDING SYSTEM VALUE SELECT * FROM saved".into()
            }
        }
    }

    pub async fn close(self) {
        match self {
            Self::Sqlite(pool) => pool.close().await,
            Self::Postgres(pool) => pool.close().await,
        }
    }
}

/// A store of a test's own on SQLite, not yet migrated; keep the directory as
/// long as the store.
pub async fn sqlite_store() -> (
    std::sync::Arc<dyn latchkey_server::store::Store>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("dir");
    let store = latchkey_server::store::SqliteStore::open(dir.path(), STORE_TIMEOUT)
        .await
        .expect("open");
    (std::sync::Arc::new(store), dir)
}

/// A store of a test's own on a scratch PostgreSQL database, not yet migrated;
/// `None` (skipped) where the machine has none and this is not CI. Drop the
/// database when done.
pub async fn postgres_store() -> Option<(
    std::sync::Arc<dyn latchkey_server::store::Store>,
    crate::ScratchDatabase,
)> {
    let crate::Backend::Postgres { admin_url } = crate::Backend::postgres().await? else {
        return None;
    };
    let db = crate::ScratchDatabase::create(&admin_url)
        .await
        .expect("database");
    let store = latchkey_server::store::PostgresStore::connect(&db.url, STORE_TIMEOUT)
        .await
        .expect("connect");
    Some((std::sync::Arc::new(store), db))
}

/// The lock and connect timeout of a test's own store.
const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
