//! The session core's errors: one variant per condition, each mapped once (here) to
//! the wire's code, message and `data` (docs/error-codes.md). The core (sessions,
//! calls, device links) returns these; only the surfaces turn them into bodies, so
//! a condition cannot get two codes and a surface cannot invent a third.

use latchkey_protocol::{EndReason, ErrorBody, ErrorCode};
use serde_json::json;

use crate::auth::token_watch::TokenEnd;
use crate::policy::PolicyDenial;

/// Why the core refused or failed a session start, a stop or a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CoreError {
    /// The session id is unknown, foreign, or already stopped.
    SessionNotFound,
    /// The session ended (now or shortly before): the reason reaches the agent
    /// whoever ended it.
    SessionEnded(EndReason),
    /// The session is being stopped; nothing new is taken.
    SessionStopping,
    /// Another call is in flight on the session (calls are never queued).
    SessionBusy,
    /// A stop's aborted call did not finish within the cancel grace.
    CancelCleanupTimeout,
    /// The gateway's deadline passed: `what` is "tool RPC" or "session start".
    Deadline { what: &'static str, ms: u64 },
    /// The person pressed Stop: the call in flight, or the next gated one, is refused.
    UserInterrupted,
    /// The agent cancelled, or the session stopped under the call.
    Cancelled(&'static str),
    /// The browser or the token is at its session quota.
    SessionCap(SessionCap),
    /// The named browser is not online in the caller's tenant.
    BrowserNotOnline,
    /// No browser of the tenant is online; the ones seen last, newest first (at
    /// most [`LAST_SEEN_NAMED`]), so the agent can say which to open.
    NoBrowserConnected(Vec<LastSeen>),
    /// More than one is online and none was named.
    MultipleBrowsersOnline(Vec<String>),
    /// The browser's connection ended with the call in flight: outcome unknown.
    BrowserDisconnected,
    /// The browser's grant was revoked with the call in flight.
    DeviceRevoked,
    /// The browser's grant expired with the call in flight.
    DeviceExpired,
    /// The browser already has its maximum of calls in flight.
    CallsInFlight,
    /// The browser's outbox is full (it is not reading).
    OutboxFull,
    /// A parameter the protocol defines is wrong; `field` names it when there is one.
    InvalidParams {
        field: Option<String>,
        message: String,
    },
    /// Not a method this surface accepts.
    UnknownMethod(String),
    /// The node is draining.
    ShuttingDown,
    /// The browser's socket is on another replica, which cannot be reached now
    /// (NATS is away): retry shortly (docs/cluster.md).
    ReplicaUnreachable,
    /// The store cannot answer now (down, or busy past its timeouts): retry
    /// shortly. Logged and counted where it was converted.
    StoreUnavailable,
    /// The API token the work ran on was revoked or expired meanwhile.
    Token(TokenEnd),
    /// A bug; the details are in the log.
    Internal(&'static str),
    /// The browser's own error answer, relayed as it came.
    Browser(ErrorBody),
    /// The answer of the replica a session lives on, relayed as it came
    /// (docs/cluster.md, "Sessions by id on any replica"): that replica mapped
    /// its own condition once, here it is passed on unchanged.
    Replica(ErrorBody),
    /// The session's replica refused a request before it reached the session
    /// (not open, or not the asker's): nothing ran. Answered as that replica's
    /// body, like [`CoreError::Replica`].
    Unserved(ErrorBody),
    /// A policy refused the start or the call (docs/policy.md).
    Policy(PolicyDenial),
}

/// How many of a tenant's browsers `no_browser_connected` names.
pub const LAST_SEEN_NAMED: usize = 5;

/// A browser of the tenant that is not online, as `no_browser_connected` names it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LastSeen {
    pub id: String,
    pub label: String,
    /// RFC 3339; absent for a browser never connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
}

/// Which session quota was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCap {
    /// The browser already has this many sessions open.
    PerDevice(usize),
    /// The token already has this many sessions open.
    PerToken(usize),
}

impl CoreError {
    /// `invalid_params` without a field.
    pub fn invalid(message: impl Into<String>) -> Self {
        CoreError::InvalidParams {
            field: None,
            message: message.into(),
        }
    }

