//! A session's life after its start: the watcher that ends it with its token
//! or its policy's time limit and keeps its audit rows, the immediate end
//! (`end_now`) and the idle reaper (docs/sessions.md).

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::effect::{CANCEL_GRACE_MS, SESSION_STOP, SESSION_STOP_TIMEOUT_MS};
use serde_json::{Map, Value};

use crate::audit::{Event, Priority, action};
use crate::auth::token_watch::TokenEnd;
use crate::core::Core;
use crate::devices::link::Link;
use crate::sessions::calls::forward;
use crate::sessions::start_stop::stop;
use crate::sessions::table::{Abort, Session};
use latchkey_protocol::EndReason;

/// The `session_ended` reason of a session that reached its policy's time limit.
pub const TIME_LIMIT: EndReason = EndReason::TimeLimit;

/// The session's watcher, for its whole life. When its token ends (revoked,
/// expired), the session ends with it: the call in flight fails with the token's
/// code, listeners get `session_ended` with reason `token_revoked` or
/// `token_expired`, and the Agent Window is closed in the browser. It also keeps
/// the session's audit rows, in order and off the agent's path: `session.start`
/// once the start has succeeded (`started`; dropped unsent when it failed), and
/// `session.end` with its reason however the session ends. Both are under the
/// the token that opened it.
pub async fn watch_session(
    state: Core,
    session: Arc<Session>,
    mut started: tokio::sync::oneshot::Receiver<()>,
) {
    let mut waiting_for_start = true;
    let mut recorded_start = false;
    let mut policy_changes = session.policy_changes();
    let mut clock_jumps = state.clock.changed();
    loop {
        // The policy's time limit, counted from the start; re-planned whenever
        // the policy is replaced or the clock jumps.
        let limit = session.policy().max_session_minutes.value.map(|m| {
            state
                .clock
                .until(session.created_at + i64::from(m) * 60_000)
        });
        tokio::select! {
            // A start that succeeded is recorded before anything after it.
            biased;
            outcome = &mut started, if waiting_for_start => {
                waiting_for_start = false;
                if outcome.is_ok() {
                    let mut detail = format!("device:{}", session.device_id);
                    if let Some(note) = session.start_note() {
                        detail.push(' ');
                        detail.push_str(&note);
                    }
                    audit_session(&state, &session, action::SESSION_START, detail).await;
                    recorded_start = true;
                }
            }
            end = session.lease.ended() => {
                end_for_token(&state, &session, end);
                break;
            }
            _ = session.ended() => break,
            Ok(()) = policy_changes.changed() => {}
            Ok(()) = clock_jumps.changed() => {}
            _ = tokio::time::sleep(limit.unwrap_or_default()), if limit.is_some() => {
                tracing::info!(session = %session.id, "session reached its policy's time limit");
                end_now(&state, &session, TIME_LIMIT, Abort::Ended(TIME_LIMIT));
            }
        }
    }
    if recorded_start && let Some(reason) = session.end_reason() {
        audit_session(&state, &session, action::SESSION_END, reason.to_string()).await;
    }
}

/// One audit row about `session`: its device, and the reason it ended.
pub(crate) async fn audit_session(
    state: &Core,
    session: &Session,
    what: &'static str,
    detail: String,
) {
    state
        .audit
        .record_with(
            Priority::Background,
            Event {
                tenant_id: &session.tenant_id,
                actor: session.actor.clone(),
                action: what,
                target: crate::audit::session_ref(&session.id),
                outcome: "ok",
                detail: Some(detail),
            },
        )
        .await;
}

fn end_for_token(state: &Core, session: &Arc<Session>, end: TokenEnd) {
    tracing::info!(session = %session.id, tenant = %session.tenant_id, reason = %end.reason(), "session ended with its token");
    end_now(state, session, end.reason(), Abort::Token(end));
}

/// End `session` at once for `reason`: nobody may use it from now on (gone from
/// the table, ended for its listeners, its call in flight answered as `why`
/// says); then, in the background, the browser closes its Agent Window and
/// gives borrowed tabs back.
pub(crate) fn end_now(state: &Core, session: &Arc<Session>, reason: EndReason, why: Abort) {
    session.set_stopping(true);
    state.sessions.finish(session, reason, why);
    // Tracked like a call in flight: a drain waits for the window to close.
    state
        .calls
        .spawn(close_window(state.clone(), session.clone()));
}

/// `tool.session_stop`'s params: the session, and why it stops for an
/// extension that shows its person (docs/protocol.md, "Latchkey's additions").
pub(crate) fn stop_params(
    link: &Arc<dyn Link>,
    session_id: &str,
    reason: EndReason,
) -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("session_id".into(), Value::String(session_id.to_string()));
    if link.features().agent_info {
        params.insert("reason".into(), Value::String(reason.as_str().to_string()));
    }
    params
}

async fn close_window(state: Core, session: Arc<Session>) {
    // The aborted call holds the session for at most its cancel grace.
    session
        .wait_idle(Duration::from_millis(CANCEL_GRACE_MS * 2))
        .await;
    let Some(link) = state.link(&session.tenant_id, &session.device_id) else {
        return;
    };
    let reason = session.end_reason().unwrap_or(EndReason::Stopped);
    let params = stop_params(&link, &session.id, reason);
    let budget = Duration::from_millis(SESSION_STOP_TIMEOUT_MS);
    match forward(link, None, SESSION_STOP, params, budget, None).await {
        Ok(v) => {
            let stopped: Value = serde_json::from_str(v.get()).unwrap_or_default();
            if stopped
                .get("return_failures")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
            {
                tracing::warn!(session = %session.id, "tabs the browser could not return stay in the window of an ended session");
            }
        }
        Err(e) => {
            tracing::warn!(session = %session.id, code = %e.code(), "closing the window of an ended session failed")
        }
    }
}

/// Stop sessions idle longer than the limit (skipping busy ones), every `tick`.
pub async fn idle_reaper(state: Core, idle: Duration, tick: Duration) {
    let mut interval = tokio::time::interval(tick);
    interval.tick().await;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = state.shutdown.cancelled() => return,
        }
        let now = state.clock.now_ms();
        let limit = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
        let idle_sessions = state
            .sessions
            .list(|s| !s.is_busy() && now - s.last_activity() >= limit);
        for session in idle_sessions {
            tracing::info!(session = %session.id, "stopping idle session");
            if let Err(e) = stop(&state, &session, EndReason::Idle).await {
                tracing::debug!(session = %session.id, code = %e.code(), "idle stop failed");
            }
        }
    }
}
