//! Session start, stop and the idle reaper (docs/protocol.md, "Sessions").

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::ErrorCode;
use latchkey_protocol::agent::{ReturnFailure, StartSessionRequest, StopSessionResult};
use latchkey_protocol::effect::{
    CANCEL_GRACE_MS, SESSION_START, SESSION_STOP, SESSION_STOP_TIMEOUT_MS,
};
use serde_json::{Map, Value, json};

use crate::audit::{Event, Priority, action};
use crate::auth::principal::Principal;
use crate::auth::secret;
use crate::auth::token_watch::TokenEnd;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::policy::{self, PolicyDenial};
use crate::sessions::calls::{forward, send};
use crate::sessions::table::{Abort, Opener, Session, end_session};
use latchkey_protocol::policy::{EffectivePolicy, Layer, PolicyReason};

/// The `session_ended` reason of a session that reached its policy's time limit.
pub const TIME_LIMIT: &str = "time_limit";

/// The longest an agent may wait for a browser to come online (docs/protocol.md, "Limits").
pub const MAX_WAIT_FOR_BROWSER_MS: u64 = 60_000;

/// Which online device of the tenant a new session goes to: among those the
/// caller's delegation names, if it is one (docs/delegation.md).
fn choose_device(
    state: &Core,
    principal: &Principal,
    browser_id: Option<&str>,
) -> Result<String, CoreError> {
    let delegated = |reason, message: &str| {
        CoreError::Policy(PolicyDenial::new(reason, message, &[Layer::Delegation]))
    };
    let mut online = state.registry.online_in_tenant(&principal.tenant_id);
    if let Some(d) = &principal.delegation {
        if d.scope.session_id.is_some() {
            return Err(delegated(
                PolicyReason::SessionNotDelegated,
                "this delegation acts in one session and starts none",
            ));
        }
        if let Some(allowed) = &d.scope.browsers {
            if browser_id.is_some_and(|id| !allowed.iter().any(|a| a == id)) {
                return Err(delegated(
                    PolicyReason::BrowserNotDelegated,
                    "this browser is not among those the delegation names",
                ));
            }
            online.retain(|id| allowed.contains(id));
        }
    }
    match browser_id {
        Some(id) => online
            .into_iter()
            .find(|d| d == id)
            .ok_or(CoreError::BrowserNotOnline),
        None => match online.len() {
            0 => Err(CoreError::NoBrowserConnected),
            1 => Ok(online.into_iter().next().unwrap_or_default()),
            _ => Err(CoreError::MultipleBrowsersOnline(online)),
        },
    }
}

/// The policy a session of `principal` on `device_id` runs under, if it lets
/// the session start at all (docs/policy.md); a refusal is audited.
async fn admitted_by_policy(
    state: &Core,
    principal: &Principal,
    device_id: &str,
) -> Result<Arc<EffectivePolicy>, CoreError> {
    let policy = policy::effective(state, &principal.tenant_id, device_id)
        .await?
        .ok_or(CoreError::BrowserNotOnline)?;
    if let Err(denial) = policy::check_start(&policy, principal.quota_id()) {
        crate::telemetry::metrics::refused("policy");
        policy::audit_denial(
            state,
            &principal.tenant_id,
            principal.actor(),
            format!("device:{device_id}"),
            &denial,
        )
        .await;
        return Err(CoreError::Policy(denial));
    }
    Ok(Arc::new(policy))
}

/// Open an Agent Window on a device. On a timeout the start is cancelled, and a late
/// success is rolled back with `tool.session_stop`.
pub async fn start(
    state: &Core,
    principal: &Principal,
    req: StartSessionRequest,
) -> Result<Arc<Session>, CoreError> {
    let span = tracing::info_span!("session_start", tenant = %principal.tenant_id, session = tracing::field::Empty);
    let result =
        tracing::Instrument::instrument(start_session(state, principal, req), span.clone()).await;
    if let Ok(s) = &result {
        span.record("session", tracing::field::display(&s.id));
    }
    result
}

