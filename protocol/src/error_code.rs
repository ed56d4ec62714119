//! Stable error codes and the one table that maps each to an HTTP status, a WebSocket close code
//! and a CLI exit code.
//!
//! The first block is the extension protocol's closed set (docs/protocol.md, "Error codes and close
//! codes"); an extension emits only those. The second block is Latchkey's own and appears on the
//! HTTP APIs, the agent socket and the CLI. Codes never change meaning once shipped.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use crate::CloseCode;

/// A stable, machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    // The extension protocol's own (docs/protocol.md, "Error codes and close codes").
    UnknownMethod,
    Unsupported,
    InvalidParams,
    NotFound,
    PermissionDenied,
    Timeout,
    CdpFailed,
    ProtocolError,
    Cancelled,
    UserAborted,
    VersionTooOld,
    MultipleBrowsersOnline,
    NoBrowserConnected,
    // Latchkey's own.
    /// A request body or header that does not parse or breaks a rule.
    InvalidRequest,
    /// No credential, or one that is unknown, expired, used or revoked.
    Unauthorized,
    /// The device was revoked while a call was in flight.
    DeviceRevoked,
    /// The device grant expired while a call was in flight.
    DeviceExpired,
    /// Too many requests from this peer or token; see `Retry-After`.
    RateLimited,
    /// A capacity limit (connections, in-flight calls) is reached; see `Retry-After`.
    CapacityReached,
    /// A per-tenant quota is reached (for example unused pairing links).
    LimitReached,
    /// The store did not answer in time; retry shortly.
    StoreUnavailable,
    /// The server is draining for shutdown.
    ServerShuttingDown,
    /// In cluster mode: the replica holding the browser cannot be reached now
    /// (NATS is away); retry shortly, see `Retry-After`.
    GatewayUnavailable,
    /// Single sign-on to the console: the team's OpenID provider could not be
    /// reached, or its answer did not verify (docs/console.md, "Single sign-on").
    IdentityProviderFailed,
    /// The browser's connection ended (disconnect or replacement) while a call was
    /// in flight; the call's outcome is unknown and it is never replayed.
    BrowserDisconnected,
    /// The API token this socket, stream, session or call runs on was revoked while
    /// it was in use; everything it held was ended.
    TokenRevoked,
    /// The API token this socket, stream, session or call runs on reached its expiry
    /// while it was in use; everything it held was ended at that instant.
    TokenExpired,
    /// The session ended before or during this call; `data.reason` says who or
    /// what ended it (an [`crate::EndReason`], docs/sessions.md).
    SessionEnded,
    /// A bug or an unexpected failure; details are in the server log.
    Internal,
}

/// Where an error code lands on each surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorMapping {
    pub code: ErrorCode,
    /// HTTP status on the REST APIs.
    pub http_status: u16,
    /// The close code when this error ends a WebSocket, if it does.
    pub close_code: Option<CloseCode>,
    /// The `latchkey` CLI's exit code.
    pub exit_code: u8,
}

/// CLI exit codes, named so that scripts and docs agree.
pub mod exit {
    pub const OK: u8 = 0;
    /// Something unexpected: a bug, or an error with no better class.
    pub const FAILURE: u8 = 1;
    /// Bad command-line usage (clap's own code).
    pub const USAGE: u8 = 2;
    /// Missing, wrong, expired or revoked credential, or not allowed.
    pub const AUTH: u8 = 3;
    /// The thing named does not exist (or belongs to another tenant).
    pub const NOT_FOUND: u8 = 4;
    /// The request was refused as malformed.
    pub const INVALID: u8 = 5;
    /// A deadline passed.
    pub const TIMEOUT: u8 = 6;
    /// Try again later: rate limit, capacity, store or server unavailable.
    pub const UNAVAILABLE: u8 = 7;
    /// A state conflict: busy, cancelled, aborted, a quota.
    pub const CONFLICT: u8 = 8;
    /// The browser side failed the call.
    pub const BROWSER: u8 = 9;
    /// The server could not be reached at all.
    pub const CONNECTION: u8 = 10;
}

