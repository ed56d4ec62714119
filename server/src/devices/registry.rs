//! Which devices have a live socket on this node, and how to close one at once.
//!
//! Each connection task registers under its device id with a fresh generation and receives
//! a close signal (a `watch`, so a close is never lost and never blocks the sender).
//! Registering a device that already has a socket signals the old one `replaced`;
//! unregistering only removes the entry if the generation still matches, so an old socket's
//! cleanup cannot evict its replacement (docs/protocol.md, "Handshake").

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::CloseCode;
use latchkey_protocol::additions::Features;
use tokio::sync::watch;

use crate::devices::link::{DeviceLink, Link, reason_for_close};

/// State a connection shares with readers such as the admin device list.
#[derive(Debug, Default)]
pub struct ConnectionState {
    /// Set once the handshake succeeded.
    pub online: AtomicBool,
    /// Last inbound frame, Unix ms.
    pub last_seen_ms: AtomicI64,
    /// When a revocation asked this socket to close (for the revoke → close latency).
    revoked_at: Mutex<Option<std::time::Instant>>,
}

impl ConnectionState {
    /// When a revocation signalled this socket, if one did.
    pub fn revoked_since(&self) -> Option<std::time::Instant> {
        *self.revoked_at.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct Entry {
    tenant_id: String,
    generation: u64,
    /// When this socket registered (Unix ms): a socket of the same device on
    /// another replica that registered later replaces it (docs/cluster.md).
    connected_at_ms: i64,
    close: watch::Sender<Option<CloseCode>>,
    state: Arc<ConnectionState>,
    /// Set once the handshake succeeded: how calls reach the socket.
    link: Option<Arc<DeviceLink>>,
    /// Counts against the node's online capacity. Taken at the handshake, and
    /// handed on to a replacing socket, so a device at capacity can reconnect.
    holds_slot: bool,
}

/// Why a handshaken socket could not be made routable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachError {
    /// A newer socket of the same device took over meanwhile.
    Replaced,
    /// The node is at its online-device capacity.
    AtCapacity,
}

/// What a connection task holds after registering.
#[derive(Debug)]
pub struct Registration {
    pub generation: u64,
    /// When it registered (Unix ms), as other replicas are told.
    pub connected_at_ms: i64,
    /// This registration closed an older socket of the same device.
    pub replaced: bool,
    /// Becomes `Some(code)` when the socket must close.
    pub close: watch::Receiver<Option<CloseCode>>,
    pub state: Arc<ConnectionState>,
}

fn signal_close(e: &Entry, code: CloseCode) {
    if code == CloseCode::Revoked {
        // The first signal starts the clock: a revocation signals twice, before
        // and after its commit (admin::devices::revoke).
        e.state
            .revoked_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(std::time::Instant::now);
    }
    if let Some(link) = &e.link {
        link.close(reason_for_close(Some(code)));
    }
    e.close.send_replace(Some(code));
}

#[derive(Debug, Clone, Default)]
pub struct DeviceRegistry {
    inner: Arc<RegistryInner>,
}

#[derive(Debug, Default)]
struct RegistryInner {
    entries: Mutex<HashMap<String, Entry>>,
    /// Entries holding a capacity slot; changed only under the `entries` lock.
    slots: AtomicUsize,
    next_generation: AtomicU64,
    /// Closes signalled through [`DeviceRegistry::close`] and
    /// [`DeviceRegistry::close_generation`] (revocations, grant sweeps), counted
    /// under the `entries` lock whether or not the device had a socket.
    grant_changes: AtomicU64,
    /// Woken whenever a device comes online (session starts may wait for one).
    online: tokio::sync::Notify,
    /// Moved on whenever a device comes online or goes offline here: the
    /// console's live pages redraw on it (docs/console.md, "Live updates").
    changes: watch::Sender<u64>,
    /// Replacements per device key in the current minute ([`Self::note_replacement`]).
    replacements: Mutex<Replacements>,
}

#[derive(Debug, Default)]
struct Replacements {
    windows: HashMap<String, ReplacementWindow>,
    /// When windows that are over were last swept.
    swept: Option<std::time::Instant>,
}

/// How many replacements a device key had in the minute that began at `since`.
#[derive(Debug, Clone, Copy)]
struct ReplacementWindow {
    since: std::time::Instant,
    count: u32,
}

/// The window the replacement-loop guard counts in.
const REPLACEMENT_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);
/// Keys kept before windows that are over are swept.
const REPLACEMENT_KEYS_SWEEP_AT: usize = 4096;