async fn start_session(
    state: &Core,
    principal: &Principal,
    req: StartSessionRequest,
) -> Result<Arc<Session>, CoreError> {
    if state.shutdown.is_cancelled() {
        return Err(CoreError::ShuttingDown);
    }
    // A start is in flight on the device like a call: a drain waits for it.
    let _in_flight = state.calls.token();
    let size_ok = |v: u32| (100..=7680).contains(&v);
    match (req.width, req.height) {
        (None, None) => {}
        (Some(w), Some(h)) if size_ok(w) && size_ok(h) => {}
        _ => {
            return Err(CoreError::invalid(
                "width and height go together, each 100..=7680",
            ));
        }
    }
    if let Some(wait) = req.wait_for_browser_ms {
        if wait > MAX_WAIT_FOR_BROWSER_MS {
            return Err(CoreError::invalid(format!(
                "wait_for_browser_ms must be at most {MAX_WAIT_FOR_BROWSER_MS}"
            )));
        }
        // The wait ends with the token, too. A named browser is waited for by name.
        tokio::select! {
            _ = state.registry.wait_online(
                &principal.tenant_id,
                req.browser_id.as_deref(),
                Duration::from_millis(wait),
            ) => {}
            end = principal.lease.ended() => return Err(CoreError::Token(end)),
        }
    }
    let device_id = choose_device(state, principal, req.browser_id.as_deref())?;
    let link = state
        .registry
        .link(&device_id)
        .ok_or(CoreError::BrowserNotOnline)?;
    let epoch = state.sessions.policy_epoch();
    let policy = admitted_by_policy(state, principal, &device_id).await?;
    let session = Session::new(
        secret::random_hex(16),
        &principal.tenant_id,
        &device_id,
        Opener {
            token_id: principal.token_id.clone(),
            root_token_id: principal.quota_id().to_string(),
            actor: principal.actor(),
            lease: principal.lease.clone(),
        },
        state.clock.now_ms(),
        policy,
    );
    let busy = session.begin(SESSION_START, state.clock.now_ms())?;
    let limits = &state.config.limits;
    state
        .sessions
        .try_insert(
            session.clone(),
            limits.max_sessions_per_device,
            limits.max_sessions_per_token,
        )
        .map_err(|cap| {
            crate::telemetry::metrics::refused("session_cap");
            CoreError::SessionCap(cap)
        })?;
    // A policy written since it was read may not have seen this session: read
    // it again (sessions::table::SessionTable, `policy_epoch`).
    if state.sessions.policy_epoch() != epoch {
        match admitted_by_policy(state, principal, &device_id).await {
            Ok(policy) => session.set_policy(policy),
            Err(e) => {
                state.sessions.remove(&session.id);
                session.end();
                return Err(e);
            }
        }
    }
    // From here on the session ends with its token, whatever else happens, and
    // its end is audited.
    let (started, started_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(watch_session(state.clone(), session.clone(), started_rx));
    let mut params = Map::new();
    params.insert("session_id".into(), Value::String(session.id.clone()));
    if let (Some(w), Some(h)) = (req.width, req.height) {
        params.insert("width".into(), json!(w));
        params.insert("height".into(), json!(h));
    }
    if let Some(f) = req.focused {
        params.insert("focused".into(), json!(f));
    }
    let deadline = Duration::from_millis(state.config.limits.session_start_timeout_ms);
    // Run detached from the caller: if the agent goes away mid-start, the start still
    // settles (and an orphaned session is reaped when idle) instead of leaking a window.
    let task_session = session.clone();
    let outcome = tokio::spawn(async move {
        let session = task_session;
        let _busy = busy;
        let (rpc_id, mut rx, permit) = match send(link.as_ref(), SESSION_START, params) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        match tokio::time::timeout(deadline, &mut rx).await {
            Ok(Ok(Ok(result))) => {
                let result: Value = serde_json::from_str(result.get()).unwrap_or_default();
                session.set_agent_window(result.get("agent_window_id").and_then(Value::as_i64));
                tracing::info!(session = %session.id, device = %session.device_id, "session started");
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(CoreError::BrowserDisconnected),
            Err(_) => {
                // Cancel; if the window opens anyway within the grace, close it again.
                link.send_cancel(&rpc_id);
                let grace = Duration::from_millis(CANCEL_GRACE_MS);
                let late = tokio::time::timeout(grace, rx).await;
                drop(permit);
                if let Ok(Ok(Ok(_))) = late {
                    tracing::info!(session = %session.id, "late session start rolled back");
                    let mut stop_params = Map::new();
                    stop_params.insert("session_id".into(), Value::String(session.id.clone()));
                    let budget = Duration::from_millis(SESSION_STOP_TIMEOUT_MS);
                    if let Err(e) = forward(link, None, SESSION_STOP, stop_params, budget, None).await {
                        tracing::warn!(session = %session.id, code = %e.code(), "rollback of a late start failed");
                    }
                } else {
                    link.forget(&rpc_id);
                }
                Err(CoreError::Deadline {
                    what: "session start",
                    ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
                })
            }
        }
    })
    .await
    .unwrap_or(Err(CoreError::Internal("session start failed")));
    match outcome {
        // A token revoked during the start: its session is being ended with it.
        Ok(()) => match session.lease.ended_now() {
            Some(end) => Err(CoreError::Token(end)),
            None => {
                // The watcher records the start; dropped unsent, no start happened.
                let _ = started.send(());
                Ok(session)
            }
        },
        Err(e) => {
            state.sessions.remove(&session.id);
            session.end();
            Err(e)
        }
    }
}

/// Stop a session: refuse new calls, abort one in flight, then `tool.session_stop`.
/// When tabs could not be returned the session stays open so the stop can be retried.
pub async fn stop(
    state: &Core,
    session: &Arc<Session>,
    reason: &str,
) -> Result<StopSessionResult, CoreError> {
    let span = tracing::info_span!("session_stop", tenant = %session.tenant_id, session = %session.id, device = %session.device_id);
    tracing::Instrument::instrument(stop_session(state, session, reason), span).await
}

async fn stop_session(
    state: &Core,
    session: &Arc<Session>,
    reason: &str,
) -> Result<StopSessionResult, CoreError> {
    if !session.set_stopping(true) {
        return Err(CoreError::SessionNotFound);
    }
    session.abort(Abort::SessionEnding);
    // The aborted call holds the session for at most its cancel grace.
    let free = session.wait_idle(Duration::from_secs(5)).await;
    if !free {
        session.set_stopping(false);
        return Err(CoreError::CancelCleanupTimeout);
    }
    let Some(link) = state.registry.link(&session.device_id) else {
        state.sessions.remove(&session.id);
        end_session(session, "browser gone", Abort::SessionEnding);
        return Ok(StopSessionResult {
            stopped: true,
            returned_tab_ids: vec![],
            return_failures: vec![],
        });
    };
    let mut params = Map::new();
    params.insert("session_id".into(), Value::String(session.id.clone()));
    let budget = Duration::from_millis(SESSION_STOP_TIMEOUT_MS);
    let result = forward(link, None, SESSION_STOP, params, budget, None).await;
    match result {
        Ok(v) => {
            let v: Value = serde_json::from_str(v.get()).unwrap_or_default();
            let returned: Vec<i64> = v
                .get("returned_tab_ids")
                .and_then(|a| serde_json::from_value(a.clone()).ok())
                .unwrap_or_default();
            let failures: Vec<ReturnFailure> = v
                .get("return_failures")
                .and_then(|a| serde_json::from_value(a.clone()).ok())
                .unwrap_or_default();
            if failures.is_empty() {
                state.sessions.remove(&session.id);
                end_session(session, reason, Abort::SessionEnding);
                Ok(StopSessionResult {
                    stopped: true,
                    returned_tab_ids: returned,
                    return_failures: vec![],
                })
            } else {
                // docs/protocol.md, "Sessions": keep the session so the stop can be retried.
                session.set_stopping(false);
                Ok(StopSessionResult {
                    stopped: false,
                    returned_tab_ids: returned,
                    return_failures: failures,
                })
            }
        }
        Err(CoreError::Browser(e)) if e.code == ErrorCode::NotFound => {
            // The extension no longer knows it: it is gone either way.
            state.sessions.remove(&session.id);
            end_session(session, reason, Abort::SessionEnding);
            Ok(StopSessionResult {
                stopped: true,
                returned_tab_ids: vec![],
                return_failures: vec![],
            })
        }
        Err(e) => {
            session.set_stopping(false);
            Err(e)
        }
    }
}

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
                    let detail = format!("device:{}", session.device_id);
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
                end_now(&state, &session, TIME_LIMIT, Abort::SessionEnding);
            }
        }
    }
    if recorded_start && let Some(reason) = session.end_reason() {
        audit_session(&state, &session, action::SESSION_END, reason).await;
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
                target: format!("session:{}", session.id),
                outcome: "ok",
                detail: Some(detail),
            },
        )
        .await;
}

