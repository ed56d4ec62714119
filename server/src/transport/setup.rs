//! A hard cap on connections still in setup (TCP accepted, TLS and the first HTTP
//! request's headers not yet complete).
//!
//! At the cap, the accept loop stops accepting (new connections wait in the
//! kernel's backlog) until a connection finishes setup, or until one of those in
//! setup may be pushed out to admit the next:
//! - one that has sent nothing at all for `silent_after` (a real client sends its
//!   ClientHello or request line within a round trip), the oldest such first;
//! - failing that, the oldest once it has been in setup for `evict_after` (a client
//!   that dribbles bytes).
//!
//! So a burst of real clients is slowed, never refused (under a reconnect storm the
//! handshakes in setup are all progressing and none is pushed out early), while
//! connections that never speak, or speak too slowly, cannot lock the listener.
//! Every connection is also bounded by the setup timeout.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Default for `limits.max_connections_in_setup` (contract §9: 64 pre-auth connections).
pub const DEFAULT_MAX_IN_SETUP: usize = 64;

/// How often the "setup cap reached" warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// One connection in setup, as the admission side sees it.
#[derive(Debug)]
struct Entry {
    since: Instant,
    evict: CancellationToken,
    /// Set when the connection's first bytes arrived.
    progressed: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Inner {
    cap: usize,
    silent_after: Duration,
    evict_after: Duration,
    /// Connections in setup by admission order: the first entry is the oldest.
    live: Mutex<BTreeMap<u64, Entry>>,
    /// Woken when a place frees.
    freed: Notify,
    next_id: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

/// The set of connections in setup, shared by the accept loop and its tasks.
#[derive(Debug, Clone)]
pub struct SetupSlots {
    inner: Arc<Inner>,
}

/// One connection's place in setup. Dropping it (or calling [`SetupSlot::done`])
/// frees the place; `evicted` fires if a newer connection pushed this one out.
#[derive(Debug)]
pub struct SetupSlot {
    slots: SetupSlots,
    id: u64,
    /// Fires when a newer connection pushed this one out.
    pub evicted: CancellationToken,
    /// Fires when setup is over for this connection.
    pub finished: CancellationToken,
    progressed: Arc<AtomicBool>,
}

impl SetupSlots {
    pub fn new(cap: usize, silent_after: Duration, evict_after: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                cap: cap.max(1),
                silent_after,
                evict_after,
                live: Mutex::new(BTreeMap::new()),
                freed: Notify::new(),
                next_id: AtomicU64::new(0),
                last_warning: Mutex::new(None),
            }),
        }
    }

    /// Wait for a place for the next connection: a free one, or one taken from a
    /// connection that may be pushed out (see the module docs; it is dropped).
    pub async fn admit(&self) -> SetupSlot {
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait = {
                let mut live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
                if live.len() < self.inner.cap {
                    drop(live);
                    return self.insert();
                }
                let now = Instant::now();
                let limit = |e: &Entry| {
                    if e.progressed.load(Ordering::Relaxed) {
                        self.inner.evict_after
                    } else {
                        self.inner.silent_after
                    }
                };
                let due = |e: &Entry| now.saturating_duration_since(e.since) >= limit(e);
                // Silent ones first, the oldest of them; then the oldest of all.
                let victim = live
                    .iter()
                    .find(|(_, e)| !e.progressed.load(Ordering::Relaxed) && due(e))
                    .or_else(|| live.iter().next().filter(|(_, e)| due(e)))
                    .map(|(id, _)| *id);
                match victim.and_then(|id| live.remove(&id)) {
                    Some(pushed_out) => {
                        pushed_out.evict.cancel();
                        drop(live);
                        metrics::counter!(crate::telemetry::metrics::SETUP_EVICTIONS).increment(1);
                        self.warn_rate_limited();
                        return self.insert();
                    }
                    None => live
                        .values()
                        .map(|e| (e.since + limit(e)).saturating_duration_since(now))
                        .min()
                        .unwrap_or(self.inner.silent_after),
                }
            };
            tokio::select! {
                _ = &mut freed => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn insert(&self) -> SetupSlot {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        let progressed = Arc::new(AtomicBool::new(false));
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                Entry {
                    since: Instant::now(),
                    evict: evicted.clone(),
                    progressed: progressed.clone(),
                },
            );
        SetupSlot {
            slots: self.clone(),
            id,
            evicted,
            finished: CancellationToken::new(),
            progressed,
        }
    }

    /// Connections in setup now.
    pub fn len(&self) -> usize {
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release(&self, id: u64) {
        let removed = self
            .inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if removed.is_some() {
            self.inner.freed.notify_one();
        }
    }

    /// At most one warning a minute, however hard the listener is flooded.
    fn warn_rate_limited(&self) {
        let due = {
            let mut last = self
                .inner
                .last_warning
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= WARN_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            tracing::warn!(
                cap = self.inner.cap,
                "connections in TLS/HTTP setup at the cap: dropping the oldest (logged at most once a minute)"
            );
        }
    }
}

impl SetupSlot {
    /// `io`, marking this connection as progressing once its first bytes arrive.
    pub fn watch<S>(&self, io: S) -> FirstBytes<S> {
        FirstBytes {
            io,
            seen: self.progressed.clone(),
            marked: false,
        }
    }

    /// Setup is over (the first request's headers arrived): free the place.
    pub fn done(&self) {
        if !self.finished.is_cancelled() {
            self.finished.cancel();
            self.slots.release(self.id);
        }
    }
}

impl Drop for SetupSlot {
    fn drop(&mut self) {
        self.slots.release(self.id);
    }
}

/// A connection's stream that records when its first bytes arrive (after that,
/// one branch per read).
#[derive(Debug)]
pub struct FirstBytes<S> {
    io: S,
    seen: Arc<AtomicBool>,
    marked: bool,
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstBytes<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if !self.marked && buf.filled().len() > before {
            self.marked = true;
            self.seen.store(true, Ordering::Relaxed);
        }
        polled
    }
}

