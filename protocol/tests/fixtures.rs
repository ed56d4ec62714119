//! Golden JSON fixtures: one file per frame kind and API body. Each must parse into its
//! Rust type, classify as the expected frame kind, and serialise back to the same JSON
//! value (modulo the unknown keys the protocol tells receivers to ignore).

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use latchkey_protocol::authorize::{AuthorizeErrorBody, AuthorizeGrant, AuthorizeRequest};
use latchkey_protocol::handshake::{HandshakeParams, HandshakeResult};
use latchkey_protocol::{Frame, api};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn without(mut v: Value, keys: &[&str]) -> Value {
    if let Value::Object(m) = &mut v {
        for k in keys {
            m.remove(*k);
        }
    }
    v
}

fn round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let v = fixture(name);
    let parsed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&parsed).expect("serialise");
    assert_eq!(back, v, "{name} does not round-trip");
    parsed
}

#[test]
fn frames_classify_and_round_trip() {
    let cases = [
        ("request_handshake.json", "request"),
        ("request_tool.json", "request"),
        ("request_cancel.json", "request"),
        ("success.json", "success"),
        ("success_null.json", "success"),
        ("error.json", "error"),
        ("error_version_too_old.json", "error"),
        ("event_heartbeat.json", "event"),
        ("event_window_closed.json", "event"),
    ];
    for (name, kind) in cases {
        let v = fixture(name);
        let frame = Frame::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = match &frame {
            Frame::Request(_) => "request",
            Frame::Success(_) => "success",
            Frame::Error(_) => "error",
            Frame::Event(_) => "event",
        };
        assert_eq!(got, kind, "{name}");
        let back: Value = serde_json::from_str(&frame.to_text()).expect("json");
        assert_eq!(back, v, "{name} does not round-trip");
    }
}

#[test]
fn unknown_keys_are_ignored_in_frames() {
    let v = fixture("event_with_unknown_keys.json");
    let frame = Frame::from_value(v.clone()).expect("parse");
    let back: Value = serde_json::from_str(&frame.to_text()).expect("json");
    assert_eq!(back, without(v, &["extra", "id"]));
}

#[test]
fn handshake_bodies_round_trip() {
    let params: HandshakeParams = round_trip("handshake_params.json");
    assert_eq!(params.protocol_version, "1.0");
    let _: HandshakeResult = round_trip("handshake_result.json");
    // A 1.3 extension sends extra keys; they are ignored.
    let v = fixture("handshake_params_1_3.json");
    let p: HandshakeParams = serde_json::from_value(v).expect("1.3 params parse");
    assert_eq!(p.audit_enabled, Some(true));
}

#[test]
fn authorize_bodies_round_trip() {
    let _: AuthorizeRequest = round_trip("authorize_pair.json");
    let _: AuthorizeRequest = round_trip("authorize_renew.json");
    let _: AuthorizeGrant = round_trip("authorize_grant.json");
    let _: AuthorizeErrorBody = round_trip("authorize_error.json");
}

#[test]
fn admin_bodies_round_trip() {
    let _: api::PairingCreated = round_trip("admin_pairing_created.json");
    let _: api::DeviceList = round_trip("admin_device_list.json");
    let _: api::TokenCreated = round_trip("admin_token_created.json");
    let _: api::AuditList = round_trip("admin_audit_list.json");
    let _: api::MemberList = round_trip("admin_member_list.json");
    let _: latchkey_protocol::error_code::ApiErrorBody = round_trip("api_error.json");
}
