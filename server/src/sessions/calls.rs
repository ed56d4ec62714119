//! One tool call, from admission to answer, with the cancellation rules of docs/protocol.md,
//! "Cancellation": a call is forwarded at once or refused (never queued); on the gateway's
//! deadline, an abort, or the caller going away, a `cancel` follows the request on the same
//! socket, and the session stays busy until the final answer or a 2 s grace.

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::additions::CLICK_CHECKED;
use latchkey_protocol::effect::{CANCEL_GRACE_MS, MAX_CALL_TIMEOUT_MS, MAX_WAIT_MS};
use latchkey_protocol::{RequestFrame, text};

use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, oneshot, watch};

use crate::auth::secret;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::devices::link::{Link, RawResult, Reply};
use crate::sessions::SessionTable;
use crate::sessions::call_audit;
use crate::sessions::table::{Abort, BusyGuard, Session};
use crate::telemetry::metrics as telemetry;

/// A call as an agent asked for it.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub method: String,
    pub params: Map<String, Value>,
    /// The caller's own deadline (top-level `timeout_ms`), if given.
    pub timeout_ms: Option<u64>,
    /// A narrower policy the caller carries (a delegation's, docs/delegation.md),
    /// checked besides the session's own.
    pub limit: Option<Arc<latchkey_protocol::policy::EffectivePolicy>>,
}

/// `params` as an object (absent → empty), or `invalid_params`.
pub fn params_object(params: Option<Value>) -> Result<Map<String, Value>, CoreError> {
    match params {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(CoreError::invalid("params must be an object")),
    }
}

/// The gateway's deadline for a call (docs/protocol.md, "Sessions").
pub fn deadline(call: &ToolCall) -> Result<Duration, CoreError> {
    let check = |ms: u64| {
        if (1..=MAX_CALL_TIMEOUT_MS).contains(&ms) {
            Ok(ms)
        } else {
            Err(CoreError::invalid_field(
                "timeout_ms",
                format!("timeout_ms must be 1..={MAX_CALL_TIMEOUT_MS}"),
            ))
        }
    };
    let from_params = match call.params.get("timeout_ms") {
        None => None,
        Some(v) => Some(check(v.as_u64().ok_or_else(|| {
            CoreError::invalid_field("timeout_ms", "timeout_ms must be a positive integer")
        })?)?),
    };
    let call_timeout = call.timeout_ms.map(check).transpose()?;
    let ms = latchkey_protocol::tools::deadline_ms(&call.method, call_timeout, from_params);
    Ok(Duration::from_millis(ms))
}

/// A forwarded request whose answer is still owed. Dropping it before the answer
/// (deadline, abort, caller gone) sends `cancel` and keeps the session busy until
/// the final answer or the grace ends, in the background.
struct InFlight {
    link: Arc<dyn Link>,
    rpc_id: String,
    reply: Option<oneshot::Receiver<Reply>>,
    hold: Option<(Option<BusyGuard>, OwnedSemaphorePermit)>,
}

impl InFlight {
    fn answered(mut self) {
        self.reply = None;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let (Some(reply), Some(hold)) = (self.reply.take(), self.hold.take()) else {
            return;
        };
        let link = self.link.clone();
        let rpc_id = std::mem::take(&mut self.rpc_id);
        // Inside a runtime by construction (calls are only made from async handlers).
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                link.send_cancel(&rpc_id);
                let grace = Duration::from_millis(CANCEL_GRACE_MS);
                if tokio::time::timeout(grace, reply).await.is_err() {
                    tracing::debug!(rpc = %rpc_id, "no final answer within the cancel grace");
                    link.forget(&rpc_id);
                }
                drop(hold);
            });
        }
    }
}

/// Take a call slot and queue one request; the id, the answer's receiver, and the
/// slot (held until the answer or the cancel grace).
pub fn send(
    link: &dyn Link,
    method: &str,
    params: Map<String, Value>,
) -> Result<(String, oneshot::Receiver<Reply>, OwnedSemaphorePermit), CoreError> {
    let permit = link.try_permit().ok_or(CoreError::CallsInFlight)?;
    let rpc_id = format!("tool-{}", secret::random_hex(8));
    let rx = link.forward(RequestFrame::new(
        rpc_id.clone(),
        method,
        Some(Value::Object(params)),
    ))?;
    Ok((rpc_id, rx, permit))
}

