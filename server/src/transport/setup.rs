//! A hard cap on connections still in setup (TCP accepted, TLS and the first HTTP
//! request's headers not yet complete).
//!
//! At the cap, the accept loop stops accepting (new connections wait in the
//! kernel's backlog) until a connection finishes setup, or until the oldest one has
//! been in setup for `evict_after`: that one is then dropped to admit the next. So a
//! burst of real clients is slowed, never refused, while connections that never
//! speak cannot lock the listener: an attacker would have to replace all of them
//! every `evict_after`, a flood the network in front sees. Every connection is also
//! bounded by the setup timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Default for `limits.max_connections_in_setup` (contract §9: 64 pre-auth connections).
pub const DEFAULT_MAX_IN_SETUP: usize = 64;

/// How often the "setup cap reached" warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Inner {
    cap: usize,
    evict_after: Duration,
    /// Connections in setup by admission order: the first entry is the oldest.
    live: Mutex<BTreeMap<u64, (Instant, CancellationToken)>>,
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
}

impl SetupSlots {
    pub fn new(cap: usize, evict_after: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                cap: cap.max(1),
                evict_after,
                live: Mutex::new(BTreeMap::new()),
                freed: Notify::new(),
                next_id: AtomicU64::new(0),
                last_warning: Mutex::new(None),
            }),
        }
    }

    /// Wait for a place for the next connection: a free one, or the oldest
    /// connection's once it has been in setup for `evict_after` (it is dropped).
    pub async fn admit(&self) -> SetupSlot {
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait = {
                let mut live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
                let oldest_age = live
                    .first_key_value()
                    .map(|(_, (since, _))| since.elapsed());
                match oldest_age {
                    Some(age) if live.len() >= self.inner.cap => {
                        if age >= self.inner.evict_after {
                            if let Some((_, (_, oldest))) = live.pop_first() {
                                oldest.cancel();
                            }
                            drop(live);
                            metrics::counter!(crate::telemetry::metrics::SETUP_EVICTIONS)
                                .increment(1);
                            self.warn_rate_limited();
                            return self.insert();
                        }
                        self.inner.evict_after - age
                    }
                    _ => {
                        drop(live);
                        return self.insert();
                    }
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
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (Instant::now(), evicted.clone()));
        SetupSlot {
            slots: self.clone(),
            id,
            evicted,
            finished: CancellationToken::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn full_waits_for_a_free_place_or_evicts_the_oldest_after_a_while() {
        let slots = SetupSlots::new(2, Duration::from_millis(200));
        let a_admitted = Instant::now();
        let a = slots.admit().await;
        let b = slots.admit().await;
        assert_eq!(slots.len(), 2);
        // Full: a place that frees is taken at once, nobody is evicted.
        let freed_later = async {
            tokio::task::yield_now().await;
            b.done();
        };
        let (c, ()) = tokio::join!(slots.admit(), freed_later);
        assert!(!a.evicted.is_cancelled());
        assert_eq!(slots.len(), 2);
        // Full and nothing frees: the oldest goes once it is `evict_after` old.
        let started = Instant::now();
        let a_age = a_admitted.elapsed();
        let d = slots.admit().await;
        assert!(a.evicted.is_cancelled(), "the oldest goes");
        assert!(!c.evicted.is_cancelled());
        // Not before the oldest had been in setup for `evict_after`.
        assert!(started.elapsed() + Duration::from_millis(1) >= Duration::from_millis(200) - a_age);
        assert_eq!(slots.len(), 2);
        drop(c);
        drop(d);
        assert!(slots.is_empty());
        drop(a);
        assert!(slots.is_empty());
    }
}