    /// `invalid_params` naming the field, as every params refusal does.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        CoreError::InvalidParams {
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    /// The wire code, without building the body (metrics and matching).
    pub fn code(&self) -> ErrorCode {
        match self {
            CoreError::SessionNotFound | CoreError::BrowserNotOnline => ErrorCode::NotFound,
            CoreError::SessionEnded(_) => ErrorCode::SessionEnded,
            CoreError::SessionStopping
            | CoreError::SessionBusy
            | CoreError::CancelCleanupTimeout
            | CoreError::Deadline { .. } => ErrorCode::Timeout,
            CoreError::UserInterrupted => ErrorCode::UserAborted,
            CoreError::Cancelled(_) => ErrorCode::Cancelled,
            CoreError::SessionCap(SessionCap::PerDevice(_)) => ErrorCode::CapacityReached,
            CoreError::SessionCap(SessionCap::PerToken(_)) => ErrorCode::LimitReached,
            CoreError::NoBrowserConnected(_) => ErrorCode::NoBrowserConnected,
            CoreError::MultipleBrowsersOnline(_) => ErrorCode::MultipleBrowsersOnline,
            CoreError::BrowserDisconnected => ErrorCode::BrowserDisconnected,
            CoreError::DeviceRevoked => ErrorCode::DeviceRevoked,
            CoreError::DeviceExpired => ErrorCode::DeviceExpired,
            CoreError::CallsInFlight | CoreError::OutboxFull => ErrorCode::CapacityReached,
            CoreError::InvalidParams { .. } => ErrorCode::InvalidParams,
            CoreError::UnknownMethod(_) => ErrorCode::UnknownMethod,
            CoreError::ShuttingDown => ErrorCode::ServerShuttingDown,
            CoreError::ReplicaUnreachable => ErrorCode::GatewayUnavailable,
            CoreError::StoreUnavailable => ErrorCode::StoreUnavailable,
            CoreError::Token(TokenEnd::Revoked) => ErrorCode::TokenRevoked,
            CoreError::Token(TokenEnd::Expired) => ErrorCode::TokenExpired,
            CoreError::Internal(_) => ErrorCode::Internal,
            CoreError::Browser(body) | CoreError::Replica(body) | CoreError::Unserved(body) => {
                body.code
            }
            CoreError::Policy(_) => ErrorCode::PermissionDenied,
        }
    }

    /// The stable `data.reason` that tells apart conditions sharing a code, if any.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            CoreError::SessionStopping => Some("session_stopping"),
            CoreError::SessionBusy => Some("session_busy"),
            CoreError::CancelCleanupTimeout => Some("cancel_cleanup_timeout"),
            CoreError::Deadline { .. } => Some("deadline"),
            CoreError::SessionCap(SessionCap::PerDevice(_)) => Some("sessions_per_device"),
            CoreError::SessionCap(SessionCap::PerToken(_)) => Some("sessions_per_token"),
            CoreError::CallsInFlight => Some("calls_in_flight"),
            CoreError::OutboxFull => Some("outbox_full"),
            CoreError::Policy(denial) => Some(denial.reason.as_str()),
            _ => None,
        }
    }

    /// The wire body: the one place a core condition becomes code, message and data.
    pub fn into_body(self) -> ErrorBody {
        let code = self.code();
        let reason = self.reason();
        let (message, data): (String, Option<serde_json::Value>) = match self {
            CoreError::Browser(body) | CoreError::Replica(body) | CoreError::Unserved(body) => {
                return body;
            }
            CoreError::Token(end) => return end.error(),
            CoreError::SessionNotFound => {
                ("session not registered or already stopped".into(), None)
            }
            CoreError::SessionEnded(reason) => (
                format!("the session ended: {}", reason.describe()),
                Some(json!({ "reason": reason })),
            ),
            CoreError::SessionStopping => ("session is stopping".into(), None),
            CoreError::SessionBusy => ("session already has an unfinished command".into(), None),
            CoreError::CancelCleanupTimeout => ("the in-flight call did not finish".into(), None),
            CoreError::Deadline { what, ms } => (format!("{what} timed out after {ms} ms"), None),
            CoreError::UserInterrupted => ("tool dispatch interrupted by user".into(), None),
            CoreError::Cancelled(why) => (why.into(), None),
            CoreError::SessionCap(SessionCap::PerDevice(max)) => (
                format!("this browser already has {max} sessions open; retry later"),
                Some(json!({ "limit": max })),
            ),
            CoreError::SessionCap(SessionCap::PerToken(max)) => (
                format!("this token already has {max} sessions open; stop one first"),
                Some(json!({ "limit": max })),
            ),
            CoreError::BrowserNotOnline => ("no such browser online".into(), None),
            CoreError::NoBrowserConnected(seen) if seen.is_empty() => {
                ("no browser is online".into(), None)
            }
            CoreError::NoBrowserConnected(seen) => {
                let named: Vec<String> = seen
                    .iter()
                    .map(|b| match &b.last_seen_at {
                        Some(at) => format!("{} ({}, last seen {at})", b.label, b.id),
                        None => format!("{} ({}, never connected)", b.label, b.id),
                    })
                    .collect();
                (
                    format!(
                        "no browser is online; open one of these: {}",
                        named.join("; ")
                    ),
                    Some(json!({ "last_seen": seen })),
                )
            }
            CoreError::MultipleBrowsersOnline(ids) => (
                "more than one browser is online; pass browser_id".into(),
                Some(json!({ "browsers": ids })),
            ),
            CoreError::BrowserDisconnected => {
                ("owning browser is no longer connected".into(), None)
            }
            CoreError::DeviceRevoked => ("the browser's access was revoked".into(), None),
            CoreError::DeviceExpired => ("the browser's grant expired".into(), None),
            CoreError::CallsInFlight => (
                "the browser already has the maximum number of calls in flight; retry shortly"
                    .into(),
                None,
            ),
            CoreError::OutboxFull => ("the browser's outbox is full; retry shortly".into(), None),
            CoreError::InvalidParams { field, message } => {
                (message, field.map(|f| json!({ "field": f })))
            }
            CoreError::UnknownMethod(message) => (message, None),
            CoreError::ShuttingDown => (
                "the gateway is shutting down; retry on another node".into(),
                None,
            ),
            CoreError::ReplicaUnreachable => (
                "the gateway replica holding this browser cannot be reached; retry shortly".into(),
                None,
            ),
            CoreError::StoreUnavailable => ("the store is unavailable; retry shortly".into(), None),
            CoreError::Internal(what) => (what.into(), None),
            CoreError::Policy(denial) => (denial.message, Some(denial.data.into())),
        };
        let data = match (data, reason) {
            (Some(serde_json::Value::Object(mut map)), Some(reason)) => {
                map.insert("reason".into(), reason.into());
                Some(serde_json::Value::Object(map))
            }
            (None, Some(reason)) => Some(json!({ "reason": reason })),
            (data, _) => data,
        };
        ErrorBody {
            code,
            message,
            data,
        }
    }
}

