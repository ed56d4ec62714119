//! A hard cap on connections still in setup (TCP accepted, TLS and the first HTTP
//! request's headers not yet complete), in all and per client address.
//!
//! Per address (an IPv6 /64 counts as one; a trusted proxy's connections count
//! each on their own, as the clients behind it are not known yet): at most
//! `per_peer` of the places, a fraction of the cap, so that one address holding
//! thousands of connections leaves the other places free for everyone else. An
//! address at its share pushes out its own connections by the rules below, never
//! another address's ([`super::admission`] keeps its further connections waiting).
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

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use super::peer_clock::PeerClock;
use super::peer_clock::Progress;

/// Default for `limits.max_connections_in_setup` (docs/protocol.md, "Limits": 64
/// pre-auth connections).
pub const DEFAULT_MAX_IN_SETUP: usize = 64;
/// Default for `limits.max_connections_in_setup_per_peer`: a quarter of the places.
pub const DEFAULT_MAX_IN_SETUP_PER_PEER: usize = 16;

/// Why [`SetupSlots::try_admit`] found no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// When to look again, if no place frees first.
    pub wait: Duration,
    /// Every place is taken and none may be pushed out: no address gets one now (as
    /// opposed to this address being at its share).
    pub everyone: bool,
}

/// Whose share of the places a connection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerKey {
    /// A client address (IPv6 folded to its /64).
    Addr(IpAddr),
    /// A connection from a trusted proxy: its client is known only from its
    /// headers, so it is a peer of its own.
    Proxied(u64),
}

impl PeerKey {
    /// The key of a connection from `ip`; `proxied` gives each trusted-proxy
    /// connection its own.
    pub fn of(ip: IpAddr, proxied: Option<u64>) -> Self {
        match (proxied, ip.to_canonical()) {
            (Some(n), _) => PeerKey::Proxied(n),
            (None, IpAddr::V6(v6)) => {
                let s = v6.segments();
                PeerKey::Addr(IpAddr::V6(std::net::Ipv6Addr::new(
                    s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                )))
            }
            (None, v4) => PeerKey::Addr(v4),
        }
    }
}

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
    peer: PeerKey,
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

/// The connections in setup, under one lock.
#[derive(Debug, Default)]
struct Live {
    /// By admission order: the first entry is the oldest.
    entries: BTreeMap<u64, Entry>,
    /// Places taken per peer.
    per_peer: HashMap<PeerKey, usize>,
}

impl Live {
    fn taken_by(&self, peer: PeerKey) -> usize {
        self.per_peer.get(&peer).copied().unwrap_or(0)
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&entry.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

#[derive(Debug)]
struct Inner {
    cap: usize,
    per_peer_cap: usize,
    silent_after: Duration,
    evict_after: Duration,
    live: Mutex<Live>,
    /// Woken when a place frees.
    freed: Notify,
    next_id: AtomicU64,
    /// The cap warning, at most once a minute.
    last_warning: crate::telemetry::every::Every,
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
    pub fn new(
        cap: usize,
        per_peer_cap: usize,
        silent_after: Duration,
        evict_after: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                cap: cap.max(1),
                per_peer_cap: per_peer_cap.max(1),
                silent_after,
                evict_after,
                live: Mutex::new(Live::default()),
                freed: Notify::new(),
                next_id: AtomicU64::new(0),
                last_warning: crate::telemetry::every::Every::new(WARN_EVERY),
            }),
        }
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.inner.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection of `peer` now: a free one, or one taken from a
    /// connection that may be pushed out (see the module docs; it is dropped). An
    /// address at its share may push out only its own. `probe` makes the new
    /// connection's probe, and is called only when it gets a place.
    pub fn try_admit(
        &self,
        peer: PeerKey,
        probe: impl FnOnce() -> Option<Probe>,
    ) -> Result<SetupSlot, Refused> {
        let mut live = self.live();
        let at_share =
            matches!(peer, PeerKey::Addr(_)) && live.taken_by(peer) >= self.inner.per_peer_cap;
        if !at_share && live.entries.len() < self.inner.cap {
            return Ok(self.insert(&mut live, peer, probe()));
        }
        let now = Instant::now();
        // Silent ones first, the oldest of them; then the oldest slow one.
        let mut victim: Option<(u64, Kind)> = None;
        // Clocks start and stop unseen here: look again within a quarter of the
        // silent limit even when none is close to its limit.
        let mut wait = self.inner.silent_after / 4;
        for (id, entry) in live.entries.iter() {
            if at_share && entry.peer != peer {
                continue;
            }
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
        let Some((pushed_out, kind)) = victim.and_then(|(id, kind)| Some((live.remove(id)?, kind)))
        else {
            return Err(Refused {
                wait,
                everyone: !at_share,
            });
        };
        pushed_out.evict.cancel();
        let slot = self.insert(&mut live, peer, probe());
        drop(live);
        self.pushed_out(&pushed_out.progress, kind, now, at_share);
        Ok(slot)
    }

    /// Resolves when a place frees (a permit is kept if none is waiting, so a
    /// release between a refused [`Self::try_admit`] and this is not missed).
    pub fn freed(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.freed.notified()
    }

    /// Wait for a place for the next connection of `peer`.
    #[cfg(test)]
    pub async fn admit(&self, peer: PeerKey, probe: Option<Probe>) -> SetupSlot {
        let mut probe = probe;
        loop {
            let freed = self.freed();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait = match self.try_admit(peer, || probe.take()) {
                Ok(slot) => return slot,
                Err(refused) => refused.wait,
            };
            tokio::select! {
                _ = &mut freed => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn insert(&self, live: &mut Live, peer: PeerKey, probe: Option<Probe>) -> SetupSlot {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        let progress = Arc::new(Progress::new());
        live.entries.insert(
            id,
            Entry {
                peer,
                evict: evicted.clone(),
                progress: progress.clone(),
                probe,
            },
        );
        *live.per_peer.entry(peer).or_insert(0) += 1;
        SetupSlot {
            slots: self.clone(),
            id,
            evicted,
            finished: CancellationToken::new(),
            progress,
        }
    }

    #[cfg(test)]
    /// Connections in setup now.
    pub fn len(&self) -> usize {
        self.live().entries.len()
    }

    #[cfg(test)]
    /// Places `peer` holds now.
    pub fn taken_by(&self, peer: PeerKey) -> usize {
        self.live().taken_by(peer)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release(&self, id: u64) {
        let removed = self.live().remove(id);
        if removed.is_some() {
            self.inner.freed.notify_one();
        }
    }

    /// Count a push-out by kind, say at debug level what it had done, and warn at
    /// most once a minute however hard the listener is flooded.
    fn pushed_out(&self, progress: &Progress, kind: Kind, now: Instant, own_share: bool) {
        metrics::counter!(crate::telemetry::metrics::SETUP_EVICTIONS, "kind" => kind.label())
            .increment(1);
        tracing::debug!(
            kind = kind.label(),
            own_share,
            in_setup_ms = progress.ms_at(now),
            waited_on_peer_ms = progress.waited_at(now).as_millis(),
            "connection pushed out at the setup cap"
        );
        let due = self.inner.last_warning.due().is_some();
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
mod tests;
