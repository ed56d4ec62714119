//! A browser's events about one of its sessions (docs/protocol.md, "Events from
//! the extension", and Latchkey's additions): the person closed, stopped or
//! interrupted an Agent Window, or the extension stopped a tab on its way to a
//! site the session's policy refuses. Handled wherever the session lives:
//! called by the connection that read the event, and, in cluster mode, by the
//! replica the session lives on when the socket is on another one
//! (docs/cluster.md, "Calls across replicas").

use latchkey_protocol::additions::{self, MAX_REPORTED_HOST_CHARS, SiteBlocked};
use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::policy::PolicyReason;
use latchkey_protocol::{EndReason, methods, text};
use serde_json::Value;
use tracing::{debug, info};

use crate::audit::{self, Event, action};
use crate::core::Core;
use crate::sessions::table::{Abort, MAX_AUDITED_REPORTS, Report, Session};

/// Whether `event` is about one session (and names it in `session_id`).
pub fn is_session_event(event: &str) -> bool {
    matches!(
        event,
        methods::EVENT_WINDOW_CLOSED
            | methods::EVENT_USER_INTERRUPT
            | additions::EVENT_USER_STOP
            | additions::EVENT_SITE_BLOCKED
    )
}

/// Handle the tenant's device's `event` about a session of it on this node.
/// Returns false when no such session is here (another device's, or one on
/// another replica): nothing is done then.
pub fn on_event(
    core: &Core,
    tenant_id: &str,
    device_id: &str,
    event: &str,
    payload: &Value,
) -> bool {
    let Some(session_id) = payload.get("session_id").and_then(Value::as_str) else {
        return false;
    };
    let Some(session) = core
        .sessions
        .get_on_device(device_id, session_id)
        .filter(|s| s.tenant_id == tenant_id)
    else {
        return false;
    };
    match event {
        methods::EVENT_WINDOW_CLOSED => {
            // Already gone in the extension: drop it without `tool.session_stop`.
            session.emit(SessionEvent::WindowClosed {
                session_id: session.id.clone(),
            });
            let reason = EndReason::WindowClosed;
            core.sessions.finish(&session, reason, Abort::Ended(reason));
        }
        additions::EVENT_USER_STOP => {
            // The person's Stop: the extension takes no call in it any more and
            // is tearing it down (tabs given back, window closed); it is dropped
            // without `tool.session_stop`, and the agent hears why. A call the
            // extension refused meanwhile is answered `session_ended` here, as
            // this event comes before that refusal on the socket.
            let reason = EndReason::UserStopped;
            core.sessions.finish(&session, reason, Abort::Ended(reason));
        }
        methods::EVENT_USER_INTERRUPT => {
            session.abort(Abort::UserInterrupt);
            session.arm_marker();
            audit_interrupt(core, device_id, &session);
            session.emit(SessionEvent::UserInterrupt {
                session_id: session.id.clone(),
            });
        }
        additions::EVENT_SITE_BLOCKED => site_blocked(core, &session, payload),
        _ => return false,
    }
    info!(session = %session.id, event, "session event");
    true
}

/// The person interrupted `session` (Pause in our extension): one
/// `session.interrupt` row under the browser, written off the socket's path,
/// for the first [`MAX_AUDITED_REPORTS`] of a session.
fn audit_interrupt(core: &Core, device_id: &str, session: &Session) {
    if session.count_report(Report::Interrupt) >= MAX_AUDITED_REPORTS {
        debug!(session = %session.id, "interrupt beyond the audited bound");
        return;
    }
    core.audit.record_detached(Event {
        tenant_id: &session.tenant_id,
        actor: audit::device_ref(device_id),
        action: action::SESSION_INTERRUPT,
        target: crate::audit::session_ref(&session.id),
        outcome: "ok",
        detail: Some(format!(
            "interrupted by the person; agent {}",
            session.actor
        )),
    });
}

/// `latchkey.site_blocked`: relay to the agent and audit under the token that
/// opened the session; a malformed payload, or a reason that is not about
/// sites, is ignored.
fn site_blocked(core: &Core, session: &Session, payload: &Value) {
    let Ok(report) = serde_json::from_value::<SiteBlocked>(payload.clone()) else {
        debug!("malformed site_blocked event ignored");
        return;
    };
    if !matches!(
        report.reason,
        PolicyReason::SiteBlocked | PolicyReason::SiteNotAllowed | PolicyReason::SchemeNotAllowed
    ) {
        return;
    }
    // Bounded and cleaned before it is shown or stored (docs/security.md).
    let host = text::clean(&report.host, MAX_REPORTED_HOST_CHARS);
    let pattern = report
        .pattern
        .as_deref()
        .map(|p| text::clean(p, MAX_REPORTED_HOST_CHARS));
    session.emit(SessionEvent::SiteBlocked {
        session_id: session.id.clone(),
        tab_id: report.tab_id,
        host: host.clone(),
        reason: report.reason,
    });
    crate::telemetry::metrics::refused("policy_browser");
    if session.count_report(Report::SiteBlock) >= MAX_AUDITED_REPORTS {
        debug!(session = %session.id, "site_blocked beyond the audited bound");
        return;
    }
    let mut detail = format!(
        "browser stopped tab {} at {} ({}",
        report.tab_id,
        host,
        report.reason.as_str()
    );
    if let Some(p) = pattern {
        detail.push_str(&format!(" pattern:{p}"));
    }
    detail.push(')');
    core.audit.record_detached(Event {
        tenant_id: &session.tenant_id,
        actor: session.actor.clone(),
        action: action::POLICY_DENY,
        target: crate::audit::session_ref(&session.id),
        outcome: "denied",
        detail: Some(detail),
    });
}
