//! Calls relayed between replicas (docs/cluster.md, "Calls across replicas").
//!
//! A session lives on the replica its agent reached; the device's socket may be
//! on another. That replica's device link is reached over NATS: a call is a
//! request on the holder's `call` subject and its answer the reply; a cancel
//! and the device's session events are plain messages on the holder's (or the
//! session's replica's) `cancel` and `event` subjects. Each replica listens on
//! `<subject>.node.<node id>.>` only.
//!
//! Unlike a notice, a relayed call drives a browser: only replicas may publish
//! on these subjects (docs/cluster.md, "Securing NATS").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{ErrorBody, RequestFrame};

/// The subject kind a call is requested on.
pub const CALL: &str = "call";
/// The subject kind a cancel is published on.
pub const CANCEL: &str = "cancel";
/// The subject kind a device's session event is published on.
pub const EVENT: &str = "event";

/// The subject of `kind` messages for the replica `node`.
pub fn node_subject(base: &str, node: &str, kind: &str) -> String {
    format!("{base}.node.{node}.{kind}")
}

/// The wildcard a replica listens on for everything addressed to it.
pub fn node_wildcard(base: &str, node: &str) -> String {
    format!("{base}.node.{node}.>")
}

/// A node id as a NATS subject token: letters, digits, `-` and `_` only (a
/// `.`, `*` or `>` would change what the subject matches).
pub fn subject_token(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A request for the device's socket on the replica that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayCall {
    pub tenant_id: String,
    pub device_id: String,
    /// The socket the caller means (it was told of it by `device_connected`):
    /// a newer socket of the device, which knows none of the caller's
    /// sessions, answers `browser_disconnected` instead.
    pub connected_at_ms: i64,
    /// The calling replica, where the device's events for a session it starts
    /// are sent.
    pub origin: String,
    pub request: RequestFrame,
}

/// Ask the device to abort a relayed request (docs/protocol.md, "Cancellation").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayCancel {
    pub tenant_id: String,
    pub device_id: String,
    pub rpc_id: String,
}

/// A device's event about a session that lives on the receiving replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayEvent {
    pub tenant_id: String,
    pub device_id: String,
    pub event: String,
    #[serde(default)]
    pub payload: Value,
}

/// Why the holding replica answered for the device: the conditions a local
/// call fails with, so a relayed call fails with the same code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayFailure {
    /// No such socket there (any more), or it ended during the call.
    BrowserDisconnected,
    DeviceRevoked,
    DeviceExpired,
    /// The holding replica is draining.
    ShuttingDown,
    /// The person pressed "Stop all agents".
    KillSwitch,
    /// The device's in-flight cap is reached.
    CallsInFlight,
    /// The device's outbox is full.
    OutboxFull,
    /// The answer is larger than NATS carries (its `max_payload`).
    AnswerTooLarge,
    /// The request did not parse.
    Malformed,
}

/// The reply to a [`RelayCall`]: exactly one member is set.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayAnswer<'a> {
    /// The device's result, as it sent it.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<&'a RawValue>,
    /// The device's error answer, as it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_error: Option<ErrorBody>,
    /// The holding replica's own answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<RelayFailure>,
}

impl RelayAnswer<'_> {
    /// The JSON text of a successful answer with `result` (JSON text, copied once).
    pub fn ok_text(result: &str) -> String {
        super::ok_text(result)
    }

    /// The JSON text of a failed answer.
    pub fn failed_text(failure: RelayFailure) -> String {
        serde_json::to_string(&RelayAnswer {
            ok: None,
            browser_error: None,
            failed: Some(failure),
        })
        .unwrap_or_else(|_| r#"{"failed":"browser_disconnected"}"#.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back_as_sent() {
        let ok = RelayAnswer::ok_text(r#"{"tabs":[1,"a\"b"]}"#);
        let read: RelayAnswer = serde_json::from_str(&ok).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(read.ok.map(RawValue::get), Some(r#"{"tabs":[1,"a\"b"]}"#));
        assert!(read.failed.is_none() && read.browser_error.is_none());
        let failed = RelayAnswer::failed_text(RelayFailure::CallsInFlight);
        assert_eq!(failed, r#"{"failed":"calls_in_flight"}"#);
        let read: RelayAnswer =
            serde_json::from_str(&failed).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(read.failed, Some(RelayFailure::CallsInFlight));
    }

    #[test]
    fn node_ids_cannot_widen_a_subject() {
        assert_eq!(subject_token("pod-1.a*b>c d_e"), "pod-1-a-b-c-d_e");
        assert_eq!(
            node_subject("latchkey.notices", "n1", CALL),
            "latchkey.notices.node.n1.call"
        );
    }
}
