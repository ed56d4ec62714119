//! Agent sessions: each is an Agent Window on one device, owned by the agent token
//! that opened it. Calls within a session are serialised (a second concurrent call
//! is refused with `session_busy`); sessions run in parallel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::effect;
use latchkey_protocol::policy::EffectivePolicy;
use latchkey_protocol::tools::tool_named;
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::auth::token_watch::{TokenEnd, TokenLease};
use crate::core_error::CoreError;
pub use crate::core_error::SessionCap;

mod view;
use crate::telemetry::metrics::SESSIONS_OPEN;

/// Why in-flight calls of a session are being aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// The user pressed Stop on the Agent Window.
    UserInterrupt,
    /// The session is stopping or ending.
    SessionEnding,
    /// The browser's connection ended (disconnect, replacement, revocation).
    BrowserGone,
    /// The API token that opened the session was revoked or expired.
    Token(TokenEnd),
}

/// The token that opens a session, as the session keeps it.
#[derive(Debug, Clone)]
pub struct Opener {
    pub token_id: String,
    /// The API token at the root: itself, or a delegation's root token.
    pub root_token_id: String,
    /// `token:<name>`, for the audit trail.
    pub actor: String,
    pub lease: TokenLease,
}

impl Opener {
    /// A test's opener: a token nobody revokes.
    #[cfg(test)]
    pub fn unwatched(token_id: &str) -> Self {
        Self {
            token_id: token_id.to_string(),
            root_token_id: token_id.to_string(),
            actor: crate::audit::token_actor(token_id),
            lease: TokenLease::unwatched(),
        }
    }
}

#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub tenant_id: String,
    pub device_id: String,
    /// The agent token that opened it; other tokens see `not_found`.
    pub token_id: String,
    /// The opening token as the audit trail names it (`token:<name>`).
    pub actor: String,
    /// The API token at the root of the opener (itself, or a delegation's root):
    /// what policies' `agents` name and the per-token session cap counts.
    pub root_token_id: String,
    pub created_at: i64,
    /// The opening token's lease: the session ends when the token is revoked or
    /// expires (`start_stop::watch_session`).
    pub lease: TokenLease,
    /// Cancelled once the session has ended, whatever ended it.
    ended: CancellationToken,
    state: Mutex<SessionState>,
    events: broadcast::Sender<SessionEvent>,
    abort: watch::Sender<Option<Abort>>,
    /// Woken whenever the session stops being busy.
    idle: Notify,
    /// The policy it runs under (docs/policy.md), replaced when one is written
    /// while it runs; its watcher re-plans the time limit on each change.
    policy: watch::Sender<Arc<EffectivePolicy>>,
    /// Navigations the browser stopped under the session's site rules: past a
    /// bound they are counted but no longer audited one by one.
    site_blocks: AtomicU64,
    /// Which host each tab shows, for the calls' audit rows.
    pub(crate) tabs: Mutex<crate::sessions::call_audit::TabHosts>,
}

#[derive(Debug, Default)]
struct SessionState {
    agent_window_id: Option<i64>,
    /// The serialised call in flight, if any.
    busy: bool,
    stopping: bool,
    ended: bool,
    /// The `user_aborted` gate (docs/protocol.md, "Events from the extension"): single use, no
    /// expiry.
    marker: bool,
    last_activity: i64,
    /// Why it ended (the `session_ended` reason), once it has.
    end_reason: Option<String>,
    /// The browser answered its start: the Agent Window is open.
    opened: bool,
    /// The browser's person is being asked (docs/policy.md, "Consent").
    consent_pending: bool,
    /// What the `session.start` audit row says beside the device: the purpose,
    /// how consent was given.
    start_note: Option<String>,
}

impl Session {
    pub fn new(
        id: String,
        tenant_id: &str,
        device_id: &str,
        opener: Opener,
        now: i64,
        policy: Arc<EffectivePolicy>,
    ) -> Arc<Self> {
        let (events, _) = broadcast::channel(64);
        let (abort, _) = watch::channel(None);
        let (policy, _) = watch::channel(policy);
        Arc::new(Self {
            id,
            tenant_id: tenant_id.to_string(),
            device_id: device_id.to_string(),
            token_id: opener.token_id,
            actor: opener.actor,
            root_token_id: opener.root_token_id,
            created_at: now,
            lease: opener.lease,
            ended: CancellationToken::new(),
            state: Mutex::new(SessionState {
                last_activity: now,
                ..SessionState::default()
            }),
            events,
            abort,
            idle: Notify::new(),
            policy,
            site_blocks: AtomicU64::new(0),
            tabs: Mutex::default(),
        })
    }

    /// Count one navigation the browser stopped; how many there were before.
    pub fn count_site_block(&self) -> u64 {
        self.site_blocks.fetch_add(1, Ordering::Relaxed)
    }

    /// The policy the session runs under now.
    pub fn policy(&self) -> Arc<EffectivePolicy> {
        self.policy.borrow().clone()
    }

    /// Put the session under `policy` from its next call on.
    pub fn set_policy(&self, policy: Arc<EffectivePolicy>) {
        self.policy.send_replace(policy);
    }

    /// Fires whenever the session's policy is replaced.
    pub fn policy_changes(&self) -> watch::Receiver<Arc<EffectivePolicy>> {
        self.policy.subscribe()
    }

    fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take the session for one call of `method`, or refuse as docs/protocol.md, "Sessions" says.
    pub fn begin(self: &Arc<Self>, method: &str, now: i64) -> Result<BusyGuard, CoreError> {
        let mut s = self.state();
        if s.ended {
            return Err(CoreError::SessionNotFound);
        }
        if s.stopping {
            return Err(CoreError::SessionStopping);
        }
        let exempt = tool_named(method).is_some_and(|t| t.busy_exempt);
        if s.busy && !exempt {
            return Err(CoreError::SessionBusy);
        }
        s.last_activity = now;
        // A gated call consumes a pending user interrupt and is not forwarded.
        if effect::effect(method).is_gated() && s.marker {
            s.marker = false;
            return Err(CoreError::UserInterrupted);
        }
        if !exempt {
            s.busy = true;
        }
        // A fresh call is not aborted by an older abort signal.
        self.abort.send_replace(None);
        Ok(BusyGuard {
            session: self.clone(),
            holds_busy: !exempt,
        })
    }

    /// Mark the session stopping (new calls refused); returns false if it already ended.
    pub fn set_stopping(&self, stopping: bool) -> bool {
        let mut s = self.state();
        if s.ended {
            return false;
        }
        s.stopping = stopping;
        true
    }

    /// Mark ended; returns false if it already was.
    pub fn end(&self) -> bool {
        let first = {
            let mut s = self.state();
            !std::mem::replace(&mut s.ended, true)
        };
        self.ended.cancel();
        first
    }

    /// Mark ended for `reason`; returns false if it already was (the first reason
    /// stands).
    pub fn end_for(&self, reason: &str) -> bool {
        let first = {
            let mut s = self.state();
            let first = !std::mem::replace(&mut s.ended, true);
            if first {
                s.end_reason = Some(reason.to_string());
            }
            first
        };
        self.ended.cancel();
        first
    }

    /// Why the session ended; `None` while it runs, and for a start that failed.
    pub fn end_reason(&self) -> Option<String> {
        self.state().end_reason.clone()
    }

    /// Resolves once the session has ended.
    pub async fn ended(&self) {
        self.ended.cancelled().await
    }

    pub fn is_busy(&self) -> bool {
        self.state().busy
    }

    /// Wait until no call holds the session; false if `deadline` passes first.
    pub async fn wait_idle(&self, deadline: Duration) -> bool {
        let end = tokio::time::Instant::now() + deadline;
        loop {
            let notified = self.idle.notified();
            if !self.is_busy() {
                return true;
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                return !self.is_busy();
            }
        }
    }

    pub fn last_activity(&self) -> i64 {
        self.state().last_activity
    }

    /// Set the single-use interrupt marker.
    pub fn arm_marker(&self) {
        self.state().marker = true;
    }

    /// Abort whatever is in flight (its caller gets the matching error).
    pub fn abort(&self, why: Abort) {
        self.abort.send_replace(Some(why));
    }

    pub fn abort_signal(&self) -> watch::Receiver<Option<Abort>> {
        self.abort.subscribe()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionEvent> {
        self.events.subscribe()
    }

    pub fn emit(&self, event: SessionEvent) {
        let _ = self.events.send(event);
    }
}

/// Holds the session busy; dropping it frees the session for the next call.
#[derive(Debug)]
pub struct BusyGuard {
    session: Arc<Session>,
    holds_busy: bool,
}

impl BusyGuard {
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        if self.holds_busy {
            self.session.state().busy = false;
            self.session.idle.notify_waiters();
        }
    }
}

/// Every open session on this node.
#[derive(Debug, Clone, Default)]
pub struct SessionTable {
    inner: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    /// Moved on by every policy write before it looks for the sessions to
    /// update, and read by a start before it reads the policy: a start that
    /// finds it moved by the time it is in the table reads the policy again, so
    /// no session keeps a policy read before a write it missed.
    policy_epoch: Arc<AtomicU64>,
}

impl SessionTable {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
        if map.insert(session.id.clone(), session).is_none() {
            metrics::gauge!(SESSIONS_OPEN).increment(1.0);
        }
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

    /// The caller's own session, or the protocol's `not_found` (also for another
    /// token's or tenant's session, exactly as for an unknown id).
    pub fn owned(
        &self,
        caller: &crate::auth::principal::Principal,
        id: &str,
    ) -> Result<Arc<Session>, CoreError> {
        if let Some(d) = &caller.delegation
            && d.scope.session_id.as_deref() == Some(id)
        {
            // A one-session delegation acts in its delegator's session.
            return self
                .get_owned(&caller.tenant_id, &d.delegator, id)
                .ok_or(CoreError::SessionNotFound);
        }
        self.get_owned(&caller.tenant_id, &caller.token_id, id)
            .ok_or(CoreError::SessionNotFound)
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

    /// Remove it; returns it if it was there.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let removed = self.map().remove(id);
        if removed.is_some() {
            metrics::gauge!(SESSIONS_OPEN).decrement(1.0);
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
    pub fn purge_device(&self, device_id: &str, reason: &str) -> usize {
        let removed: Vec<Arc<Session>> = {
            let mut map = self.map();
            let ids: Vec<String> = map
                .values()
                .filter(|s| s.device_id == device_id)
                .map(|s| s.id.clone())
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        metrics::gauge!(SESSIONS_OPEN).decrement(removed.len() as f64);
        for s in &removed {
            end_session(s, reason, Abort::BrowserGone);
        }
        removed.len()
    }
}

/// Mark a removed session ended, abort its calls (callers learn `why`) and tell its
/// listeners.
pub fn end_session(session: &Session, reason: &str, why: Abort) {
    if session.end_for(reason) {
        session.abort(why);
        session.emit(SessionEvent::SessionEnded {
            session_id: session.id.clone(),
            reason: reason.to_string(),
        });
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