macro_rules! error_table {
    ($( $code:ident => $http:literal, $close:expr, $exit:expr; )*) => {
        /// The one table. Every code appears exactly once (checked by a test).
        pub const ERROR_TABLE: &[ErrorMapping] = &[
            $( ErrorMapping { code: ErrorCode::$code, http_status: $http, close_code: $close, exit_code: $exit }, )*
        ];
    };
}

error_table! {
    UnknownMethod          => 400, None, exit::INVALID;
    Unsupported            => 501, None, exit::BROWSER;
    InvalidParams          => 400, None, exit::INVALID;
    NotFound               => 404, None, exit::NOT_FOUND;
    PermissionDenied       => 403, None, exit::AUTH;
    Timeout                => 504, None, exit::TIMEOUT;
    CdpFailed              => 502, None, exit::BROWSER;
    ProtocolError          => 502, Some(CloseCode::PolicyViolation), exit::BROWSER;
    Cancelled              => 409, None, exit::CONFLICT;
    UserAborted            => 409, None, exit::CONFLICT;
    VersionTooOld          => 426, Some(CloseCode::PolicyViolation), exit::INVALID;
    MultipleBrowsersOnline => 409, None, exit::CONFLICT;
    NoBrowserConnected     => 409, None, exit::CONFLICT;
    InvalidRequest         => 400, None, exit::INVALID;
    Unauthorized           => 401, Some(CloseCode::Unauthorized), exit::AUTH;
    DeviceRevoked          => 410, Some(CloseCode::Revoked), exit::AUTH;
    DeviceExpired          => 410, Some(CloseCode::Expired), exit::AUTH;
    RateLimited            => 429, None, exit::UNAVAILABLE;
    CapacityReached        => 503, None, exit::UNAVAILABLE;
    LimitReached           => 409, None, exit::CONFLICT;
    StoreUnavailable       => 503, None, exit::UNAVAILABLE;
    ServerShuttingDown     => 503, Some(CloseCode::GoingAway), exit::UNAVAILABLE;
    GatewayUnavailable     => 503, None, exit::UNAVAILABLE;
    IdentityProviderFailed => 502, None, exit::UNAVAILABLE;
    BrowserDisconnected    => 502, None, exit::BROWSER;
    TokenRevoked           => 401, Some(CloseCode::TokenRevoked), exit::AUTH;
    TokenExpired           => 401, Some(CloseCode::TokenExpired), exit::AUTH;
    SessionEnded           => 410, None, exit::NOT_FOUND;
    Internal               => 500, Some(CloseCode::InternalError), exit::FAILURE;
}

impl ErrorCode {
    /// This code's row of [`ERROR_TABLE`].
    pub fn mapping(self) -> ErrorMapping {
        ERROR_TABLE
            .iter()
            .copied()
            .find(|m| m.code == self)
            // The table test proves every code has a row; this default is unreachable.
            .unwrap_or(ErrorMapping {
                code: self,
                http_status: 500,
                close_code: None,
                exit_code: exit::FAILURE,
            })
    }

    pub fn http_status(self) -> u16 {
        self.mapping().http_status
    }

    pub fn exit_code(self) -> u8 {
        self.mapping().exit_code
    }

