//! Session start and stop (docs/protocol.md, "Sessions").

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::ErrorCode;
use latchkey_protocol::agent::{ReturnFailure, StartSessionRequest, StopSessionResult};
use latchkey_protocol::effect::{
    CANCEL_GRACE_MS, SESSION_START, SESSION_STOP, SESSION_STOP_TIMEOUT_MS,
};
use serde_json::{Map, Value, json};

use latchkey_protocol::additions::CONSENT_TIMEOUT_MS;
use latchkey_protocol::text;

use crate::auth::principal::Principal;
use crate::auth::secret;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::sessions::admission::{self, admitted_by_policy, choose_device};
use crate::sessions::calls::{forward, send};
use crate::sessions::lifetime::watch_session;
use crate::sessions::table::{Abort, Opener, Session};
use latchkey_protocol::EndReason;

/// The longest an agent may wait for a browser to come online (docs/protocol.md, "Limits").
pub const MAX_WAIT_FOR_BROWSER_MS: u64 = 60_000;

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
            _ = state.wait_online(
                &principal.tenant_id,
                req.browser_id.as_deref(),
                Duration::from_millis(wait),
            ) => {}
            end = principal.lease.ended() => return Err(CoreError::Token(end)),
        }
    }
    let device_id = match choose_device(state, principal, req.browser_id.as_deref()) {
        Err(CoreError::NoBrowserConnected(_)) => {
            return Err(CoreError::NoBrowserConnected(
                admission::last_seen(state, principal).await,
            ));
        }
        chosen => chosen?,
    };
    let link = state
        .link(&principal.tenant_id, &device_id)
        .ok_or(CoreError::BrowserNotOnline)?;
    let purpose = admission::purpose(req.purpose.as_deref())?;
    let features = link.features();
    let epoch = state.sessions.policy_epoch();
    let mut admitted = admitted_by_policy(state, principal, &device_id, features).await?;
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
        admitted.policy.clone(),
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
        match admitted_by_policy(state, principal, &device_id, features).await {
            Ok(again) => {
                session.set_policy(again.policy.clone());
                admitted = again;
            }
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
    // The Agent Window does not take focus from the browser's person unless the
    // agent asks (the contract's default is true, so false is always sent).
    params.insert("focused".into(), json!(req.focused.unwrap_or(false)));
    let asks = admission::start_additions(
        &mut params,
        principal,
        features,
        &admitted,
        purpose.as_deref(),
    );
    if let Some(p) = &purpose {
        session.note_start(&format!("purpose:{p:?}"));
    }
    session.set_purpose(purpose.clone());
    // The person has the consent prompt's time to answer, then the browser its
    // usual time to open the window.
    let mut deadline = Duration::from_millis(state.config.limits.session_start_timeout_ms);
    if asks {
        // The person is about to be asked; whether they agreed is in
        // `session.start` (or `policy.deny consent_denied`). Queued before the
        // session shows as waiting for them, so the start goes out at once after.
        state
            .audit
            .queue(crate::audit::Event {
                tenant_id: &session.tenant_id,
                actor: session.actor.clone(),
                action: crate::audit::action::SESSION_CONSENT_REQUESTED,
                target: crate::audit::session_ref(&session.id),
                outcome: "ok",
                detail: Some(format!("device:{}", session.device_id)),
            })
            .await;
        session.set_consent_pending(true);
        deadline += Duration::from_millis(CONSENT_TIMEOUT_MS);
    }
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
        // A session ended during its start (its token revoked, a policy
        // written) stops waiting at once, like a start that timed out.
        let waited = tokio::select! {
            r = tokio::time::timeout(deadline, &mut rx) => r.ok(),
            _ = session.ended() => None,
        };
        match waited {
            Some(Ok(Ok(result))) => {
                let result: Value = serde_json::from_str(result.get()).unwrap_or_default();
                session.set_opened(result.get("agent_window_id").and_then(Value::as_i64));
                if asks {
                    let how = result.get("consent").and_then(Value::as_str).unwrap_or("given");
                    session.note_start(&format!("consent:{}", text::clean(how, 16)));
                }
                tracing::info!(session = %session.id, device = %session.device_id, "session started");
                Ok(())
            }
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(CoreError::BrowserDisconnected),
            None => {
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
                if session.is_ended() {
                    return Err(CoreError::Cancelled("the session ended during its start"));
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
                // In cluster mode, reachable by id from every replica.
                state.peers.host_session(state, &session).await;
                Ok(session)
            }
        },
        Err(e) => {
            state.sessions.remove(&session.id);
            session.end();
            // A start cut short by its token's end says so.
            let e = match (e, session.lease.ended_now()) {
                (CoreError::Cancelled(_), Some(end)) => CoreError::Token(end),
                (e, _) => e,
            };
            if let Some(denial) = admission::consent_refused(&e) {
                admission::refused(state, principal, &device_id, &denial).await;
            }
            Err(e)
        }
    }
}

/// Stop a session: refuse new calls, abort one in flight, then `tool.session_stop`.
/// When tabs could not be returned the session stays open so the stop can be retried.
pub async fn stop(
    state: &Core,
    session: &Arc<Session>,
    reason: EndReason,
) -> Result<StopSessionResult, CoreError> {
    let span = tracing::info_span!("session_stop", tenant = %session.tenant_id, session = %session.id, device = %session.device_id);
    tracing::Instrument::instrument(stop_session(state, session, reason), span).await
}

/// Stop `session` for the person whose browser it is: `member_id` must own the
/// session's browser, or the session answers as unknown (as anyone else's
/// does). It ends `user_stopped`, as the person's Stop in the browser does.
pub async fn stop_for_owner(
    state: &Core,
    session: &Arc<Session>,
    member_id: &str,
) -> Result<StopSessionResult, CoreError> {
    // A device's owner is set when it pairs and never changes: this read decides.
    let device = state
        .store
        .device(&session.tenant_id, &session.device_id)
        .await?;
    if device.and_then(|d| d.owner_id).as_deref() != Some(member_id) {
        return Err(CoreError::SessionNotFound);
    }
    stop(state, session, EndReason::UserStopped).await
}

async fn stop_session(
    state: &Core,
    session: &Arc<Session>,
    reason: EndReason,
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
    let Some(link) = state.link(&session.tenant_id, &session.device_id) else {
        state.sessions.finish(
            session,
            EndReason::BrowserDisconnected,
            Abort::SessionEnding,
        );
        return Ok(StopSessionResult {
            stopped: true,
            returned_tab_ids: vec![],
            return_failures: vec![],
        });
    };
    let params = crate::sessions::lifetime::stop_params(&link, &session.id, reason);
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
                state.sessions.finish(session, reason, Abort::SessionEnding);
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
            state.sessions.finish(session, reason, Abort::SessionEnding);
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
