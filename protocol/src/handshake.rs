//! `system.handshake` (contract §3): params, result, and the symmetric protocol
//! version compatibility rule of §3.3.

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
}

/// `data` of the `version_too_old` error (§3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct VersionTooOldData {
    pub peer_protocol_version: String,
    pub peer_version: String,
    pub daemon_protocol_version: String,
    pub daemon_version: String,
    pub min_compatible_protocol: String,
}

/// A protocol version as compared by §3.3: (major, minor).
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

/// Run the §3.3 verdict from `mine`'s point of view.
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
    fn semver_rule() {
        assert!(is_semver("1.2.3"));
        assert!(is_semver("0.1.0-beta.1"));
        assert!(!is_semver("1.2"));
        assert!(!is_semver("v1.2.3"));
    }
}
