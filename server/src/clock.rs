//! Wall-clock time for grants and expiry, with a test-only offset.
//!
//! Grant lifetimes are days long, so tests cannot wait for them. Every time-based
//! decision reads [`Clock::now_ms`]; tests move the clock forward with
//! [`Clock::advance`], and tasks that sleep until a wall-clock instant (a grant's
//! expiry) re-plan when [`Clock::changed`] fires.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

#[derive(Debug, Clone)]
pub struct Clock {
    inner: Arc<ClockInner>,
}

#[derive(Debug)]
struct ClockInner {
    offset_ms: AtomicI64,
    changed: watch::Sender<i64>,
    /// Where "now" comes from before the offset.
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// The system's wall clock.
    System,
    /// `start_ms` plus the tokio time elapsed since `base`: with tokio's time paused,
    /// unit tests move both the timers and this clock with `tokio::time::advance`.
    Tokio {
        base: tokio::time::Instant,
        start_ms: i64,
    },
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The system clock, no offset.
    pub fn system() -> Self {
        Self::with_source(Source::System)
    }

    /// A clock that reads tokio's time, starting at `start_ms`: for unit tests that
    /// pause tokio's time, where the system clock would stand still while timers
    /// move (or move while they stand still).
    pub fn following_tokio(start_ms: i64) -> Self {
        Self::with_source(Source::Tokio {
            base: tokio::time::Instant::now(),
            start_ms,
        })
    }

    fn with_source(source: Source) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            inner: Arc::new(ClockInner {
                offset_ms: AtomicI64::new(0),
                changed,
                source,
            }),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let real = match &self.inner.source {
            Source::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(ms)
                .unwrap_or(0),
            Source::Tokio { base, start_ms } => start_ms.saturating_add(ms(base.elapsed())),
        };
        real.saturating_add(self.inner.offset_ms.load(Ordering::Relaxed))
    }

    /// Move this clock forward (tests only; production never calls it).
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let new = self.inner.offset_ms.fetch_add(by, Ordering::Relaxed) + by;
        self.inner.changed.send_replace(new);
    }

    /// Fires whenever the clock jumps.
    pub fn changed(&self) -> watch::Receiver<i64> {
        self.inner.changed.subscribe()
    }

    /// How long from now until the wall-clock instant `at_ms` (zero if past).
    pub fn until(&self, at_ms: i64) -> Duration {
        let ms = at_ms.saturating_sub(self.now_ms()).max(0);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

/// RFC 3339 text for a Unix-millisecond instant (UTC).
pub fn rfc3339(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// The Unix-millisecond instant of RFC 3339 text, or `None` when it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        assert_eq!(
            parse_rfc3339(&rfc3339(1_796_000_000_123)),
            Some(1_796_000_000_123)
        );
        assert_eq!(
            parse_rfc3339("2026-12-03T10:00:00+01:00"),
            Some(1_796_288_400_000)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn advance_moves_now_and_notifies() {
        let clock = Clock::system();
        let rx = clock.changed();
        let before = clock.now_ms();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now_ms() - before >= 3_600_000);
        assert!(rx.has_changed().unwrap_or(false));
        assert_eq!(clock.until(clock.now_ms() - 5), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_with_paused_time() {
        let clock = Clock::following_tokio(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(clock.now_ms(), 6_000);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now_ms(), 7_000);
    }

    #[test]
    fn formats_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_500), "1970-01-01T00:00:01.5Z");
    }
}