impl DeviceRegistry {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding this lock cannot leave the map inconsistent: every
        // critical section is a single insert, remove or read.
        self.inner
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Register a new socket for `device_id`, replacing (and closing) any older one.
    pub fn register(&self, device_id: &str, tenant_id: &str, now_ms: i64) -> Registration {
        let generation = self.inner.next_generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (close, close_rx) = watch::channel(None);
        let state = Arc::new(ConnectionState::default());
        state.last_seen_ms.store(now_ms, Ordering::Relaxed);
        let mut entries = self.entries();
        let inherits_slot = entries.get(device_id).is_some_and(|e| e.holds_slot);
        let old = entries.insert(
            device_id.to_string(),
            Entry {
                tenant_id: tenant_id.to_string(),
                generation,
                connected_at_ms: now_ms,
                close,
                state: state.clone(),
                link: None,
                holds_slot: inherits_slot,
            },
        );
        drop(entries);
        let replaced = old.is_some();
        if let Some(old) = old {
            old.close.send_replace(Some(CloseCode::Replaced));
            if let Some(link) = old.link {
                link.close(reason_for_close(Some(CloseCode::Replaced)));
            }
        }
        Registration {
            generation,
            connected_at_ms: now_ms,
            replaced,
            close: close_rx,
            state,
        }
    }

    /// Count one replacement of the device `key` stands for (its id; for a local
    /// extension, its extension id) in the current minute.
    pub fn note_replacement(&self, key: &str) {
        let now = std::time::Instant::now();
        let mut guard = self
            .inner
            .replacements
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Replacements { windows, swept } = &mut *guard;
        // Swept at most once a second: a reconnect storm replaces thousands of
        // devices within one window, and none of them is due for sweeping yet.
        if windows.len() >= REPLACEMENT_KEYS_SWEEP_AT
            && swept.is_none_or(|at| now.duration_since(at) >= std::time::Duration::from_secs(1))
        {
            windows.retain(|_, w| now.duration_since(w.since) < REPLACEMENT_WINDOW);
            *swept = Some(now);
        }
        let window = windows.entry(key.to_string()).or_insert(ReplacementWindow {
            since: now,
            count: 0,
        });
        if now.duration_since(window.since) >= REPLACEMENT_WINDOW {
            *window = ReplacementWindow {
                since: now,
                count: 0,
            };
        }
        window.count = window.count.saturating_add(1);
    }

    /// The replacement-loop guard: when the device `key` stands for was replaced
    /// more than `max_per_minute` times in the current minute, how long until the
    /// minute is over. Two copies of one device that each reconnect the moment the
    /// other replaces them would otherwise knock each other offline forever (a
    /// socket that opens resets an extension's backoff; a refused upgrade grows it).
    pub fn replacement_backoff(
        &self,
        key: &str,
        max_per_minute: u32,
    ) -> Option<std::time::Duration> {
        let guard = self
            .inner
            .replacements
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let w = guard.windows.get(key)?;
        let elapsed = w.since.elapsed();
        (w.count > max_per_minute && elapsed < REPLACEMENT_WINDOW)
            .then(|| REPLACEMENT_WINDOW - elapsed)
    }

    /// Remove the entry if it still belongs to `generation`.
    pub fn unregister(&self, device_id: &str, generation: u64) {
        let mut entries = self.entries();
        if entries
            .get(device_id)
            .is_some_and(|e| e.generation == generation)
            && entries.remove(device_id).is_some_and(|e| e.holds_slot)
        {
            self.inner.slots.fetch_sub(1, Ordering::Relaxed);
            drop(entries);
            self.moved_on();
        }
    }

