//! Judging the extension's first frame (docs/protocol.md, "Handshake"), apart from the socket
//! so the rules are testable on their own.

use latchkey_protocol::additions::{DeviceInfo, Features, GATEWAY_FEATURES};
use latchkey_protocol::handshake::{
    self, Compatibility, GATEWAY_MIN_COMPATIBLE_PROTOCOL, GATEWAY_PROTOCOL_VERSION,
    HandshakeParams, HandshakeResult, VersionTooOldData,
};
use latchkey_protocol::{ErrorBody, ErrorCode, Frame, methods};

/// Why a first frame is refused: an error to send first (if any), and the reason.
#[derive(Debug)]
pub struct Refused {
    /// `(request id, error)` to answer before closing with 1008.
    pub reply: Option<(String, ErrorBody)>,
    pub why: &'static str,
}

fn refuse(why: &'static str) -> Refused {
    Refused { reply: None, why }
}

/// Accept a first text frame as a compatible handshake, or say why not.
pub fn judge(text: &str) -> Result<(String, HandshakeParams), Refused> {
    let request = match Frame::parse(text) {
        Ok(Frame::Request(r)) => r,
        Ok(_) | Err(_) => return Err(refuse("first frame is not a request")),
    };
    if request.method != methods::SYSTEM_HANDSHAKE {
        let error = ErrorBody::new(
            ErrorCode::ProtocolError,
            "first frame must be system.handshake",
        );
        return Err(Refused {
            reply: Some((request.id, error)),
            why: "first frame not a handshake",
        });
    }
    // Unparseable params: closed without a reply (bsk behaviour).
    let params: HandshakeParams = match request.params.map(serde_json::from_value) {
        Some(Ok(p)) => p,
        _ => return Err(refuse("handshake params invalid")),
    };
    // Every field is bounded before anything is judged, stored or logged: a
    // 1 MiB SemVer pre-release is valid SemVer (docs/security.md).
    if let Err(too_long) = params.check_lengths() {
        let error = ErrorBody {
            code: ErrorCode::InvalidParams,
            message: format!(
                "{} must be at most {} characters",
                too_long.field, too_long.max_chars
            ),
            data: Some(serde_json::json!({
                "field": too_long.field,
                "max_chars": too_long.max_chars,
            })),
        };
        return Err(Refused {
            reply: Some((request.id, error)),
            why: "handshake field too long",
        });
    }
    if !handshake::is_semver(&params.version) {
        return Err(refuse("handshake version not SemVer"));
    }
    let verdict = handshake::check_compatibility(
        GATEWAY_PROTOCOL_VERSION,
        GATEWAY_MIN_COMPATIBLE_PROTOCOL,
        &params.protocol_version,
        params.min_compatible_protocol.as_deref(),
    );
    if let Compatibility::Reject { reason } = verdict {
        let data = VersionTooOldData {
            peer_protocol_version: params.protocol_version.clone(),
            peer_version: params.version.clone(),
            daemon_protocol_version: GATEWAY_PROTOCOL_VERSION.to_string(),
            daemon_version: env!("CARGO_PKG_VERSION").to_string(),
            min_compatible_protocol: GATEWAY_MIN_COMPATIBLE_PROTOCOL.to_string(),
        };
        let error = ErrorBody {
            code: ErrorCode::VersionTooOld,
            message: reason,
            data: serde_json::to_value(data).ok(),
        };
        return Err(Refused {
            reply: Some((request.id, error)),
            why: "version too old",
        });
    }
    Ok((request.id, params))
}

/// The gateway's answer to a compatible handshake.
pub fn result(features: Features, device_label: &str, team: Option<String>) -> serde_json::Value {
    let result = HandshakeResult {
        server: methods::HANDSHAKE_SERVER_NAME.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol_version: GATEWAY_PROTOCOL_VERSION.to_string(),
        min_compatible_peer: Some("0.0.0".to_string()),
        min_compatible_protocol: Some(GATEWAY_MIN_COMPATIBLE_PROTOCOL.to_string()),
        latchkey_features: Some(GATEWAY_FEATURES.iter().map(|f| f.to_string()).collect()),
        latchkey_device: features.agent_info.then(|| DeviceInfo {
            label: device_label.to_string(),
            team,
        }),
    };
    serde_json::to_value(result).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(params: serde_json::Value) -> String {
        serde_json::json!({"id": "hs-1", "method": "system.handshake", "params": params})
            .to_string()
    }

    fn good() -> serde_json::Value {
        serde_json::json!({"client": "browser-skill-extension", "version": "0.4.2", "protocol_version": "1.0",
            "instance_id": "a1b2c3d4", "browser": {"name": "chrome", "version": "1"}, "label": ""})
    }

    #[test]
    fn rules() {
        assert!(judge(&hs(good())).is_ok());
        let mut newer = good();
        newer["protocol_version"] = "1.3".into();
        assert!(judge(&hs(newer)).is_ok(), "skew within major 1 is accepted");
        let mut major2 = good();
        major2["protocol_version"] = "2.0".into();
        let r = judge(&hs(major2)).expect_err("major 2");
        assert_eq!(r.reply.map(|(_, e)| e.code), Some(ErrorCode::VersionTooOld));
        let mut not_semver = good();
        not_semver["version"] = "1.2".into();
        assert!(judge(&hs(not_semver)).expect_err("semver").reply.is_none());
        let other = serde_json::json!({"id": "x", "method": "tool.tab_list"}).to_string();
        assert_eq!(
            judge(&other).expect_err("other").reply.map(|(_, e)| e.code),
            Some(ErrorCode::ProtocolError)
        );
        assert!(judge("junk").expect_err("junk").reply.is_none());
        let mut huge = good();
        huge["version"] = format!("1.0.0-{}", "a".repeat(1 << 20)).into();
        let r = judge(&hs(huge)).expect_err("a 1 MiB version");
        let (_, e) = r.reply.expect("answered");
        assert_eq!(e.code, ErrorCode::InvalidParams);
        assert_eq!(e.data.expect("data")["field"], "version");
        assert!(
            judge(r#"{"event":"system.heartbeat"}"#)
                .expect_err("event")
                .reply
                .is_none()
        );
    }
}
