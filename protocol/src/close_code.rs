//! WebSocket close codes the gateway uses, with the reason each one stands for.
//!
//! The 4000–4999 range is reserved by RFC 6455 for applications; the extension reads
//! these to decide whether to reconnect (going away, replaced) or to ask the user to
//! pair again (revoked, expired, unauthorized).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A close code with its meaning. Serialised as the bare number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(into = "u16", try_from = "u16")]
#[ts(type = "number")]
pub enum CloseCode {
    /// 1000: the peer finished normally.
    Normal,
    /// 1001: the server is shutting down; reconnect with backoff.
    GoingAway,
    /// 1002: the peer broke the WebSocket protocol (RFC 6455: bad framing, reserved
    /// bits, unmasked client frames, oversized or fragmented control frames).
    ProtocolError,
    /// 1007: a text message that is not UTF-8.
    InvalidPayload,
    /// 1008: a protocol rule was broken (handshake timeout, bad first frame, incompatible version).
    PolicyViolation,
    /// 1009: a message exceeded the size cap.
    MessageTooBig,
    /// 1011: an unexpected server error.
    InternalError,
    /// 1012: this replica is restarting (cluster mode); reconnect, and the load
    /// balancer sends the socket to another replica.
    ServiceRestart,
    /// 1013: the node is at capacity; reconnect with backoff.
    TryAgainLater,
    /// 4001: an administrator revoked this device; pair again.
    Revoked,
    /// 4002: the device grant expired; pair again.
    Expired,
    /// 4003: a newer connection of the same device replaced this one; do not fight it.
    Replaced,
    /// 4004: the credential is no longer valid (for example the store cannot confirm it).
    Unauthorized,
    /// 4005: the device was silent for longer than the liveness window.
    IdleTimeout,
    /// 4006: the API token an agent socket runs on was revoked; do not reconnect
    /// with it.
    TokenRevoked,
    /// 4007: the API token an agent socket runs on expired; do not reconnect with it.
    TokenExpired,
}

impl CloseCode {
    /// Every code, for tables and tests.
    pub const ALL: [CloseCode; 16] = [
        CloseCode::Normal,
        CloseCode::GoingAway,
        CloseCode::ProtocolError,
        CloseCode::InvalidPayload,
        CloseCode::PolicyViolation,
        CloseCode::MessageTooBig,
        CloseCode::InternalError,
        CloseCode::ServiceRestart,
        CloseCode::TryAgainLater,
        CloseCode::Revoked,
        CloseCode::Expired,
        CloseCode::Replaced,
        CloseCode::Unauthorized,
        CloseCode::IdleTimeout,
        CloseCode::TokenRevoked,
        CloseCode::TokenExpired,
    ];

    /// The number on the wire.
    pub const fn code(self) -> u16 {
        match self {
            CloseCode::Normal => 1000,
            CloseCode::GoingAway => 1001,
            CloseCode::ProtocolError => 1002,
            CloseCode::InvalidPayload => 1007,
            CloseCode::PolicyViolation => 1008,
            CloseCode::MessageTooBig => 1009,
            CloseCode::InternalError => 1011,
            CloseCode::ServiceRestart => 1012,
            CloseCode::TryAgainLater => 1013,
            CloseCode::Revoked => 4001,
            CloseCode::Expired => 4002,
            CloseCode::Replaced => 4003,
            CloseCode::Unauthorized => 4004,
            CloseCode::IdleTimeout => 4005,
            CloseCode::TokenRevoked => 4006,
            CloseCode::TokenExpired => 4007,
        }
    }