    /// Whether a socket for `device_id` may be upgraded: the node has a free slot,
    /// or the device already holds one (it may replace its own connection).
    pub fn admits(&self, device_id: &str, max_online: usize) -> bool {
        let entries = self.entries();
        entries.get(device_id).is_some_and(|e| e.holds_slot)
            || self.inner.slots.load(Ordering::Relaxed) < max_online
    }

    /// Make a handshaken connection reachable for calls (if it is still the current
    /// one), taking a capacity slot unless it already holds one.
    pub fn attach_link(
        &self,
        device_id: &str,
        generation: u64,
        link: Arc<DeviceLink>,
        max_online: usize,
    ) -> Result<(), AttachError> {
        let mut entries = self.entries();
        let Some(e) = entries
            .get_mut(device_id)
            .filter(|e| e.generation == generation)
        else {
            return Err(AttachError::Replaced);
        };
        if !e.holds_slot {
            if self.inner.slots.load(Ordering::Relaxed) >= max_online {
                return Err(AttachError::AtCapacity);
            }
            self.inner.slots.fetch_add(1, Ordering::Relaxed);
            e.holds_slot = true;
        }
        e.link = Some(link);
        drop(entries);
        self.inner.online.notify_waiters();
        self.moved_on();
        Ok(())
    }

    /// Changes whenever a device comes online or goes offline here.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    fn moved_on(&self) {
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Capacity slots taken (devices online, or reconnecting into their own slot).
    pub fn slots_taken(&self) -> usize {
        self.inner.slots.load(Ordering::Relaxed)
    }

    /// How calls reach the device's socket, if it is online.
    pub fn link(&self, device_id: &str) -> Option<Arc<dyn Link>> {
        self.entries()
            .get(device_id)
            .and_then(|e| e.link.clone())
            .filter(|l| !l.is_closed())
            .map(|l| l as Arc<dyn Link>)
    }

    /// The link to the tenant's device's socket here; with `at`, only if it is
    /// the socket opened then (a call relayed from another replica means that one).
    pub fn link_in_tenant(&self, tenant: &str, id: &str, at: Option<i64>) -> Option<Arc<dyn Link>> {
        let entries = self.entries();
        let e = entries.get(id).filter(|e| e.tenant_id == tenant)?;
        let link = e.link.clone().filter(|l| !l.is_closed());
        link.filter(|_| at.is_none_or(|at| e.connected_at_ms == at))
            .map(|l| l as Arc<dyn Link>)
    }

