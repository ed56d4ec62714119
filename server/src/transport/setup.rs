//! A hard cap on connections still in setup (TCP accepted, TLS and the first HTTP
//! request's headers not yet complete).
//!
//! At the cap, the accept loop stops accepting (new connections wait in the
//! kernel's backlog) until a connection finishes setup, or until one of those in
//! setup may be pushed out to admit the next:
//! - one that has sent nothing at all after waiting `silent_after` for its first
//!   bytes (a real client sends its ClientHello or request line within a round
//!   trip), the oldest such first;
//! - failing that, the oldest one that has kept the server waiting for its bytes
//!   for `evict_after` in all (a client that dribbles).
//!
//! Only time spent waiting on the peer counts: the clock runs while the
//! connection's last read found nothing to read, and stops while its bytes are
//! being handled. And a connection is never pushed out while bytes it sent wait
//! unread in its socket (the kernel is asked, through a duplicate of the socket
//! held only while the connection is in setup). So on a node too busy to keep up
//! (a reconnect storm on a loaded machine), a connection whose task has not been
//! polled yet, or whose handshake is queued behind others, is never taken for a
//! silent or slow one: a burst of real clients is slowed, never refused. Connections that never
//! speak, or speak too slowly, cannot lock the listener, and every connection is
//! also bounded by the setup timeout, whoever's fault the delay is.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use super::peer_clock::PeerClock;
use super::peer_clock::Progress;

/// Default for `limits.max_connections_in_setup` (contract §9: 64 pre-auth connections).
pub const DEFAULT_MAX_IN_SETUP: usize = 64;

/// How often the "setup cap reached" warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Why a connection in setup may be pushed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Nothing sent yet.
    Silent,
    /// Sending, too slowly.
    Slow,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Silent => "silent",
            Kind::Slow => "slow",
        }
    }
}

/// One connection in setup, as the admission side sees it.
#[derive(Debug)]
struct Entry {
    evict: CancellationToken,
    progress: Arc<Progress>,
    /// A duplicate of the connection's socket, to ask the kernel whether bytes
    /// wait unread. Closed when the entry leaves (setup over, or pushed out), so it
    /// never outlives setup nor delays the socket's close.
    probe: Option<Probe>,
}

impl Entry {
    /// Bytes the peer sent wait in the socket for the server: whatever the clock
    /// says, the delay is the server's.
    fn bytes_waiting(&self) -> bool {
        let mut byte = [0u8; 1];
        self.probe
            .as_ref()
            .is_some_and(|p| matches!(p.peek(&mut byte), Ok(n) if n > 0))
    }
}

/// A duplicate of an accepted socket that can be peeked without disturbing it
/// (nonblocking, like the original: they share the open file).
pub type Probe = std::net::TcpStream;

/// A [`Probe`] for `stream`, if the socket can be duplicated here.
pub fn probe(stream: &tokio::net::TcpStream) -> Option<Probe> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        stream
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .map(std::net::TcpStream::from)
    }
    #[cfg(not(unix))]
    {
        let _ = stream;
        None
    }
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

