//! Store failures, classified so callers can answer 503 (retry) versus 500 (bug).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use latchkey_protocol::ErrorCode;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database is unreachable, busy beyond its lock timeout, or out of space.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A uniqueness rule refused the write.
    #[error("store conflict: {0}")]
    Conflict(String),
    /// Another transaction won a lock this one needed (PostgreSQL's deadlock or
    /// serialization failure): nothing was written, and the same transaction
    /// run again at once may well succeed.
    #[error("store contended: {0}")]
    Contended(String),
    /// Anything else: a bug or a corrupt row.
    #[error("store error: {0}")]
    Internal(String),
}

impl StoreError {
    /// Logged and counted, once, where a surface or the core turns it into an
    /// answer: an unavailable store as a warning, anything else as an error.
    pub fn noted(self) -> Self {
        let kind = match self {
            StoreError::Unavailable(_) | StoreError::Contended(_) => {
                tracing::warn!(error = %self, "store unavailable");
                "unavailable"
            }
            StoreError::Conflict(_) => return self,
            StoreError::Internal(_) => {
                tracing::error!(error = %self, "store error");
                "internal"
            }
        };
        metrics::counter!(crate::telemetry::metrics::STORE_ERRORS, "kind" => kind).increment(1);
        self
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            StoreError::Unavailable(_) | StoreError::Contended(_) => ErrorCode::StoreUnavailable,
            StoreError::Conflict(_) => ErrorCode::InvalidRequest,
            StoreError::Internal(_) => ErrorCode::Internal,
        }
    }
}

/// PostgreSQL `read_only_sql_transaction`: the server we write to is no longer
/// the primary.
const PG_READ_ONLY_TRANSACTION: &str = "25006";

/// How long after a read-only error every pooled PostgreSQL connection is checked
/// before use (and closed if it still cannot write).
const READ_ONLY_WATCH: Duration = Duration::from_secs(60);

/// When a read-only error was last seen (ms since the process's first look).
static READ_ONLY_SEEN_MS: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn since_epoch_ms() -> u64 {
    let epoch = EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn note_read_only() {
    // Never 0, which means "never seen".
    READ_ONLY_SEEN_MS.store(since_epoch_ms().max(1), Ordering::Relaxed);
}

/// Whether a write failed on a read-only PostgreSQL connection in the last minute.
pub fn read_only_recently() -> bool {
    let seen = READ_ONLY_SEEN_MS.load(Ordering::Relaxed);
    seen != 0
        && since_epoch_ms().saturating_sub(seen)
            < u64::try_from(READ_ONLY_WATCH.as_millis()).unwrap_or(u64::MAX)
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
                // 55000 the database refuses connections (ALLOW_CONNECTIONS false,
                // during maintenance), 25006 read-only transaction (a demoted primary).
                let pg_retry = code.starts_with("08")
                    || code.starts_with("53")
                    || code.starts_with("57P")
                    || code == "55000"
                    || code == PG_READ_ONLY_TRANSACTION;
                if code == PG_READ_ONLY_TRANSACTION {
                    note_read_only();
                }
                // PostgreSQL 40001 serialization_failure, 40P01 deadlock_detected.
                if code == "40001" || code == "40P01" {
                    return StoreError::Contended(db.message().to_string());
                }
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