impl From<crate::store::StoreError> for CoreError {
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match e.noted() {
            StoreError::Unavailable(_) | StoreError::Contended(_) => CoreError::StoreUnavailable,
            StoreError::Conflict(_) => CoreError::Internal("a store write conflicted"),
            StoreError::Internal(_) => CoreError::Internal("internal error"),
        }
    }
}

impl From<CoreError> for ErrorBody {
    fn from(e: CoreError) -> Self {
        e.into_body()
    }
}

impl std::fmt::Display for CoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = self.clone().into_body();
        write!(f, "{}: {}", body.code, body.message)
    }
}

impl std::error::Error for CoreError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_that_share_a_code_have_distinct_reasons() {
        let timeouts = [
            CoreError::SessionStopping,
            CoreError::SessionBusy,
            CoreError::CancelCleanupTimeout,
            CoreError::Deadline {
                what: "tool RPC",
                ms: 5,
            },
        ];
        let reasons: std::collections::HashSet<_> = timeouts
            .iter()
            .map(|e| e.reason().expect("reason"))
            .collect();
        assert_eq!(reasons.len(), timeouts.len());
        for e in timeouts {
            let body = e.into_body();
            assert_eq!(body.code, ErrorCode::Timeout);
            assert!(body.data.and_then(|d| d.get("reason").cloned()).is_some());
        }
        let body = CoreError::SessionCap(SessionCap::PerToken(3)).into_body();
        assert_eq!(body.code, ErrorCode::LimitReached);
        assert_eq!(
            body.data,
            Some(json!({"limit": 3, "reason": "sessions_per_token"}))
        );
        let body = CoreError::invalid_field("tab_id", "must be an integer").into_body();
        assert_eq!(body.data, Some(json!({"field": "tab_id"})));
    }

    #[test]
    fn every_reason_is_documented_with_its_code() {
        let doc = include_str!("../../docs/error-codes.md");
        let all = [
            CoreError::SessionStopping,
            CoreError::SessionBusy,
            CoreError::CancelCleanupTimeout,
            CoreError::Deadline { what: "x", ms: 1 },
            CoreError::CallsInFlight,
            CoreError::OutboxFull,
            CoreError::SessionCap(SessionCap::PerDevice(1)),
            CoreError::SessionCap(SessionCap::PerToken(1)),
        ];
        let denials = latchkey_protocol::policy::PolicyReason::ALL
            .map(|r| CoreError::Policy(PolicyDenial::new(r, "refused", &[])));
        for e in all.into_iter().chain(denials) {
            let row = format!("| `{}` | `{}` |", e.code(), e.reason().expect("reason"));
            assert!(doc.contains(&row), "docs/error-codes.md lacks {row}");
        }
    }

    #[test]
    fn a_browser_answer_is_relayed_as_it_came() {
        let answer = ErrorBody::new(ErrorCode::CdpFailed, "detached");
        assert_eq!(CoreError::Browser(answer.clone()).into_body(), answer);
        assert_eq!(CoreError::Browser(answer).code(), ErrorCode::CdpFailed);
    }
}