    /// The snake_case string on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::NotFound => "not_found",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Timeout => "timeout",
            ErrorCode::CdpFailed => "cdp_failed",
            ErrorCode::ProtocolError => "protocol_error",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::UserAborted => "user_aborted",
            ErrorCode::VersionTooOld => "version_too_old",
            ErrorCode::MultipleBrowsersOnline => "multiple_browsers_online",
            ErrorCode::NoBrowserConnected => "no_browser_connected",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::DeviceRevoked => "device_revoked",
            ErrorCode::DeviceExpired => "device_expired",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::CapacityReached => "capacity_reached",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::ServerShuttingDown => "server_shutting_down",
            ErrorCode::GatewayUnavailable => "gateway_unavailable",
            ErrorCode::IdentityProviderFailed => "identity_provider_failed",
            ErrorCode::BrowserDisconnected => "browser_disconnected",
            ErrorCode::TokenRevoked => "token_revoked",
            ErrorCode::TokenExpired => "token_expired",
            ErrorCode::SessionEnded => "session_ended",
            ErrorCode::Internal => "internal",
        }
    }
}

/// Codes the `latchkey` CLI reports for failures that never reached a gateway, so
/// no gateway sends them. Listed here, beside the gateway's, so every code a script
/// can see comes from this one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CliCode {
    /// The server could not be reached, or answered something unreadable.
    ConnectionFailed,
    /// Local configuration: no URL or token, an unreadable profile file.
    Config,
    /// An id given by a prefix that more than one id starts with.
    AmbiguousId,
    /// An audit export that does not verify: a row changed, missing or added, a
    /// checkpoint that does not hold, or a line that is not an export's.
    AuditBroken,
}

impl CliCode {
    pub const ALL: [CliCode; 4] = [
        CliCode::ConnectionFailed,
        CliCode::Config,
        CliCode::AmbiguousId,
        CliCode::AuditBroken,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            CliCode::ConnectionFailed => "connection_failed",
            CliCode::Config => "config",
            CliCode::AmbiguousId => "ambiguous_id",
            CliCode::AuditBroken => "audit_broken",
        }
    }

    pub const fn exit_code(self) -> u8 {
        match self {
            CliCode::ConnectionFailed => exit::CONNECTION,
            CliCode::Config | CliCode::AmbiguousId => exit::USAGE,
            CliCode::AuditBroken => exit::FAILURE,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` member of an error response frame, and of every API error body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Extra detail; docs/protocol.md, "Error codes and close codes" requires an object when
    /// present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional, type = "Record<string, unknown>")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// With `data: {"reason": reason}`, the protocol's stable reason field.
    pub fn with_reason(code: ErrorCode, message: impl Into<String>, reason: &str) -> Self {
        Self {
            code,
            message: message.into(),
            data: Some(serde_json::json!({ "reason": reason })),
        }
    }
}

/// Body of every non-2xx answer on the admin and agent APIs: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct ApiErrorBody {
    pub error: ErrorBody,
}

/// The code table as Markdown, for `docs/error-codes.md` (kept current by a test).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| code | HTTP status | WebSocket close | CLI exit |\n| --- | --- | --- | --- |\n",
    );
    for m in ERROR_TABLE {
        let close = m
            .close_code
            .map(|c| format!("{} ({})", c.code(), c.reason()))
            .unwrap_or_else(|| "-".to_string());
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            m.code.as_str(),
            m.http_status,
            close,
            m.exit_code
        ));
    }
    for code in CliCode::ALL {
        out.push_str(&format!(
            "| `{}` (CLI only) | - | - | {} |\n",
            code.as_str(),
            code.exit_code()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_exactly_one_row_and_a_stable_string() {
        let all: Vec<ErrorCode> = ERROR_TABLE.iter().map(|m| m.code).collect();
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(all.len(), unique.len(), "a code appears twice");
        assert_eq!(all.len(), 29, "a new code needs a row");
        for m in ERROR_TABLE {
            let json = serde_json::to_string(&m.code).expect("serialise");
            assert_eq!(json, format!("\"{}\"", m.code.as_str()));
            let back: ErrorCode = serde_json::from_str(&json).expect("parse");
            assert_eq!(back, m.code);
            assert!((400..=599).contains(&m.http_status));
        }
    }

    #[test]
    fn unknown_codes_do_not_parse() {
        assert!(serde_json::from_str::<ErrorCode>("\"made_up\"").is_err());
    }
}
