//! What one latchkeyd replica tells the others over NATS in cluster mode
//! (docs/cluster.md, "Notices").
//!
//! A notice says something happened that the sockets on *other* replicas must
//! act on at once: a device or token was revoked, or a device's socket moved to
//! the sender. Each one is one JSON object on the cluster's notice subject. A
//! notice only ever closes or ends something, never grants: whoever can publish
//! on the subject can disconnect browsers, not borrow one (docs/cluster.md,
//! "Securing NATS").
//!
//! Rolling upgrades mix versions: a replica ignores a notice kind it does not
//! know (`Unknown`) rather than failing, and fields are only ever added.

use serde::{Deserialize, Serialize};

use crate::EndReason;

pub mod relay;
pub mod session_route;

/// The largest notice a replica accepts; a longer payload is dropped unread. A
/// notice lists at most [`MAX_IDS`] ids, which fit well within it.
pub const MAX_NOTICE_BYTES: usize = 64 * 1024;

/// Ids in one notice; a longer list is sent as several notices.
pub const MAX_IDS: usize = 256;

/// One notice, as published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope {
    /// The sending replica's node id, for the receiver's logs.
    pub node: String,
    #[serde(flatten)]
    pub notice: Notice,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Notice {
    /// These devices of the team were revoked: close their sockets with 4001.
    DevicesRevoked {
        tenant_id: String,
        device_ids: Vec<String>,
    },
    /// Every device of the team was revoked: close all its sockets with 4001.
    TeamDevicesRevoked { tenant_id: String },
    /// These API tokens or delegations of the team were revoked: end what they
    /// hold (agent sockets close with 4006, sessions end `token_revoked`).
    TokensRevoked {
        tenant_id: String,
        token_ids: Vec<String>,
    },
    /// The device's socket is now on the sender, opened at `connected_at_ms`
    /// (Unix ms): a socket of it here opened earlier closes with 4003, and
    /// calls for the device from here go to the sender.
    DeviceConnected {
        tenant_id: String,
        device_id: String,
        connected_at_ms: i64,
        /// Latchkey's additions the extension listed in its handshake
        /// (docs/protocol.md, "Latchkey's additions"); absent from an older
        /// replica, read as none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        features: Vec<String>,
    },
    /// The device's socket on the sender, opened at `connected_at_ms`, ended:
    /// sessions opened through it from here end with `reason`.
    DeviceDisconnected {
        tenant_id: String,
        device_id: String,
        connected_at_ms: i64,
        #[schemars(with = "String")]
        reason: EndReason,
    },
    /// The sender has just (re)joined: tell it which devices you hold.
    Hello,
    /// The sender is up (sent every few seconds): the replicas a request to
    /// all of them waits for are those heard from lately (docs/cluster.md,
    /// "Who is in the cluster").
    Alive,
    /// The sender is leaving (its drain is over): wait for it no more.
    Leaving,
    /// A kind this replica does not know (from a newer one): ignored.
    #[serde(other)]
    Unknown,
}

impl Notice {
    /// `DevicesRevoked` notices for `ids`, at most [`MAX_IDS`] each.
    pub fn devices_revoked(tenant_id: &str, ids: &[String]) -> Vec<Notice> {
        ids.chunks(MAX_IDS)
            .map(|chunk| Notice::DevicesRevoked {
                tenant_id: tenant_id.to_string(),
                device_ids: chunk.to_vec(),
            })
            .collect()
    }

    /// `TokensRevoked` notices for `ids`, at most [`MAX_IDS`] each.
    pub fn tokens_revoked(tenant_id: &str, ids: &[String]) -> Vec<Notice> {
        ids.chunks(MAX_IDS)
            .map(|chunk| Notice::TokensRevoked {
                tenant_id: tenant_id.to_string(),
                token_ids: chunk.to_vec(),
            })
            .collect()
    }
}

/// `{"ok":<result>}` around `result`, JSON text copied once: the successful
/// answer of a relayed call and of a session request alike.
pub(crate) fn ok_text(result: &str) -> String {
    let mut s = String::with_capacity(result.len() + 8);
    s.push_str(r#"{"ok":"#);
    s.push_str(result);
    s.push('}');
    s
}

/// The JSON Schema of a notice (`protocol/schema/cluster-notice.json`).
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Envelope)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_one_flat_object_with_its_kind() {
        let e = Envelope {
            node: "a".into(),
            notice: Notice::DeviceConnected {
                tenant_id: "ten_1".into(),
                device_id: "dev_1".into(),
                connected_at_ms: 5,
                features: Vec::new(),
            },
        };
        let text = serde_json::to_string(&e).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"node":"a","kind":"device_connected","tenant_id":"ten_1","device_id":"dev_1","connected_at_ms":5}"#
        );
        assert_eq!(serde_json::from_str::<Envelope>(&text).ok(), Some(e));
    }

    #[test]
    fn a_kind_from_a_newer_replica_is_unknown_not_an_error() {
        let e: Envelope = serde_json::from_str(r#"{"node":"b","kind":"policy_changed","x":1}"#)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(e.notice, Notice::Unknown);
    }

    #[test]
    fn long_id_lists_are_split() {
        let ids: Vec<String> = (0..MAX_IDS * 2 + 1).map(|i| format!("dev_{i}")).collect();
        let notices = Notice::devices_revoked("t", &ids);
        assert_eq!(notices.len(), 3);
        let longest = notices
            .iter()
            .map(|n| serde_json::to_vec(n).map(|v| v.len()).unwrap_or(usize::MAX))
            .max()
            .unwrap_or(usize::MAX);
        assert!(longest < MAX_NOTICE_BYTES, "{longest}");
    }
}