impl Inner {
    /// What kind of push-out a connection is due for now, and how long until it
    /// could be due otherwise (a lower bound: its clock runs only while it waits).
    fn judge(&self, progress: &Progress, now: Instant) -> Result<Kind, Duration> {
        let (kind, limit) = if progress.spoke.load(Ordering::Relaxed) {
            (Kind::Slow, self.evict_after)
        } else {
            (Kind::Silent, self.silent_after)
        };
        let waited = progress.waited_at(now);
        match limit.checked_sub(waited) {
            Some(left) if !left.is_zero() => Err(left),
            _ => Ok(kind),
        }
    }
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
    progress: Arc<Progress>,
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
    /// `probe` is the new connection's, if it has one.
    pub async fn admit(&self, probe: Option<Probe>) -> SetupSlot {
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait = {
                let mut live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
                if live.len() < self.inner.cap {
                    drop(live);
                    return self.insert(probe);
                }
                let now = Instant::now();
                // Silent ones first, the oldest of them; then the oldest slow one.
                let mut victim: Option<(u64, Kind)> = None;
                // Clocks start and stop unseen here: look again within a quarter
                // of the silent limit even when none is close to its limit.
                let mut wait = self.inner.silent_after / 4;
                for (id, entry) in live.iter() {
                    match self.inner.judge(&entry.progress, now) {
                        // Behind on this one: look again soon.
                        Ok(_) if entry.bytes_waiting() => {}
                        Ok(Kind::Silent) => {
                            victim = Some((*id, Kind::Silent));
                            break;
                        }
                        Ok(Kind::Slow) => {
                            victim = victim.or(Some((*id, Kind::Slow)));
                        }
                        Err(left) => wait = wait.min(left),
                    }
                }
                match victim.and_then(|(id, kind)| Some((live.remove(&id)?, kind))) {
                    Some((pushed_out, kind)) => {
                        pushed_out.evict.cancel();
                        drop(live);
                        self.pushed_out(&pushed_out.progress, kind, now);
                        return self.insert(probe);
                    }
                    None => wait,
                }
            };
            tokio::select! {
                _ = &mut freed => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn insert(&self, probe: Option<Probe>) -> SetupSlot {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        let progress = Arc::new(Progress::new());
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                Entry {
                    evict: evicted.clone(),
                    progress: progress.clone(),
                    probe,
                },
            );
        SetupSlot {
            slots: self.clone(),
            id,
            evicted,
            finished: CancellationToken::new(),
            progress,
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

    /// Count a push-out by kind, say at debug level what it had done, and warn at
    /// most once a minute however hard the listener is flooded.
    fn pushed_out(&self, progress: &Progress, kind: Kind, now: Instant) {
        metrics::counter!(crate::telemetry::metrics::SETUP_EVICTIONS, "kind" => kind.label())
            .increment(1);
        tracing::debug!(
            kind = kind.label(),
            in_setup_ms = progress.ms_at(now),
            waited_on_peer_ms = progress.waited_at(now).as_millis(),
            "connection pushed out at the setup cap"
        );
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
                "connections in TLS/HTTP setup at the cap: pushing out those that keep it waiting (logged at most once a minute)"
            );
        }
    }
}

impl SetupSlot {
    /// `io`, keeping the time this connection spends waiting for its peer's bytes
    /// until setup is over.
    pub fn watch<S>(&self, io: S) -> PeerClock<S> {
        PeerClock::new(io, self.progress.clone())
    }