/// Forward `method` with `params` to the device and wait for the answer, the
/// deadline or an abort.
pub async fn forward(
    link: Arc<dyn Link>,
    busy: Option<BusyGuard>,
    method: &str,
    params: Map<String, Value>,
    deadline: Duration,
    mut abort: Option<watch::Receiver<Option<Abort>>>,
) -> Result<RawResult, CoreError> {
    let (rpc_id, rx, permit) = send(link.as_ref(), method, params)?;
    let mut inflight = InFlight {
        link,
        rpc_id,
        reply: Some(rx),
        hold: Some((busy, permit)),
    };
    let aborted = async {
        match abort.as_mut() {
            Some(rx) => match rx.wait_for(Option::is_some).await {
                Ok(why) => *why,
                Err(_) => Some(Abort::SessionEnding),
            },
            None => std::future::pending().await,
        }
    };
    enum Outcome {
        Answered(Result<Reply, oneshot::error::RecvError>),
        TimedOut,
        Aborted(Option<Abort>),
    }
    let outcome = match inflight.reply.as_mut() {
        // An answer that is already there wins over a deadline or abort that is too.
        Some(reply) => tokio::select! {
            biased;
            r = reply => Outcome::Answered(r),
            _ = tokio::time::sleep(deadline) => Outcome::TimedOut,
            why = aborted => Outcome::Aborted(why),
        },
        None => Outcome::Answered(Ok(Err(CoreError::Internal("no reply channel")))),
    };
    // An abort that races the connection's end: the end is the truer story (the
    // call's outcome is unknown because the browser went away), so report that.
    let outcome = match outcome {
        Outcome::Aborted(why) => match inflight.reply.as_mut().map(|r| r.try_recv()) {
            Some(Ok(reply)) => Outcome::Answered(Ok(reply)),
            _ if inflight.link.is_closed() => {
                Outcome::Answered(Ok(Err(inflight.link.close_reason())))
            }
            _ => Outcome::Aborted(why),
        },
        other => other,
    };
    // Only an answer ends the call here; every other outcome drops `inflight`, which
    // sends the cancel and holds the session for the grace in the background.
    match outcome {
        Outcome::Answered(r) => {
            inflight.answered();
            r.unwrap_or(Err(CoreError::BrowserDisconnected))
        }
        Outcome::TimedOut => Err(CoreError::Deadline {
            what: "tool RPC",
            ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        }),
        Outcome::Aborted(Some(Abort::UserInterrupt)) => Err(CoreError::UserInterrupted),
        Outcome::Aborted(Some(Abort::BrowserGone)) => Err(CoreError::BrowserDisconnected),
        Outcome::Aborted(Some(Abort::Token(end))) => Err(CoreError::Token(end)),
        Outcome::Aborted(Some(Abort::Ended(reason))) => Err(CoreError::SessionEnded(reason)),
        Outcome::Aborted(_) => Err(CoreError::Cancelled("the session is stopping")),
    }
}

/// `tool.wait_ms`, answered by the gateway itself (docs/protocol.md, "Tools"). Its
/// params were judged by the catalogue (`duration_ms` 0..=300000) before this runs.
async fn wait_ms(params: &Map<String, Value>, session: &Session) -> Result<RawResult, CoreError> {
    let ms = params
        .get("duration_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(MAX_WAIT_MS);
    let mut abort = session.abort_signal();
    abort.mark_unchanged();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(crate::devices::link::raw(&json!({ "waited_ms": ms }))),
        _ = abort.changed() => match *abort.borrow() {
            Some(Abort::Token(end)) => Err(CoreError::Token(end)),
            Some(Abort::Ended(reason)) => Err(CoreError::SessionEnded(reason)),
            _ => Err(CoreError::Cancelled("wait cancelled")),
        },
    }
}

/// Run one agent call on `session`, and count it.
pub async fn call(
    state: &Core,
    session: &Arc<Session>,
    call: ToolCall,
) -> Result<RawResult, CoreError> {
    let started = std::time::Instant::now();
    let method = call.method.clone();
    let span = tracing::info_span!(
        "call",
        method = telemetry::method_label(&method),
        session = %session.id,
        device = %session.device_id,
        tenant = %session.tenant_id,
        outcome = tracing::field::Empty,
    );
    // The host the call acts on, for its audit row: a page action's is its
    // tab's before the call (sessions::call_audit).
    let before = tabs(session).target(&method, &call.params);
    let result = if state.shutdown.is_cancelled() {
        Err(CoreError::ShuttingDown)
    } else {
        // Counted until answered, so a drain can wait for it.
        let _in_flight = state.calls.token();
        tracing::Instrument::instrument(run_call(state, session, call), span.clone()).await
    };
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => {
            match e {
                CoreError::CallsInFlight | CoreError::OutboxFull => {
                    telemetry::refused("capacity_reached")
                }
                CoreError::UserInterrupted => telemetry::refused("user_aborted"),
                CoreError::SessionBusy => telemetry::refused("session_busy"),
                _ => {}
            }
            e.code().as_str()
        }
    };
    span.record("outcome", outcome);
    let tenant = state
        .config
        .metrics_tenant_label
        .then_some(session.tenant_id.as_str());
    let took = started.elapsed();
    telemetry::call_finished(&method, outcome, took, tenant);
    // Every call is in the team's trail, in the order its session made them;
    // queued, not committed, before the agent is answered.
    let help = result
        .as_ref()
        .ok()
        .and_then(|answer| call_audit::help_outcome(&method, answer.get()));
    let host = match &result {
        Ok(answer) => {
            let mut tabs = tabs(session);
            tabs.learn(&method, answer.get());
            let moved = matches!(
                method.as_str(),
                "tool.navigate_back" | "tool.navigate_forward" | "tool.reload"
            );
            if moved {
                tabs.target(&method, &Map::new())
            } else {
                before
            }
        }
        Err(_) => before,
    };
    state
        .audit
        .queue(call_audit::row(
            session,
            &method,
            host.as_deref(),
            outcome,
            call_audit::Notes {
                reason: result.as_ref().err().and_then(call_audit::reason_of),
                help,
            },
            took,
        ))
        .await;
    result
}