fn end_for_token(state: &Core, session: &Arc<Session>, end: TokenEnd) {
    tracing::info!(session = %session.id, tenant = %session.tenant_id, reason = end.reason(), "session ended with its token");
    end_now(state, session, end.reason(), Abort::Token(end));
}

/// End `session` at once for `reason`: nobody may use it from now on (gone from
/// the table, ended for its listeners, its call in flight answered as `why`
/// says); then, in the background, the browser closes its Agent Window and
/// gives borrowed tabs back.
pub(crate) fn end_now(state: &Core, session: &Arc<Session>, reason: &str, why: Abort) {
    session.set_stopping(true);
    state.sessions.remove(&session.id);
    end_session(session, reason, why);
    tokio::spawn(close_window(state.clone(), session.clone()));
}

async fn close_window(state: Core, session: Arc<Session>) {
    // The aborted call holds the session for at most its cancel grace.
    session
        .wait_idle(Duration::from_millis(CANCEL_GRACE_MS * 2))
        .await;
    let Some(link) = state.registry.link(&session.device_id) else {
        return;
    };
    let mut params = Map::new();
    params.insert("session_id".into(), Value::String(session.id.clone()));
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
            if let Err(e) = stop(&state, &session, "idle").await {
                tracing::debug!(session = %session.id, code = %e.code(), "idle stop failed");
            }
        }
    }
}
