//! Agent sessions: each is an Agent Window on one device, owned by the agent token
//! that opened it. Calls within a session are serialised (a second concurrent call
//! is refused with `session_busy`); sessions run in parallel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::EndReason;
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

mod ended;
mod index;
mod view;
pub use index::SessionTable;

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
    /// The session ended for this reason (the person stopped it, a policy
    /// change, its time limit): its call in flight is answered `session_ended`.
    Ended(EndReason),
}

/// What a browser reports about one of its sessions that the trail keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// The browser stopped a navigation under the session's site rules.
    SiteBlock = 0,
    /// The person interrupted the agent (`session.user_interrupt`).
    Interrupt = 1,
}

/// Reports of one kind a session writes to the trail; more are counted and
/// logged, so that a page looping on a blocked redirect, or a hostile
/// extension repeating an event, cannot flood the team's trail.
pub const MAX_AUDITED_REPORTS: u64 = 20;

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
    /// What the browser reported about the session, by [`Report`]: past
    /// [`MAX_AUDITED_REPORTS`] each is counted but no longer audited one by one.
    reports: [AtomicU64; 2],
    /// Which host each tab shows, for the calls' audit rows.
    pub(crate) tabs: Mutex<crate::sessions::call_audit::TabHosts>,
}

#[derive(Debug, Default)]
struct SessionState {
    agent_window_id: Option<i64>,
    /// The serialised call in flight, if any.
    busy: bool,
    /// That call is `tool.request_help`: the person has the page.
    asking_for_help: bool,
    /// Why the agent wanted the browser, as it said at the start.
    purpose: Option<String>,
    stopping: bool,
    ended: bool,
    /// The `user_aborted` gate (docs/protocol.md, "Events from the extension"): single use, no
    /// expiry.
    marker: bool,
    last_activity: i64,
    /// Why it ended (the `session_ended` reason), once it has.
    end_reason: Option<EndReason>,
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
            reports: Default::default(),
            tabs: Mutex::default(),
        })
    }

    /// Count one report of `kind`; how many there were before.
    pub fn count_report(&self, kind: Report) -> u64 {
        self.reports[kind as usize].fetch_add(1, Ordering::Relaxed)
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
            s.asking_for_help = method == HELP;
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
    pub fn end_for(&self, reason: EndReason) -> bool {
        let first = {
            let mut s = self.state();
            let first = !std::mem::replace(&mut s.ended, true);
            if first {
                s.end_reason = Some(reason);
            }
            first
        };
        self.ended.cancel();
        first
    }

    /// Why the session ended; `None` while it runs, and for a start that failed.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.state().end_reason
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

/// The call that hands the page to the browser's person.
const HELP: &str = "tool.request_help";

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
            let mut s = self.session.state();
            s.busy = false;
            s.asking_for_help = false;
            drop(s);
            self.session.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
