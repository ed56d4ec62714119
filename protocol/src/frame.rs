//! The frame envelope of docs/protocol.md, "Frames": one JSON object per text message, classified
//! as a request, a response (success or error) or an event.
//!
//! Parsing follows the gateway's classification order (docs/protocol.md, "Frames"): `event` first,
//! then `method`, then a response with exactly one of `result` and `error`. Unknown keys are
//! ignored at every level. Serialisation emits exactly one of `method`, `event`, `result` or
//! `error`, so either side's classifier reads the frame the same way.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::ErrorBody;

/// A request: either side may send one; the receiver answers exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct RequestFrame {
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "Record<string, unknown>")]
    pub params: Option<Value>,
}

/// A successful response; `result` may be any JSON, including `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SuccessFrame {
    pub id: String,
    #[ts(type = "unknown")]
    pub result: Value,
}

/// An error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ErrorFrame {
    pub id: String,
    pub error: ErrorBody,
}

/// An event: no id, never answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct EventFrame {
    pub event: String,
    /// `{}` when absent on the wire.
    #[serde(default = "empty_object")]
    #[ts(type = "Record<string, unknown>")]
    pub payload: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Any frame of the extension protocol.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(untagged)]
pub enum Frame {
    Request(RequestFrame),
    Success(SuccessFrame),
    Error(ErrorFrame),
    Event(EventFrame),
}

/// Why a text message is not a frame. The gateway drops such messages.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("not JSON")]
    NotJson,
    #[error("not a JSON object")]
    NotObject,
    #[error("`{0}` has the wrong type")]
    WrongType(&'static str),
    #[error("a request or response needs a string `id`")]
    MissingId,
    #[error("a response needs exactly one of `result` and `error`")]
    AmbiguousResponse,
    #[error("the error object does not parse: {0}")]
    BadError(String),
}

impl FrameError {
    /// A stable short code for logs and counters.
    pub fn code(&self) -> &'static str {
        match self {
            FrameError::NotJson => "not_json",
            FrameError::NotObject => "not_object",
            FrameError::WrongType(_) => "wrong_type",
            FrameError::MissingId => "missing_id",
            FrameError::AmbiguousResponse => "ambiguous_response",
            FrameError::BadError(_) => "bad_error",
        }
    }
}

impl Frame {
    /// Parse and classify one text message, in the gateway's order.
    pub fn parse(text: &str) -> Result<Frame, FrameError> {
        let value: Value = serde_json::from_str(text).map_err(|_| FrameError::NotJson)?;
        Frame::from_value(value)
    }

    /// Classify an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Frame, FrameError> {
        let Value::Object(mut map) = value else {
            return Err(FrameError::NotObject);
        };
        if let Some(event) = map.remove("event") {
            let Value::String(event) = event else {
                return Err(FrameError::WrongType("event"));
            };
            let payload = match map.remove("payload") {
                None | Some(Value::Null) => empty_object(),
                Some(p) => p,
            };
            return Ok(Frame::Event(EventFrame { event, payload }));
        }
        let id = match map.remove("id") {
            Some(Value::String(id)) => Some(id),
            Some(_) => return Err(FrameError::WrongType("id")),
            None => None,
        };
        if let Some(method) = map.remove("method") {
            let Value::String(method) = method else {
                return Err(FrameError::WrongType("method"));
            };
            let id = id.ok_or(FrameError::MissingId)?;
            let params = map.remove("params");
            return Ok(Frame::Request(RequestFrame { id, method, params }));
        }
        let id = id.ok_or(FrameError::MissingId)?;
        match (map.remove("result"), map.remove("error")) {
            (Some(result), None) => Ok(Frame::Success(SuccessFrame { id, result })),
            (None, Some(error)) => {
                let error: ErrorBody = serde_json::from_value(error)
                    .map_err(|e| FrameError::BadError(e.to_string()))?;
                Ok(Frame::Error(ErrorFrame { id, error }))
            }
            _ => Err(FrameError::AmbiguousResponse),
        }
    }

    /// The fast path for a success answer: `(id, result)` with the result left as
    /// raw JSON text, so a large result is relayed without being rebuilt. `None` for
    /// anything else (events, requests, errors, a `null` result, duplicate keys):
    /// those go through [`Frame::parse`], whose classification this never contradicts.
    /// The result borrows from `text`: validated, never copied.
    pub fn parse_success_raw(text: &str) -> Option<(String, &RawValue)> {
        /// Whether a key was present at all (even as `null`).
        #[derive(Default)]
        struct Present(bool);
        impl<'de> Deserialize<'de> for Present {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                serde::de::IgnoredAny::deserialize(d)?;
                Ok(Present(true))
            }
        }
        #[derive(Deserialize)]
        struct Probe<'a> {
            id: Option<String>,
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            #[serde(default)]
            error: Present,
            #[serde(default)]
            method: Present,
            #[serde(default)]
            event: Present,
        }
        // A struct also deserialises from a JSON array (fields by position); a frame
        // is an object, so anything else is left to the full parse (found by fuzzing:
        // `["",1]` was taken for a result).
        if !text.trim_start().starts_with('{') {
            return None;
        }
        match serde_json::from_str::<Probe>(text).ok()? {
            Probe {
                id: Some(id),
                result: Some(result),
                error: Present(false),
                method: Present(false),
                event: Present(false),
            } => Some((id, result)),
            _ => None,
        }
    }

    /// Serialise to the text of one WebSocket message.
    pub fn to_text(&self) -> String {
        // Serialising these types cannot fail: every map key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The id of a request or response; events have none.
    pub fn id(&self) -> Option<&str> {
        match self {
            Frame::Request(r) => Some(&r.id),
            Frame::Success(r) => Some(&r.id),
            Frame::Error(r) => Some(&r.id),
            Frame::Event(_) => None,
        }
    }
}