    /// The close reason text sent with the code (short: the limit is 123 bytes).
    pub const fn reason(self) -> &'static str {
        match self {
            CloseCode::Normal => "normal closure",
            CloseCode::GoingAway => "server going away",
            CloseCode::ProtocolError => "websocket protocol error",
            CloseCode::InvalidPayload => "invalid utf-8 in a text message",
            CloseCode::PolicyViolation => "protocol violation",
            CloseCode::MessageTooBig => "message too big",
            CloseCode::InternalError => "internal error",
            CloseCode::ServiceRestart => "replica restarting, reconnect",
            CloseCode::TryAgainLater => "at capacity, try again later",
            CloseCode::Revoked => "device revoked",
            CloseCode::Expired => "device grant expired",
            CloseCode::Replaced => "replaced by a newer connection",
            CloseCode::Unauthorized => "credential no longer valid",
            CloseCode::IdleTimeout => "no sign of life",
            CloseCode::TokenRevoked => "api token revoked",
            CloseCode::TokenExpired => "api token expired",
        }
    }

    /// What the peer should do after this close: the one reconnect rule, which the
    /// extension reads from the generated `AFTER_CLOSE` table.
    pub const fn after_close(self) -> AfterClose {
        match self {
            CloseCode::Revoked | CloseCode::Expired => AfterClose::PairAgain,
            CloseCode::Replaced => AfterClose::Yield,
            CloseCode::TokenRevoked | CloseCode::TokenExpired => AfterClose::DropToken,
            // A protocol fault is a bug on one side; the backoff keeps a faulty
            // peer from hammering while a fixed build or a restart is awaited.
            // An unconfirmed credential (4004) is tried again: if the grant is
            // gone, the upgrade then refuses it with 401.
            CloseCode::Normal
            | CloseCode::GoingAway
            | CloseCode::ProtocolError
            | CloseCode::InvalidPayload
            | CloseCode::PolicyViolation
            | CloseCode::MessageTooBig
            | CloseCode::InternalError
            | CloseCode::ServiceRestart
            | CloseCode::TryAgainLater
            | CloseCode::Unauthorized
            | CloseCode::IdleTimeout => AfterClose::Reconnect,
        }
    }
}

/// What a peer does after the gateway closed its socket with a code
/// (docs/error-codes.md, "WebSocket close codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AfterClose {
    /// Reconnect with backoff (1, 2, 4 s, then capped at 5 s, with jitter).
    Reconnect,
    /// Stop and ask the person to pair again: the grant is revoked or expired.
    PairAgain,
    /// A newer connection of the same device took over: do not fight it.
    Yield,
    /// Agent sockets: the API token is dead; do not reconnect with it.
    DropToken,
}

impl AfterClose {
    /// The name in generated tables.
    pub const fn as_str(self) -> &'static str {
        match self {
            AfterClose::Reconnect => "reconnect",
            AfterClose::PairAgain => "pair_again",
            AfterClose::Yield => "yield",
            AfterClose::DropToken => "drop_token",
        }
    }
}

/// The close-code table of docs/error-codes.md, generated so it cannot drift.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| code | reason sent | after it, the peer should |\n| --- | --- | --- |\n");
    for code in CloseCode::ALL {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            code.code(),
            code.reason(),
            match code.after_close() {
                AfterClose::Reconnect => "reconnect with backoff",
                AfterClose::PairAgain => "stop; ask the person to pair again",
                AfterClose::Yield => "stop; a newer connection of this device took over",
                AfterClose::DropToken => "not reconnect with that token (agent sockets)",
            }
        ));
    }
    out
}

impl From<CloseCode> for u16 {
    fn from(value: CloseCode) -> Self {
        value.code()
    }
}

/// A number that is not one of the gateway's close codes.
#[derive(Debug, thiserror::Error)]
#[error("unknown close code {0}")]
pub struct UnknownCloseCode(pub u16);

impl TryFrom<u16> for CloseCode {
    type Error = UnknownCloseCode;

    fn try_from(value: u16) -> Result<Self, Self::Error> {
        CloseCode::ALL
            .into_iter()
            .find(|c| c.code() == value)
            .ok_or(UnknownCloseCode(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for code in CloseCode::ALL {
            assert!(seen.insert(code.code()), "duplicate {}", code.code());
            assert_eq!(CloseCode::try_from(code.code()).ok(), Some(code));
            assert!(code.reason().len() <= 123);
        }
        assert!(CloseCode::try_from(4999).is_err());
    }
}