fn tabs(session: &Session) -> std::sync::MutexGuard<'_, call_audit::TabHosts> {
    session.tabs.lock().unwrap_or_else(|e| e.into_inner())
}

/// A method name an agent sent is at most [`text::MAX_METHOD_CHARS`] long: it is
/// matched, counted and echoed in answers (docs/security.md). Every agent surface
/// checks it before anything else.
pub fn check_method(method: &str) -> Result<(), CoreError> {
    if method.len() > text::MAX_METHOD_CHARS && method.chars().count() > text::MAX_METHOD_CHARS {
        return Err(CoreError::UnknownMethod(format!(
            "method names are at most {} characters",
            text::MAX_METHOD_CHARS
        )));
    }
    Ok(())
}

async fn run_call(
    state: &Core,
    session: &Arc<Session>,
    call: ToolCall,
) -> Result<RawResult, CoreError> {
    check_method(&call.method)?;
    if !call.method.starts_with("tool.") {
        return Err(CoreError::invalid(format!(
            "{} is not a tool method",
            call.method
        )));
    }
    if call.method == latchkey_protocol::effect::SESSION_START
        || call.method == latchkey_protocol::effect::SESSION_STOP
    {
        return Err(CoreError::invalid(
            "start and stop sessions through the session API",
        ));
    }
    let deadline = deadline(&call)?;
    // What the protocol defines is judged here, before the session is taken or
    // anything reaches the browser (docs/protocol.md, "Tools").
    latchkey_protocol::tools::validate(&call.method, &call.params)
        .map_err(|e| CoreError::invalid_field(&e.field, e.message))?;
    // The session's policy, in memory: no store read on the call path.
    let checked = crate::policy::check_call(&session.policy(), &call.method, &call.params)
        .and_then(|()| match &call.limit {
            Some(limit) => crate::policy::check_call(limit, &call.method, &call.params),
            None => Ok(()),
        });
    if let Err(denial) = checked {
        telemetry::refused("policy");
        crate::policy::audit_denial(
            state,
            &session.tenant_id,
            session.actor.clone(),
            crate::audit::session_ref(&session.id),
            &denial,
        )
        .await;
        return Err(CoreError::Policy(denial));
    }
    if latchkey_protocol::tools::tool_named(&call.method).is_some_and(|t| t.gateway_local) {
        return wait_ms(&call.params, session).await;
    }
    let busy = session.begin(&call.method, state.clock.now_ms())?;
    let link = state
        .link(&session.tenant_id, &session.device_id)
        .ok_or(CoreError::BrowserDisconnected)?;
    // A contract-only extension would ignore the param and toggle the box
    // (docs/protocol.md, "Latchkey's additions").
    if call.params.contains_key(CLICK_CHECKED) && !link.features().set_checked {
        return Err(CoreError::invalid_field(
            CLICK_CHECKED,
            "this browser's extension cannot set a checkbox to a state (it does not list \
             set_checked): click without it, reading the state from a snapshot",
        ));
    }
    // While the person has the page, the lists say so: redrawn as the request
    // begins and again once it has ended (dropped after the call's busy guard).
    let _redraw = (call.method == "tool.request_help").then(|| Redraw::now(&state.sessions));
    if call.method == "tool.request_help" {
        // The person is asked now: the trail (and whoever follows it) hears of
        // it at once, not when they have answered.
        let host = tabs(session).target(&call.method, &call.params);
        state
            .audit
            .queue(call_audit::help_requested(session, host.as_deref()))
            .await;
    }
    let mut params = call.params;
    params.insert("session_id".into(), Value::String(session.id.clone()));
    let abort = session.abort_signal();
    forward(
        link,
        Some(busy),
        &call.method,
        params,
        deadline,
        Some(abort),
    )
    .await
}

/// Redraws the session lists when made and when dropped.
struct Redraw<'a>(&'a SessionTable);

impl<'a> Redraw<'a> {
    fn now(table: &'a SessionTable) -> Self {
        table.moved_on();
        Self(table)
    }
}

impl Drop for Redraw<'_> {
    fn drop(&mut self) {
        self.0.moved_on();
    }
}