    /// Setup is over (the first request's headers arrived): free the place.
    pub fn done(&self) {
        if !self.finished.is_cancelled() {
            self.progress.over.store(true, Ordering::Relaxed);
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
    use std::pin::Pin;
    use std::task::Context;

    use tokio::io::{AsyncRead, ReadBuf};

    use super::*;

    const SILENT: Duration = Duration::from_millis(100);
    const SLOW: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_freed_place_is_taken_and_nobody_is_pushed_out() {
        let slots = SetupSlots::new(2, SILENT, SLOW);
        let a = slots.admit(None).await;
        let b = slots.admit(None).await;
        let freed_later = async {
            tokio::task::yield_now().await;
            b.done();
        };
        let (_c, ()) = tokio::join!(slots.admit(None), freed_later);
        assert!(!a.evicted.is_cancelled());
        assert_eq!(slots.len(), 2);
    }

    #[tokio::test]
    async fn the_silent_go_first_and_the_talking_only_when_slow() {
        let slots = SetupSlots::new(2, SILENT, SLOW);
        let talking = slots.admit(None).await;
        talking.progress.spoke.store(true, Ordering::Relaxed);
        talking.progress.wait_began();
        let silent = slots.admit(None).await;
        silent.progress.wait_began();
        let started = Instant::now();
        let third = slots.admit(None).await;
        assert!(silent.evicted.is_cancelled(), "the silent one goes first");
        assert!(
            !talking.evicted.is_cancelled(),
            "though the talking one is older"
        );
        assert!(started.elapsed() + Duration::from_millis(1) >= SILENT - Duration::from_millis(5));
        // Both left are talking now: the oldest goes only once it has kept the
        // server waiting too long.
        third.progress.spoke.store(true, Ordering::Relaxed);
        third.progress.wait_began();
        let _fourth = slots.admit(None).await;
        assert!(talking.evicted.is_cancelled());
        assert!(!third.evicted.is_cancelled());
        assert!(started.elapsed() + Duration::from_millis(1) >= SLOW - Duration::from_millis(5));
        assert_eq!(slots.len(), 2);
    }

    /// A busy server is not its clients' fault: a connection whose task has not
    /// read yet, or whose bytes wait for the server, keeps its place however long.
    #[tokio::test]
    async fn time_the_server_keeps_a_connection_waiting_does_not_count() {
        let slots = SetupSlots::new(2, SILENT, SLOW);
        let never_polled = slots.admit(None).await;
        let served_slowly = slots.admit(None).await;
        served_slowly.progress.spoke.store(true, Ordering::Relaxed);
        served_slowly.progress.wait_began();
        served_slowly.progress.wait_ended();
        let refused = tokio::time::timeout(SLOW * 2, slots.admit(None)).await;
        assert!(refused.is_err(), "a place was taken from a waiting server");
        assert!(!never_polled.evicted.is_cancelled());
        assert!(!served_slowly.evicted.is_cancelled());
        // Once the silent one has waited on its peer, it may go.
        never_polled.progress.wait_began();
        let _next = slots.admit(None).await;
        assert!(never_polled.evicted.is_cancelled());
        assert!(!served_slowly.evicted.is_cancelled());
    }

    /// Bytes that wait unread in the socket are the server's delay: their
    /// connection keeps its place until the server has read them and waited again.
    #[tokio::test]
    async fn unread_bytes_in_the_socket_keep_a_connection_in() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (mut server, _) = listener.accept().await.expect("accept");
        tokio::io::AsyncWriteExt::write_all(&mut client, b"hello")
            .await
            .expect("write");
        let slots = SetupSlots::new(1, SILENT, SLOW);
        let behind = slots.admit(probe(&server)).await;
        assert!(probe(&server).is_some(), "sockets can be duplicated here");
        // Its clock says silent: it was polled before its bytes arrived.
        behind.progress.wait_began();
        let refused = tokio::time::timeout(SILENT * 3, slots.admit(None)).await;
        assert!(refused.is_err(), "pushed out while its bytes wait unread");
        assert!(!behind.evicted.is_cancelled());
        // Once read, with nothing more coming, it is silent in truth.
        let mut hello = [0u8; 5];
        tokio::io::AsyncReadExt::read_exact(&mut server, &mut hello)
            .await
            .expect("read");
        let _next = slots.admit(None).await;
        assert!(behind.evicted.is_cancelled());
    }

    #[tokio::test]
    async fn the_stream_keeps_the_peers_time_until_setup_is_over() {
        let slots = SetupSlots::new(1, SILENT, SLOW);
        let slot = slots.admit(None).await;
        let (mut client, server) = tokio::io::duplex(64);
        let mut watched = slot.watch(server);
        let mut byte = [0u8; 1];
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut read = ReadBuf::new(&mut byte);
        assert!(
            Pin::new(&mut watched)
                .poll_read(&mut cx, &mut read)
                .is_pending()
        );
        assert_ne!(slot.progress.waiting_since.load(Ordering::Relaxed), 0);
        assert!(!slot.progress.spoke.load(Ordering::Relaxed));
        tokio::io::AsyncWriteExt::write_all(&mut client, b"x")
            .await
            .expect("write");
        tokio::io::AsyncReadExt::read_exact(&mut watched, &mut byte)
            .await
            .expect("read");
        assert!(slot.progress.spoke.load(Ordering::Relaxed));
        assert_eq!(slot.progress.waiting_since.load(Ordering::Relaxed), 0);
        slot.done();
        let mut read = ReadBuf::new(&mut byte);
        assert!(
            Pin::new(&mut watched)
                .poll_read(&mut cx, &mut read)
                .is_pending()
        );
        assert_eq!(
            slot.progress.waiting_since.load(Ordering::Relaxed),
            0,
            "no time is kept after setup"
        );
    }
}
