//! `POST /extension/authorize` bodies (docs/protocol.md, "Pairing and renewal"): pairing and
//! renewal.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// Length of a device token and of `next_token`: 256 bits, unpadded base64url.
pub const TOKEN_LEN: usize = 43;
/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 4096;
/// Longest stored label, in characters.
pub const MAX_LABEL_CHARS: usize = crate::text::MAX_LABEL_CHARS;

/// What the extension asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizeAction {
    /// Redeem a one-time pairing secret for a new device.
    Pair,
    /// Rotate the current device token.
    Renew,
}

/// The request body. Unknown keys are refused (as bsk does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthorizeRequest {
    pub action: AuthorizeAction,
    /// The credential that replaces the bearer: exactly 43 base64url characters.
    pub next_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub label: Option<String>,
}

/// The 200 answer: a device grant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct AuthorizeGrant {
    /// 32 lowercase hex; the same across renewals.
    pub device_id: String,
    /// RFC 3339.
    pub expires_at: String,
    /// RFC 3339, earlier than `expires_at`.
    pub renew_after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub service_name: Option<String>,
}

/// The tag in a non-200 answer, exactly as bsk spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizeErrorTag {
    InvalidAuthorization,
    InvalidRequest,
    /// A malformed WebSocket upgrade on `/extension` (400).
    InvalidUpgrade,
    NotFound,
    RateLimited,
    AuthorizationStoreBusy,
    ConnectionCapacityReached,
}

impl AuthorizeErrorTag {
    /// The tag as it is spelled on the wire (and in metric labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            AuthorizeErrorTag::InvalidAuthorization => "invalid_authorization",
            AuthorizeErrorTag::InvalidRequest => "invalid_request",
            AuthorizeErrorTag::InvalidUpgrade => "invalid_upgrade",
            AuthorizeErrorTag::NotFound => "not_found",
            AuthorizeErrorTag::RateLimited => "rate_limited",
            AuthorizeErrorTag::AuthorizationStoreBusy => "authorization_store_busy",
            AuthorizeErrorTag::ConnectionCapacityReached => "connection_capacity_reached",
        }
    }
}

/// A non-200 body: `{"error": <tag>}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct AuthorizeErrorBody {
    pub error: AuthorizeErrorTag,
}

/// Whether `s` is exactly 43 characters of `[A-Za-z0-9_-]`.
pub fn is_token_shaped(s: &str) -> bool {
    s.len() == TOKEN_LEN && is_base64url(s)
}

/// Whether every byte is in the unpadded base64url alphabet.
pub fn is_base64url(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `s` is a well-formed pairing secret (32–256 base64url characters).
pub fn is_pairing_secret_shaped(s: &str) -> bool {
    (32..=256).contains(&s.len()) && is_base64url(s)
}

/// Whether `s` is a device id: 32 lowercase hex.
pub fn is_device_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A label as stored: control and bidirectional formatting characters stripped, at
/// most 100 characters ([`crate::text::clean`]).
pub fn clean_label(label: &str) -> String {
    crate::text::clean(label, MAX_LABEL_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_spelled_as_serde_spells_them() {
        for tag in [
            AuthorizeErrorTag::InvalidAuthorization,
            AuthorizeErrorTag::InvalidRequest,
            AuthorizeErrorTag::InvalidUpgrade,
            AuthorizeErrorTag::NotFound,
            AuthorizeErrorTag::RateLimited,
            AuthorizeErrorTag::AuthorizationStoreBusy,
            AuthorizeErrorTag::ConnectionCapacityReached,
        ] {
            let json = serde_json::to_value(tag).expect("serialises");
            assert_eq!(json, tag.as_str());
        }
    }

    #[test]
    fn shapes() {
        assert!(is_token_shaped(&"a".repeat(43)));
        assert!(!is_token_shaped(&"a".repeat(42)));
        assert!(!is_token_shaped(&format!("{}=", "a".repeat(42))));
        assert!(is_pairing_secret_shaped(&"A-_9".repeat(8)));
        assert!(!is_pairing_secret_shaped(&"a".repeat(31)));
        assert!(!is_pairing_secret_shaped(&"a".repeat(257)));
        assert!(is_device_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_device_id("0123456789ABCDEF0123456789abcdef"));
    }

    #[test]
    fn labels_are_cleaned() {
        assert_eq!(clean_label("a\u{0}b\nc"), "abc");
        assert_eq!(clean_label("Chrome \u{202E}moc.evil"), "Chrome moc.evil");
        assert_eq!(clean_label(&"x".repeat(300)).len(), 100);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let body = format!(
            r#"{{"action":"pair","next_token":"{}","x":1}}"#,
            "a".repeat(43)
        );
        assert!(serde_json::from_str::<AuthorizeRequest>(&body).is_err());
    }
}
