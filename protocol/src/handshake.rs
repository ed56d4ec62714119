//! `system.handshake` (docs/protocol.md, "Handshake"): params, result, and the
//! symmetric protocol version compatibility rule.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The protocol version this gateway implements and advertises.
pub const GATEWAY_PROTOCOL_VERSION: &str = "1.0";
/// The oldest peer protocol this gateway accepts; 1.0 and 1.3 extensions both connect.
pub const GATEWAY_MIN_COMPATIBLE_PROTOCOL: &str = "1.0";

/// The browser the extension runs in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct BrowserInfo {
    pub name: String,
    pub version: String,
}

/// Params of the extension's first request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct HandshakeParams {
    pub client: String,
    /// The extension's app version; must be valid SemVer.
    pub version: String,
    pub protocol_version: String,
    /// 8 lowercase hex; ignored in remote mode (the device id is the browser id).
    pub instance_id: String,
    pub browser: BrowserInfo,
    pub label: String,
    /// Deprecated; `"0.0.0"`, ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub min_compatible_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub min_compatible_protocol: Option<String>,
    /// 1.3+; ignored by the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub audit_enabled: Option<bool>,
    /// Latchkey's additions the extension supports (docs/protocol.md,
    /// "Latchkey's additions"); a contract-only extension sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub latchkey_features: Option<Vec<String>>,
}

/// A handshake field over its length limit: which one, and the limit in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldTooLong {
    pub field: &'static str,
    pub max_chars: usize,
}

impl HandshakeParams {
    /// Every string field within its documented limit (docs/security.md), or the
    /// first one that is not. A compatible extension sends a few dozen characters in
    /// each; the limits exist because every one of them is stored or logged.
    pub fn check_lengths(&self) -> Result<(), FieldTooLong> {
        use crate::text::{MAX_BROWSER_FIELD_CHARS, MAX_HANDSHAKE_FIELD_CHARS, MAX_LABEL_CHARS};
        let fields = [
            ("client", Some(&self.client), MAX_HANDSHAKE_FIELD_CHARS),
            ("version", Some(&self.version), MAX_HANDSHAKE_FIELD_CHARS),
            (
                "protocol_version",
                Some(&self.protocol_version),
                MAX_HANDSHAKE_FIELD_CHARS,
            ),
            (
                "instance_id",
                Some(&self.instance_id),
                MAX_HANDSHAKE_FIELD_CHARS,
            ),
            (
                "browser.name",
                Some(&self.browser.name),
                MAX_BROWSER_FIELD_CHARS,
            ),
            (
                "browser.version",
                Some(&self.browser.version),
                MAX_BROWSER_FIELD_CHARS,
            ),
            ("label", Some(&self.label), MAX_LABEL_CHARS),
            (
                "min_compatible_peer",
                self.min_compatible_peer.as_ref(),
                MAX_HANDSHAKE_FIELD_CHARS,
            ),
            (
                "min_compatible_protocol",
                self.min_compatible_protocol.as_ref(),
                MAX_HANDSHAKE_FIELD_CHARS,
            ),
        ];
        for (field, value, max_chars) in fields {
            // Bytes bound characters from above: most values never need counting.
            if let Some(v) = value
                && v.len() > max_chars
                && v.chars().count() > max_chars
            {
                return Err(FieldTooLong { field, max_chars });
            }
        }
        Ok(())
    }
}

/// Result of a compatible handshake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct HandshakeResult {
    pub server: String,
    pub version: String,
    pub protocol_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub min_compatible_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub min_compatible_protocol: Option<String>,
    /// What this gateway reads beyond the contract (docs/protocol.md,
    /// "Latchkey's additions"); a contract-only extension ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub latchkey_features: Option<Vec<String>>,
    /// How the team knows this browser (to an extension listing `agent_info`):
    /// its person sees the name the team's admin gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub latchkey_device: Option<crate::additions::DeviceInfo>,
}

/// `data` of the `version_too_old` error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct VersionTooOldData {
    pub peer_protocol_version: String,
    pub peer_version: String,
    pub daemon_protocol_version: String,
    pub daemon_version: String,
    pub min_compatible_protocol: String,
}

/// A protocol version as the compatibility rule compares it: (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProtocolVersion {
    pub major: u64,
    pub minor: u64,
}

/// Largest integer both sides can represent exactly (JavaScript's safe integer).
const MAX_SEGMENT: u64 = (1 << 53) - 1;

fn parse_segment(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Leading zeros are allowed; overlong digit strings overflow and are rejected.
    let n: u64 = s.parse().ok()?;
    (n <= MAX_SEGMENT).then_some(n)
}

impl ProtocolVersion {
    /// Major is the text before the first `.`; minor the second segment (missing or
    /// empty → 0); later segments are ignored.
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.split('.');
        let major = parse_segment(parts.next()?)?;
        let minor = match parts.next() {
            None | Some("") => 0,
            Some(m) => parse_segment(m)?,
        };
        Some(Self { major, minor })
    }
}