super::writes_pass_through!(FirstBytes);

#[cfg(test)]
mod tests {
    use super::*;

    const SILENT: Duration = Duration::from_millis(100);
    const SLOW: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_freed_place_is_taken_and_nobody_is_pushed_out() {
        let slots = SetupSlots::new(2, SILENT, SLOW);
        let a = slots.admit().await;
        let b = slots.admit().await;
        let freed_later = async {
            tokio::task::yield_now().await;
            b.done();
        };
        let (_c, ()) = tokio::join!(slots.admit(), freed_later);
        assert!(!a.evicted.is_cancelled());
        assert_eq!(slots.len(), 2);
    }

    #[tokio::test]
    async fn the_silent_go_first_and_the_progressing_only_when_slow() {
        let slots = SetupSlots::new(2, SILENT, SLOW);
        let talking = slots.admit().await;
        talking.progressed.store(true, Ordering::Relaxed);
        let silent = slots.admit().await;
        let started = Instant::now();
        let third = slots.admit().await;
        assert!(silent.evicted.is_cancelled(), "the silent one goes first");
        assert!(
            !talking.evicted.is_cancelled(),
            "though the talking one is older"
        );
        assert!(started.elapsed() + Duration::from_millis(1) >= SILENT - Duration::from_millis(5));
        // Both left are talking now: the oldest goes only once it is slow.
        third.progressed.store(true, Ordering::Relaxed);
        let _fourth = slots.admit().await;
        assert!(talking.evicted.is_cancelled());
        assert!(!third.evicted.is_cancelled());
        assert!(started.elapsed() + Duration::from_millis(1) >= SLOW - Duration::from_millis(5));
        assert_eq!(slots.len(), 2);
    }

    #[tokio::test]
    async fn first_bytes_mark_progress() {
        let slots = SetupSlots::new(1, SILENT, SLOW);
        let slot = slots.admit().await;
        let (client, server) = tokio::io::duplex(64);
        let mut watched = slot.watch(server);
        assert!(!slot.progressed.load(Ordering::Relaxed));
        let mut client = client;
        tokio::io::AsyncWriteExt::write_all(&mut client, b"x")
            .await
            .expect("write");
        let mut byte = [0u8; 1];
        tokio::io::AsyncReadExt::read_exact(&mut watched, &mut byte)
            .await
            .expect("read");
        assert!(slot.progressed.load(Ordering::Relaxed));
    }
}
