//! The clock a connection in setup keeps against its peer: how long the server has
//! waited for the peer's bytes, so that only a client's own delays count against
//! it at the setup cap ([`super::setup`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

/// A connection's progress through setup, written by its stream and read by the
/// admission side. Times are milliseconds since admission.
#[derive(Debug)]
pub(super) struct Progress {
    pub(super) admitted: Instant,
    /// Set when the connection's first bytes arrived.
    pub(super) spoke: AtomicBool,
    /// When the current wait for the peer's bytes began (+1), or 0 while the
    /// connection is not waiting on its peer.
    pub(super) waiting_since: AtomicU64,
    /// Waits for the peer that are over, in all.
    pub(super) waited: AtomicU64,
    /// Setup is over: the stream stops keeping time.
    pub(super) over: AtomicBool,
}

impl Progress {
    pub(super) fn new() -> Self {
        Self {
            admitted: Instant::now(),
            spoke: AtomicBool::new(false),
            waiting_since: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            over: AtomicBool::new(false),
        }
    }

    pub(super) fn ms_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.admitted).as_millis()).unwrap_or(u64::MAX)
    }

    /// The last read found nothing: the peer has the ball.
    pub(super) fn wait_began(&self) {
        if self.waiting_since.load(Ordering::Relaxed) == 0 {
            let now = self.ms_at(Instant::now());
            self.waiting_since
                .store(now.saturating_add(1), Ordering::Relaxed);
        }
    }

    /// A read returned (bytes, end of stream or an error): the server has the ball.
    pub(super) fn wait_ended(&self) {
        let since = self.waiting_since.swap(0, Ordering::Relaxed);
        if since != 0 {
            let now = self.ms_at(Instant::now());
            self.waited
                .fetch_add(now.saturating_sub(since - 1), Ordering::Relaxed);
        }
    }

    /// Time spent waiting on the peer so far, the current wait included.
    pub(super) fn waited_at(&self, now: Instant) -> Duration {
        let since = self.waiting_since.load(Ordering::Relaxed);
        let current = if since == 0 {
            0
        } else {
            self.ms_at(now).saturating_sub(since - 1)
        };
        Duration::from_millis(self.waited.load(Ordering::Relaxed).saturating_add(current))
    }
}

/// A connection's stream that keeps the time its peer keeps it waiting during
/// setup (after that, one branch per read).
#[derive(Debug)]
pub struct PeerClock<S> {
    io: S,
    /// `None` once setup is over.
    progress: Option<Arc<Progress>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for PeerClock<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Some(progress) = &self.progress {
            if progress.over.load(Ordering::Relaxed) {
                self.progress = None;
            } else if polled.is_pending() {
                progress.wait_began();
            } else {
                progress.wait_ended();
                if buf.filled().len() > before {
                    progress.spoke.store(true, Ordering::Relaxed);
                }
            }
        }
        polled
    }
}

super::writes_pass_through!(PeerClock);

impl<S> PeerClock<S> {
    pub(super) fn new(io: S, progress: Arc<Progress>) -> Self {
        Self {
            io,
            progress: Some(progress),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_add_up_and_only_waits_on_the_peer_count() {
        let progress = Progress::new();
        assert_eq!(progress.waited_at(Instant::now()), Duration::ZERO);
        progress.wait_began();
        let later = Instant::now() + Duration::from_secs(3);
        assert!(progress.waited_at(later) >= Duration::from_millis(2_990));
        progress.wait_ended();
        let waited = progress.waited_at(Instant::now());
        assert!(
            waited < Duration::from_secs(1),
            "the wait is over: {waited:?}"
        );
        assert_eq!(progress.waiting_since.load(Ordering::Relaxed), 0);
    }
}