/// The outcome of the compatibility check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compatibility {
    /// Compatible; `skew` when the two version strings differ.
    Accept {
        skew: bool,
    },
    Reject {
        reason: String,
    },
}

/// Run the compatibility verdict from `mine`'s point of view.
pub fn check_compatibility(
    my_version: &str,
    my_floor: &str,
    peer_version: &str,
    peer_floor: Option<&str>,
) -> Compatibility {
    let reject = |reason: String| Compatibility::Reject { reason };
    let (Some(mine), Some(peer)) = (
        ProtocolVersion::parse(my_version),
        ProtocolVersion::parse(peer_version),
    ) else {
        return reject(format!(
            "protocol version {peer_version:?} is not comparable with {my_version:?}"
        ));
    };
    if mine.major != peer.major {
        return reject(format!(
            "protocol major {} is incompatible with {}",
            peer.major, mine.major
        ));
    }
    match ProtocolVersion::parse(my_floor) {
        Some(floor) if peer >= floor => {}
        _ => {
            return reject(format!(
                "protocol {peer_version} is below the minimum {my_floor}"
            ));
        }
    }
    if let Some(peer_floor) = peer_floor {
        match ProtocolVersion::parse(peer_floor) {
            Some(floor) if mine >= floor => {}
            _ => {
                return reject(format!(
                    "peer requires protocol {peer_floor}, this gateway speaks {my_version}"
                ));
            }
        }
    }
    Compatibility::Accept {
        skew: my_version != peer_version,
    }
}

/// Whether `version` is valid SemVer, as the handshake requires of both sides.
pub fn is_semver(version: &str) -> bool {
    semver::Version::parse(version).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_per_contract() {
        let v = |s| ProtocolVersion::parse(s).map(|v| (v.major, v.minor));
        assert_eq!(v("1.0"), Some((1, 0)));
        assert_eq!(v("1.3.9"), Some((1, 3)));
        assert_eq!(v("1"), Some((1, 0)));
        assert_eq!(v("1."), Some((1, 0)));
        assert_eq!(v("01.02"), Some((1, 2)));
        assert_eq!(v(""), None);
        assert_eq!(v("+1.0"), None);
        assert_eq!(v(" 1.0"), None);
        assert_eq!(v("1e2.0"), None);
        assert_eq!(v("1.x"), None);
        assert_eq!(v("9007199254740992.0"), None);
        assert_eq!(v("9007199254740991.0"), Some((9007199254740991, 0)));
    }

    #[test]
    fn verdicts() {
        use Compatibility::*;
        assert_eq!(
            check_compatibility("1.0", "1.0", "1.0", Some("1.0")),
            Accept { skew: false }
        );
        assert_eq!(
            check_compatibility("1.0", "1.0", "1.3", Some("1.0")),
            Accept { skew: true }
        );
        assert_eq!(
            check_compatibility("1.0", "1.0", "1.0", None),
            Accept { skew: false }
        );
        assert!(matches!(
            check_compatibility("1.0", "1.0", "2.0", None),
            Reject { .. }
        ));
        assert!(matches!(
            check_compatibility("1.0", "1.2", "1.1", None),
            Reject { .. }
        ));
        assert!(matches!(
            check_compatibility("1.0", "1.0", "1.3", Some("1.2")),
            Reject { .. }
        ));
        assert!(matches!(
            check_compatibility("1.0", "1.0", "1.3", Some("x")),
            Reject { .. }
        ));
        assert!(matches!(
            check_compatibility("1.0", "1.0", "one", None),
            Reject { .. }
        ));
    }

    #[test]
    fn lengths_are_bounded_per_field() {
        let mut p = HandshakeParams {
            client: "browser-skill-extension".into(),
            version: "0.4.2".into(),
            protocol_version: "1.0".into(),
            instance_id: "a1b2c3d4".into(),
            browser: BrowserInfo {
                name: "chrome".into(),
                version: "1".into(),
            },
            label: "é".repeat(100),
            min_compatible_peer: None,
            min_compatible_protocol: Some("1.0".into()),
            audit_enabled: None,
            latchkey_features: None,
        };
        assert_eq!(p.check_lengths(), Ok(()));
        p.version = format!("1.0.0-{}", "a".repeat(1 << 20));
        assert_eq!(
            p.check_lengths().map_err(|e| e.field),
            Err("version"),
            "a SemVer pre-release of 1 MiB"
        );
        p.version = "1.0.0".into();
        p.browser.name = "x".repeat(65);
        assert_eq!(p.check_lengths().map_err(|e| e.field), Err("browser.name"));
    }

    #[test]
    fn semver_rule() {
        assert!(is_semver("1.2.3"));
        assert!(is_semver("0.1.0-beta.1"));
        assert!(!is_semver("1.2"));
        assert!(!is_semver("v1.2.3"));
    }
}
