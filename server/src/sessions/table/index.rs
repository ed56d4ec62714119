//! Every open session on this node, indexed by id: inserts that hold the
//! session caps under one lock, lookups scoped by tenant and token, and the
//! one way a session leaves (`finish`), which remembers why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::EndReason;
use latchkey_protocol::agent::SessionEvent;

use super::{Abort, Session, SessionCap, ended};
use crate::core_error::CoreError;
use crate::telemetry::metrics::SESSIONS_OPEN;

/// Every open session on this node.
#[derive(Debug, Clone, Default)]
pub struct SessionTable {
    inner: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    /// Sessions that ended lately, so a later call learns why.
    ended: Arc<ended::EndedSessions>,
    /// Moved on by every policy write before it looks for the sessions to
    /// update, and read by a start before it reads the policy: a start that
    /// finds it moved by the time it is in the table reads the policy again, so
    /// no session keeps a policy read before a write it missed.
    policy_epoch: Arc<AtomicU64>,
    /// Moved on whenever a session starts or ends here, or hands the page to
    /// its person and gets it back: the console's live pages redraw on it
    /// (docs/console.md, "Live updates").
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl SessionTable {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes whenever a session starts or ends here, or a help request
    /// begins or ends.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Say that what a list shows of a session here changed.
    pub fn moved_on(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Where policy writes are (see the field).
    pub fn policy_epoch(&self) -> u64 {
        self.policy_epoch.load(Ordering::SeqCst)
    }

    /// A policy was written: sessions listed from now on are updated by the writer.
    pub fn policy_written(&self) {
        self.policy_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Add `session` unless its device already has `per_device` sessions open or its
    /// token `per_token`, checked under the same lock as the insert so that starts
    /// racing each other cannot pass a cap together.
    pub fn try_insert(
        &self,
        session: Arc<Session>,
        per_device: usize,
        per_token: usize,
    ) -> Result<(), SessionCap> {
        let mut map = self.map();
        let (mut on_device, mut of_token) = (0, 0);
        for s in map.values() {
            on_device += usize::from(s.device_id == session.device_id);
            of_token += usize::from(
                s.root_token_id == session.root_token_id && s.tenant_id == session.tenant_id,
            );
        }
        if on_device >= per_device {
            return Err(SessionCap::PerDevice(per_device));
        }
        if of_token >= per_token {
            return Err(SessionCap::PerToken(per_token));
        }
        self.ended.forget(&session.id);
        if map.insert(session.id.clone(), session).is_none() {
            metrics::gauge!(SESSIONS_OPEN).increment(1.0);
        }
        drop(map);
        self.moved_on();
        Ok(())
    }

    /// The session if it belongs to this tenant and token; otherwise `None`, exactly
    /// as for an id that never existed.
    pub fn get_owned(&self, tenant_id: &str, token_id: &str, id: &str) -> Option<Arc<Session>> {
        self.map()
            .get(id)
            .filter(|s| s.tenant_id == tenant_id && s.token_id == token_id)
            .cloned()
    }

    /// The caller's own session; `session_ended` with the reason for one that
    /// ended lately; otherwise the protocol's `not_found` (also for another
    /// token's or tenant's session, exactly as for an unknown id).
    pub fn owned(
        &self,
        caller: &crate::auth::principal::Principal,
        id: &str,
    ) -> Result<Arc<Session>, CoreError> {
        self.owned_by(&caller.tenant_id, Self::owner_of(caller, id), id)
    }

    /// The token whose session `id` must be for `caller` to act on it: its
    /// own, or for a one-session delegation scoped to `id`, its delegator's.
    pub fn owner_of<'a>(caller: &'a crate::auth::principal::Principal, id: &str) -> &'a str {
        match &caller.delegation {
            Some(d) if d.scope.session_id.as_deref() == Some(id) => d.delegator.as_str(),
            _ => caller.token_id.as_str(),
        }
    }

    /// [`Self::owned`] for the token `owner` of the tenant (what another
    /// replica asks in the caller's name).
    pub fn owned_by(
        &self,
        tenant_id: &str,
        owner: &str,
        id: &str,
    ) -> Result<Arc<Session>, CoreError> {
        self.get_owned(tenant_id, owner, id).ok_or_else(|| {
            match self.ended.reason(tenant_id, owner, id) {
                Some(reason) => CoreError::SessionEnded(reason),
                None => CoreError::SessionNotFound,
            }
        })
    }

    /// Whether a session `id` runs here, whoever's it is.
    pub fn holds(&self, id: &str) -> bool {
        self.map().contains_key(id)
    }

    /// The session if it runs on `device_id` (events from that device only).
    pub fn get_on_device(&self, device_id: &str, id: &str) -> Option<Arc<Session>> {
        self.map()
            .get(id)
            .filter(|s| s.device_id == device_id)
            .cloned()
    }

    pub fn get_in_tenant(&self, tenant_id: &str, id: &str) -> Option<Arc<Session>> {
        self.map()
            .get(id)
            .filter(|s| s.tenant_id == tenant_id)
            .cloned()
    }

    /// End `session` for `reason`: remembered so that a later call learns the
    /// reason, out of the table, ended for its listeners, its call in flight
    /// answered as `why` says. False if it had already ended.
    ///
    /// Remembered before it leaves the table, so a lookup in between finds the
    /// session or its reason, never neither (which would answer `not_found`).
    pub fn finish(&self, session: &Session, reason: EndReason, why: Abort) -> bool {
        self.ended
            .bury(&session.id, &session.tenant_id, &session.token_id, reason);
        self.remove_if_same(session);
        end_session(session, reason, why)
    }

    /// Remove `session` if the table holds that very session under its id.
    fn remove_if_same(&self, session: &Session) {
        let mut map = self.map();
        if map
            .get(&session.id)
            .is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), session))
        {
            map.remove(&session.id);
            metrics::gauge!(SESSIONS_OPEN).decrement(1.0);
            drop(map);
            self.moved_on();
        }
    }

    /// Remove it; returns it if it was there (a start that failed: nothing to
    /// remember).
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.map().remove(id);
        if removed.is_some() {
            metrics::gauge!(SESSIONS_OPEN).decrement(1.0);
            self.moved_on();
        }
        removed
    }

    pub fn list(&self, filter: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
        let mut out: Vec<Arc<Session>> =
            self.map().values().filter(|s| filter(s)).cloned().collect();
        out.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        out
    }

    pub fn count_on_device(&self, device_id: &str) -> usize {
        self.map()
            .values()
            .filter(|s| s.device_id == device_id)
            .count()
    }

    /// End every session of a device (disconnect, replacement, revocation): no
    /// `tool.session_stop` is sent; callers are failed by the link closing.
    pub fn purge_device(&self, device_id: &str, reason: EndReason) -> usize {
        let removed: Vec<Arc<Session>> = {
            let mut map = self.map();
            let ids: Vec<String> = map
                .values()
                .filter(|s| s.device_id == device_id)
                .map(|s| s.id.clone())
                .collect();
            // Remembered under the lock that takes them out: a lookup finds
            // each session or its reason, never neither (as in `finish`).
            let removed: Vec<Arc<Session>> = ids.iter().filter_map(|id| map.remove(id)).collect();
            for s in &removed {
                self.ended.bury(&s.id, &s.tenant_id, &s.token_id, reason);
            }
            removed
        };
        metrics::gauge!(SESSIONS_OPEN).decrement(removed.len() as f64);
        if !removed.is_empty() {
            self.moved_on();
        }
        for s in &removed {
            end_session(s, reason, Abort::BrowserGone);
        }
        removed.len()
    }
}

/// Mark a removed session ended, abort its calls (callers learn `why`) and tell its
/// listeners; false if it had already ended.
fn end_session(session: &Session, reason: EndReason, why: Abort) -> bool {
    let first = session.end_for(reason);
    if first {
        session.abort(why);
        session.emit(SessionEvent::SessionEnded {
            session_id: session.id.clone(),
            reason,
        });
    }
    first
}