    /// Ids of the tenant's devices that are online (handshaken) on this node.
    pub fn online_in_tenant(&self, tenant_id: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .entries()
            .iter()
            .filter(|(_, e)| {
                e.tenant_id == tenant_id && e.link.as_ref().is_some_and(|l| !l.is_closed())
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// A future woken when a device next comes online here. Made now, not when
    /// first polled: a device that comes online before then counts.
    pub fn came_online(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.online.notified()
    }

    /// Signal the device's live socket to close with `code`, failing its in-flight
    /// calls at once and refusing new ones. Returns whether there was a socket.
    pub fn close(&self, device_id: &str, code: CloseCode) -> bool {
        self.close_if(device_id, code, |_| true)
    }

    /// [`Self::close`], but only if the device's socket here belongs to `tenant_id`:
    /// for closing on a tenant's word before its store has confirmed the device is
    /// the tenant's (a foreign id must close nothing).
    pub fn close_in_tenant(&self, tenant_id: &str, device_id: &str, code: CloseCode) -> bool {
        self.close_if(device_id, code, |e| e.tenant_id == tenant_id)
    }

    /// [`Self::close`], but only the socket of that `generation`: a sweep that read
    /// the store before the device reconnected must not close the newer socket.
    pub fn close_generation(&self, device_id: &str, generation: u64, code: CloseCode) -> bool {
        self.close_if(device_id, code, |e| e.generation == generation)
    }

    /// Close the device's socket here with `replaced` if it is the tenant's and
    /// registered before `connected_at_ms`: the device connected to another
    /// replica since. A socket here that is newer stays (the notice of the
    /// other socket was overtaken by a reconnect to this node), so the latest
    /// socket wins on every replica alike.
    pub fn close_if_older(&self, tenant_id: &str, device_id: &str, connected_at_ms: i64) -> bool {
        self.close_if(device_id, CloseCode::Replaced, |e| {
            e.tenant_id == tenant_id && e.connected_at_ms < connected_at_ms
        })
    }

    /// When the tenant's device's handshaken socket here registered, if that was
    /// after `than`: the other replica that told of an older socket is told of
    /// this one in turn, so it closes its own.
    pub fn newer_here(&self, tenant_id: &str, device_id: &str, than: i64) -> Option<i64> {
        self.entries()
            .get(device_id)
            .filter(|e| e.tenant_id == tenant_id && e.connected_at_ms > than)
            .filter(|e| e.link.as_ref().is_some_and(|l| !l.is_closed()))
            .map(|e| e.connected_at_ms)
    }

    /// Signal every socket of the tenant on this node (revoke-all, before its
    /// commit). Returns how many there were.
    pub fn close_tenant(&self, tenant_id: &str, code: CloseCode) -> usize {
        let entries = self.entries();
        self.inner.grant_changes.fetch_add(1, Ordering::Relaxed);
        let mut closed = 0;
        for e in entries.values().filter(|e| e.tenant_id == tenant_id) {
            signal_close(e, code);
            closed += 1;
        }
        closed
    }

    /// The one way a single socket is closed: counted as a close signalled whether
    /// or not the device has a socket here that `admits`, under the entries lock
    /// (see [`Self::grant_changes`]).
    fn close_if(
        &self,
        device_id: &str,
        code: CloseCode,
        admits: impl FnOnce(&Entry) -> bool,
    ) -> bool {
        let entries = self.entries();
        self.inner.grant_changes.fetch_add(1, Ordering::Relaxed);
        match entries.get(device_id) {
            Some(e) if admits(e) => {
                signal_close(e, code);
                true
            }
            _ => false,
        }
    }

    /// How many closes have been signalled so far. A connection notes it before its
    /// device is authenticated; if it is unchanged once the connection is
    /// registered, no revocation on this node came in between, and the record read
    /// at authentication is still the grant (a revocation after the registration
    /// reaches the socket by push). Read after [`Self::register`], whose lock orders
    /// it after any close that registration did not see.
    pub fn grant_changes(&self) -> u64 {
        self.inner.grant_changes.load(Ordering::Relaxed)
    }

    /// Every online (handshaken) socket on this node, `(device id, generation)` by
    /// tenant: what the grant sweep re-reads.
    pub fn online_by_tenant(&self) -> HashMap<String, Vec<(String, u64)>> {
        let mut by_tenant: HashMap<String, Vec<(String, u64)>> = HashMap::new();
        for (id, e) in self.entries().iter() {
            if e.link.as_ref().is_some_and(|l| !l.is_closed()) {
                by_tenant
                    .entry(e.tenant_id.clone())
                    .or_default()
                    .push((id.clone(), e.generation));
            }
        }
        by_tenant
    }

    /// `(tenant, device, connected_at_ms, features)` of every handshaken socket here: what
    /// a replica tells the others again once NATS is back (docs/cluster.md).
    pub fn online_since(&self) -> Vec<(String, String, i64, Features)> {
        self.entries()
            .iter()
            .filter_map(|(id, e)| {
                let link = e.link.as_ref().filter(|l| !l.is_closed())?;
                Some((
                    e.tenant_id.clone(),
                    id.clone(),
                    e.connected_at_ms,
                    link.features(),
                ))
            })
            .collect()
    }

    /// Signal every live socket (shutdown).
    pub fn close_all(&self, code: CloseCode) {
        for e in self.entries().values() {
            if let Some(link) = &e.link {
                link.close(reason_for_close(Some(code)));
            }
            e.close.send_replace(Some(code));
        }
    }

    /// `(online, last_seen_ms)` of the device's live socket, if any.
    pub fn status(&self, device_id: &str) -> Option<(bool, i64)> {
        self.entries().get(device_id).map(|e| {
            (
                e.state.online.load(Ordering::Relaxed),
                e.state.last_seen_ms.load(Ordering::Relaxed),
            )
        })
    }

    /// Number of registered sockets (handshaken or not).
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
