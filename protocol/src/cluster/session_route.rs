//! Requests for a session that lives on another replica (docs/cluster.md,
//! "Sessions by id on any replica").
//!
//! A session lives on the replica its agent reached when it started it. That
//! replica answers for it on the session's own subject,
//! `<subject>.session.<session id>`, from its start until its end, and
//! publishes the session's events on `<subject>.session.<session id>.events`.
//! Any other replica that receives a request naming the session sends it there:
//! a request nobody answers ("no responders") is for a session that is nowhere,
//! which the agent hears as `not_found` at once, never after a timeout.
//!
//! The replica that received the request has checked the agent's token; the
//! session's replica checks that the session is the team's and, for an agent,
//! the token's, so a foreign id answers exactly like an unknown one.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::ErrorBody;
use crate::policy::EffectivePolicy;

/// Hex digits in a session id: the gateway mints 16 random bytes.
pub const SESSION_ID_HEX: usize = 32;

/// Whether `id` has a session id's shape. Only such an id is put into a
/// subject: anything else (a `.`, `*` or `>` would change what it matches) is
/// unknown without asking anyone.
pub fn is_session_id(id: &str) -> bool {
    id.len() == SESSION_ID_HEX && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The subject the session's replica answers requests for it on.
pub fn session_subject(base: &str, session_id: &str) -> String {
    format!("{base}.session.{session_id}")
}

/// The subject the session's replica publishes its events on.
pub fn events_subject(base: &str, session_id: &str) -> String {
    format!("{base}.session.{session_id}.events")
}

/// Who asks: the team, and the token whose session it must be (`None`: a
/// team admin, who may act on any of the team's sessions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asker {
    pub tenant_id: String,
    /// The token the session must have been opened by (for a one-session
    /// delegation, its delegator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_token_id: Option<String>,
}

/// One request for a session on the replica it lives on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRequest {
    pub asker: Asker,
    /// The asking replica's id for this request, which a [`SessionOp::Cancel`]
    /// names.
    pub request_id: String,
    #[serde(flatten)]
    pub op: SessionOp,
}

/// What is asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SessionOp {
    /// A tool call, as the agent asked for it.
    Call {
        method: String,
        #[serde(default)]
        params: Map<String, Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// A delegation's narrower policy, checked besides the session's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<Box<EffectivePolicy>>,
    },
    /// Stop the session (an agent's stop, or an admin's when the asker names
    /// no token).
    Stop,
    /// Stop the session for the person whose browser it is (a member ending it
    /// from the console), asked with no token: answered as for an unknown
    /// session unless the session's browser is `member_id`'s; it ends
    /// `user_stopped`. A replica that predates this op drops the request as
    /// unreadable, so it is refused, never taken for an admin's stop.
    StopForOwner { member_id: String },
    /// May the asker follow the session's events? Answered `true`; the events
    /// themselves travel on [`events_subject`].
    Watch,
    /// The agent went away: abort the request `request_id` names (published,
    /// not requested).
    Cancel,
}

/// The answer: exactly one member is set.
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionReply<'a> {
    /// The result, as the surface would have answered it on that replica.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<&'a RawValue>,
    /// The error, as that replica's surface would have answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// Set with `error` when the request never reached the session (it was
    /// not open, or not the asker's, when the request came): nothing ran, so
    /// the asker may act as if it had looked first (an MCP caller's next
    /// session is opened in its place). Absent from older replicas' answers,
    /// which are then taken as served.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unserved: bool,
}

impl SessionReply<'_> {
    /// The JSON text of a successful answer with `result` (JSON text).
    pub fn ok_text(result: &str) -> String {
        super::ok_text(result)
    }

    /// The JSON text of an error answer.
    pub fn error_text(error: ErrorBody) -> String {
        Self::error_json(error, false)
    }

    /// The JSON text of an error answer for a request that never reached the
    /// session ([`SessionReply::unserved`]).
    pub fn unserved_text(error: ErrorBody) -> String {
        Self::error_json(error, true)
    }

    fn error_json(error: ErrorBody, unserved: bool) -> String {
        serde_json::to_string(&SessionReply {
            ok: None,
            error: Some(error),
            unserved,
        })
        .unwrap_or_else(|_| r#"{"error":{"code":"internal","message":"unencodable"}}"#.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unserved_refusal_says_so_and_an_older_answer_reads_as_served() {
        let body = || ErrorBody::new(crate::ErrorCode::NotFound, "gone");
        let text = SessionReply::unserved_text(body());
        let unserved: SessionReply = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(unserved.unserved);
        let served = SessionReply::error_text(body());
        assert!(!served.contains("unserved"), "{served}");
        let older: SessionReply =
            serde_json::from_str(r#"{"error":{"code":"not_found","message":"gone"}}"#)
                .unwrap_or_else(|e| panic!("{e}"));
        assert!(!older.unserved);
    }

    #[test]
    fn only_a_session_ids_shape_reaches_a_subject() {
        assert!(is_session_id("0123456789abcdef0123456789abcdef"));
        for bad in [
            "",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcd.>",
            "0123456789abcdef0123456789abcd*f",
        ] {
            assert!(!is_session_id(bad), "{bad:?}");
        }
        assert_eq!(session_subject("l.n", "ab"), "l.n.session.ab");
        assert_eq!(events_subject("l.n", "ab"), "l.n.session.ab.events");
    }

    #[test]
    fn requests_and_replies_read_back_as_sent() {
        let request = SessionRequest {
            asker: Asker {
                tenant_id: "tn_1".into(),
                owner_token_id: None,
            },
            request_id: "r1".into(),
            op: SessionOp::Call {
                method: "tool.snapshot".into(),
                params: Map::new(),
                timeout_ms: Some(5),
                limit: None,
            },
        };
        let text = serde_json::to_string(&request).unwrap_or_default();
        assert!(text.contains(r#""op":"call""#), "{text}");
        let back: SessionRequest =
            serde_json::from_str(&text).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(back, request);
        let ok = SessionReply::ok_text(r#"{"a":1}"#);
        let read: SessionReply = serde_json::from_str(&ok).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(read.ok.map(RawValue::get), Some(r#"{"a":1}"#));
        let err = SessionReply::error_text(ErrorBody::new(crate::ErrorCode::NotFound, "x"));
        let read: SessionReply = serde_json::from_str(&err).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(read.error.map(|e| e.code), Some(crate::ErrorCode::NotFound));
    }

    #[test]
    fn an_owners_stop_names_the_member_and_reads_back() {
        let op = SessionOp::StopForOwner {
            member_id: "mem_1".into(),
        };
        let text = serde_json::to_string(&op).unwrap_or_default();
        assert_eq!(text, r#"{"op":"stop_for_owner","member_id":"mem_1"}"#);
        let back: SessionOp = serde_json::from_str(&text).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(back, op);
        // Without its member it is no request at all, never a plain stop.
        assert!(serde_json::from_str::<SessionOp>(r#"{"op":"stop_for_owner"}"#).is_err());
    }
}
