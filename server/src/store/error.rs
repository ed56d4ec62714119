//! Store failures, classified so callers can answer 503 (retry) versus 500 (bug).

use latchkey_protocol::ErrorCode;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database is unreachable, busy beyond its lock timeout, or out of space.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A uniqueness rule refused the write.
    #[error("store conflict: {0}")]
    Conflict(String),
    /// Anything else: a bug or a corrupt row.
    #[error("store error: {0}")]
    Internal(String),
}

impl StoreError {
    pub fn code(&self) -> ErrorCode {
        match self {
            StoreError::Unavailable(_) => ErrorCode::StoreUnavailable,
            StoreError::Conflict(_) => ErrorCode::InvalidRequest,
            StoreError::Internal(_) => ErrorCode::Internal,
        }
    }
}

/// SQLite primary result codes that mean "try again later".
const SQLITE_BUSY: &str = "5";
const SQLITE_LOCKED: &str = "6";
const SQLITE_FULL: &str = "13";
const SQLITE_IOERR: &str = "10";

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                StoreError::Unavailable(e.to_string())
            }
            sqlx::Error::Tls(_) => StoreError::Unavailable(e.to_string()),
            sqlx::Error::Database(db) => {
                if db.is_unique_violation() {
                    return StoreError::Conflict(db.message().to_string());
                }
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                // SQLite extended codes carry the primary code in the low byte.
                let primary = code
                    .parse::<u32>()
                    .map(|n| (n & 0xff).to_string())
                    .unwrap_or_default();
                let sqlite_retry = [SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL, SQLITE_IOERR]
                    .contains(&primary.as_str());
                // PostgreSQL: class 08 connection, 53 resources, 57P admin shutdown,
                // 25006 read-only transaction (a demoted primary).
                let pg_retry = code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57P")
                    || code == "25006";
                if sqlite_retry || pg_retry {
                    StoreError::Unavailable(db.message().to_string())
                } else {
                    StoreError::Internal(db.message().to_string())
                }
            }
            _ => StoreError::Internal(e.to_string()),
        }
    }
}
