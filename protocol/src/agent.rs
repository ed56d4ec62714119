//! Bodies of the agent HTTP API and agent socket (docs/agents.md, docs/cli.md).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

/// A browser (device) as an agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct BrowserView {
    pub id: String,
    pub label: String,
    pub online: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browser_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browser_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub last_seen_at: Option<String>,
    pub expires_at: String,
    /// Sessions open on this browser.
    pub sessions: u32,
}

/// `GET /v1/browsers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct BrowserList {
    pub browsers: Vec<BrowserView>,
}

/// `POST /v1/sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSessionRequest {
    /// Required when more than one browser is online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browser_id: Option<String>,
    /// Agent Window size, 100..=7680, both or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub height: Option<u32>,
    /// Bring the Agent Window to the front, taking focus from the browser's
    /// person (default false: it opens behind what they are doing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub focused: Option<bool>,
    /// Wait up to this long (≤ 60000 ms) for a browser to come online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub wait_for_browser_ms: Option<u64>,
    /// Why the agent wants the browser, shown to its person when they are asked
    /// (docs/policy.md, "Consent") and kept in the audit trail; at most 200
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub purpose: Option<String>,
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SessionView {
    pub id: String,
    pub browser_id: String,
    /// Who opened it, as the audit trail names them (`token:<name>`): what an
    /// admin listing the team's sessions needs to see.
    #[serde(default)]
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub agent_window_id: Option<i64>,
    pub created_at: String,
    pub last_activity_at: String,
    /// A call is in flight.
    pub busy: bool,
    /// Where the session is in its life.
    pub phase: SessionPhase,
    /// Why the agent wanted the browser, as it said when it started the
    /// session (cleaned, at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub purpose: Option<String>,
    /// The call in flight is `tool.request_help`: the page is handed to the
    /// browser's person, and the agent waits for them.
    #[serde(default)]
    pub asking_for_help: bool,
}

/// Where a session is in its life (docs/sessions.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionPhase {
    /// The browser is opening its Agent Window.
    Starting,
    /// The browser's person is being asked whether to let it start
    /// (docs/policy.md, "Consent").
    ConsentPending,
    /// Open for calls.
    Open,
    /// Being stopped.
    Stopping,
}

/// `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionView>,
}

/// A tab the extension could not give back when the session stopped.
#[derive(
    Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema, schemars::JsonSchema,
)]
pub struct ReturnFailure {
    pub tab_id: i64,
    pub code: String,
    pub message: String,
}

/// `DELETE /v1/sessions/{id}`. When `stopped` is false the session stays open (some
/// borrowed tabs could not be returned) and the stop may be retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct StopSessionResult {
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<i64>>", optional)]
    pub returned_tab_ids: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<ReturnFailure>>", optional)]
    pub return_failures: Vec<ReturnFailure>,
}

/// `POST /v1/sessions/{id}/calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// A `tool.*` method.
    pub method: String,
    /// An object; `session_id` is filled in by the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "Record<string, unknown>")]
    pub params: Option<Value>,
    /// The gateway's deadline for this call (1..=600000); `params.timeout_ms` is used
    /// when this is absent, then the method's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub timeout_ms: Option<u64>,
}

/// A successful call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct CallResult {
    #[ts(type = "unknown")]
    pub result: Value,
}

/// What happened to a session, on `GET /v1/sessions/{id}/events` and the agent socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent {
    /// The user closed the Agent Window; the session is gone.
    WindowClosed { session_id: String },
    /// The user pressed Stop; in-flight calls were aborted and the next mutating call
    /// will be refused with `user_aborted`.
    UserInterrupt { session_id: String },
    /// The session ended; `reason` says who or what ended it.
    SessionEnded {
        session_id: String,
        reason: crate::end_reason::EndReason,
    },
    /// The browser stopped a tab of the session on its way to a site the
    /// session's policy refuses, a navigation the gateway could not see (a
    /// redirect, a link, `window.open`): the tab now shows why
    /// (docs/policy.md, "Enforcement in the browser").
    SiteBlocked {
        session_id: String,
        tab_id: i64,
        host: String,
        reason: crate::policy::PolicyReason,
    },
}

impl SessionEvent {
    /// The event's name on the agent socket (an event frame's `event`). The first
    /// two are the extension's own event names, relayed as they came.
    pub const fn socket_name(&self) -> &'static str {
        match self {
            SessionEvent::WindowClosed { .. } => crate::methods::EVENT_WINDOW_CLOSED,
            SessionEvent::UserInterrupt { .. } => crate::methods::EVENT_USER_INTERRUPT,
            SessionEvent::SessionEnded { .. } => "session.ended",
            SessionEvent::SiteBlocked { .. } => "session.site_blocked",
        }
    }

    /// The event's name in a server-sent event stream (`event:`): the serde tag.
    pub const fn stream_name(&self) -> &'static str {
        match self {
            SessionEvent::WindowClosed { .. } => "window_closed",
            SessionEvent::UserInterrupt { .. } => "user_interrupt",
            SessionEvent::SessionEnded { .. } => "session_ended",
            SessionEvent::SiteBlocked { .. } => "site_blocked",
        }
    }

    pub fn session_id(&self) -> &str {
        match self {
            SessionEvent::WindowClosed { session_id }
            | SessionEvent::UserInterrupt { session_id }
            | SessionEvent::SessionEnded { session_id, .. }
            | SessionEvent::SiteBlocked { session_id, .. } => session_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_event_is_named_by_its_type_tag() {
        let id = || "s".to_string();
        for event in [
            SessionEvent::WindowClosed { session_id: id() },
            SessionEvent::UserInterrupt { session_id: id() },
            SessionEvent::SessionEnded {
                session_id: id(),
                reason: crate::end_reason::EndReason::Stopped,
            },
        ] {
            let json = serde_json::to_value(&event).expect("serialises");
            assert_eq!(json["type"], event.stream_name());
            assert!(event.socket_name().starts_with("session."));
        }
    }
}