impl RequestFrame {
    pub fn new(id: impl Into<String>, method: impl Into<String>, params: Option<Value>) -> Self {
        Self {
            id: id.into(),
            method: method.into(),
            params,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn classification_follows_gateway_order() {
        // `event` wins over everything else.
        let f = Frame::parse(r#"{"event":"system.heartbeat","method":"x","id":"1"}"#);
        assert!(matches!(f, Ok(Frame::Event(_))));
        // `method` wins over result/error.
        let f = Frame::parse(r#"{"id":"1","method":"m","result":1}"#);
        assert!(matches!(f, Ok(Frame::Request(_))));
        assert_eq!(
            Frame::parse(r#"{"id":"1","result":1,"error":{"code":"timeout","message":""}}"#),
            Err(FrameError::AmbiguousResponse)
        );
        assert_eq!(
            Frame::parse(r#"{"id":"1"}"#),
            Err(FrameError::AmbiguousResponse)
        );
        assert_eq!(
            Frame::parse(r#"{"method":"m"}"#),
            Err(FrameError::MissingId)
        );
        assert_eq!(
            Frame::parse(r#"{"id":7,"method":"m"}"#),
            Err(FrameError::WrongType("id"))
        );
        assert_eq!(Frame::parse("[1]"), Err(FrameError::NotObject));
        assert_eq!(Frame::parse("nope"), Err(FrameError::NotJson));
    }

    #[test]
    fn result_may_be_null_and_payload_defaults() {
        let f = Frame::parse(r#"{"id":"a","result":null}"#).expect("parse");
        assert_eq!(
            f,
            Frame::Success(SuccessFrame {
                id: "a".into(),
                result: Value::Null
            })
        );
        let f = Frame::parse(r#"{"event":"system.heartbeat"}"#).expect("parse");
        assert_eq!(f.to_text(), r#"{"event":"system.heartbeat","payload":{}}"#);
    }

    #[test]
    fn unknown_error_codes_are_rejected() {
        let f = Frame::parse(r#"{"id":"a","error":{"code":"nope","message":"m"}}"#);
        assert!(matches!(f, Err(FrameError::BadError(_))));
        let f = Frame::parse(r#"{"id":"a","error":{"code":"timeout","message":"m","x":1}}"#);
        match f {
            Ok(Frame::Error(e)) => assert_eq!(e.error.code, ErrorCode::Timeout),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The raw fast path never disagrees with the full parse: where it answers, the
    /// frame is a success with the same id and an equal result.
    #[test]
    fn raw_success_path_agrees_with_parse() {
        let cases = [
            r#"{"id":"1","result":{"data":"x\"y","n":[1,2]}}"#,
            r#"{"id":"1","result":1,"extra":true}"#,
            r#"{"id":"1","result":null}"#,
            r#"{"id":"1","result":1,"error":null}"#,
            r#"{"id":"1","result":1,"method":"m"}"#,
            r#"{"id":"1","result":1,"event":"e"}"#,
            r#"{"id":1,"result":1}"#,
            r#"{"result":1}"#,
            r#"{"id":"1","result":1,"result":2}"#,
            r#"{"id":"1","error":{"code":"timeout","message":""}}"#,
            "not json",
            "[]",
            // Found by fuzzing: a struct also deserialises from an array.
            r#"["",1]"#,
            r#"  ["1",{"a":1},false,false,false]"#,
        ];
        for text in cases {
            if let Some((id, raw)) = Frame::parse_success_raw(text) {
                match Frame::parse(text) {
                    Ok(Frame::Success(s)) => {
                        assert_eq!(s.id, id, "{text}");
                        let raw: Value = serde_json::from_str(raw.get()).expect("raw is JSON");
                        assert_eq!(s.result, raw, "{text}");
                    }
                    other => panic!("fast path took {text}, parse says {other:?}"),
                }
            }
        }
        assert!(Frame::parse_success_raw(r#"{"id":"1","result":[1]}"#).is_some());
        assert!(Frame::parse_success_raw(r#"{"id":"1","result":1,"error":null}"#).is_none());
    }
}
