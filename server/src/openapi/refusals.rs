//! The refusals an operation can answer, as OpenAPI responses built from the
//! protocol's one code table (docs/error-codes.md): an operation names the codes it
//! can refuse with, and each HTTP status it documents lists exactly those codes, so
//! the document and the table cannot disagree about a status.
//!
//! Each kind of caller has a base set (a bad or revoked token, the wrong role, a
//! spent budget, a store that did not answer); a marker type per operation family
//! adds what only that family can answer (an unknown id, a bad body, a quota).

use std::collections::BTreeMap;

use latchkey_protocol::ErrorCode;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};

/// Every request that presents a token can be refused with these.
pub(crate) const AUTHENTICATED: &[ErrorCode] = &[
    ErrorCode::Unauthorized,
    ErrorCode::PermissionDenied,
    ErrorCode::StoreUnavailable,
    ErrorCode::Internal,
];

/// The agent API charges every request to its token's and its team's budgets.
pub(crate) const AGENT: &[ErrorCode] = &[
    ErrorCode::Unauthorized,
    ErrorCode::PermissionDenied,
    ErrorCode::RateLimited,
    ErrorCode::StoreUnavailable,
    ErrorCode::Internal,
];

/// Codes whose answers carry `Retry-After`.
fn retried(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::RateLimited
            | ErrorCode::CapacityReached
            | ErrorCode::StoreUnavailable
            | ErrorCode::ServerShuttingDown
            | ErrorCode::GatewayUnavailable
    )
}

/// The responses for `codes` (duplicates ignored): one per HTTP status, naming its
/// codes, each with the error body and, where the code asks the caller to come back,
/// the `Retry-After` header.
pub(crate) fn responses(codes: &[ErrorCode]) -> BTreeMap<String, RefOr<Response>> {
    let mut by_status: BTreeMap<u16, Vec<ErrorCode>> = BTreeMap::new();
    for &code in codes {
        let listed = by_status.entry(code.http_status()).or_default();
        if !listed.contains(&code) {
            listed.push(code);
        }
    }
    by_status
        .into_iter()
        .map(|(status, codes)| {
            let names: Vec<String> = codes.iter().map(|c| format!("`{c}`")).collect();
            let mut response = ResponseBuilder::new()
                .description(format!(
                    "Refused: {} (docs/error-codes.md).",
                    names.join(", ")
                ))
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ApiErrorBody")))
                        .build(),
                );
            if codes.iter().any(|&c| retried(c)) {
                response = response.header(
                    "Retry-After",
                    HeaderBuilder::new()
                        .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
                        .description(Some("Seconds to wait before trying again."))
                        .build(),
                );
            }
            (status.to_string(), RefOr::T(response.build()))
        })
        .collect()
}

/// Declares marker types whose responses are `base` plus the codes listed.
macro_rules! refusals {
    ($($(#[$doc:meta])* $name:ident = $base:expr, [$($code:ident),* $(,)?];)+) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::Response>,
            > {
                let extra: &[latchkey_protocol::ErrorCode] =
                    &[$(latchkey_protocol::ErrorCode::$code),*];
                let all: Vec<latchkey_protocol::ErrorCode> =
                    $base.iter().chain(extra).copied().collect();
                $crate::openapi::refusals::responses(&all)
            }
        }
    )+};
}

refusals! {
    /// An admin (or member) request that reads.
    Read = AUTHENTICATED, [];
    /// A request about one thing by id: an unknown id and another team's answer alike.
    ReadOne = AUTHENTICATED, [NotFound];
    /// A request with a JSON body.
    Write = AUTHENTICATED, [InvalidRequest, InvalidParams];
    /// A request with a JSON body about one thing by id.
    WriteOne = AUTHENTICATED, [InvalidRequest, InvalidParams, NotFound];
    /// A request that creates something counted against a team's quota.
    Create = AUTHENTICATED, [InvalidRequest, InvalidParams, NotFound, LimitReached];
    /// An agent request that reads.
    AgentRead = AGENT, [];
    /// An agent request about one session (in cluster mode, one on another
    /// replica while NATS is away: `gateway_unavailable`).
    AgentSession = AGENT, [NotFound, SessionEnded, GatewayUnavailable];
    /// Starting a session on a browser.
    SessionStart = AGENT, [
        InvalidRequest, InvalidParams, NotFound, NoBrowserConnected,
        MultipleBrowsersOnline, UserAborted, LimitReached, CapacityReached,
        ServerShuttingDown, GatewayUnavailable, Timeout,
    ];
    /// A tool call: the agent's refusals and everything the browser can answer.
    ToolCall = AGENT, [
        InvalidRequest, InvalidParams, UnknownMethod, Unsupported, NotFound,
        Timeout, CdpFailed, Cancelled, UserAborted, SessionEnded, CapacityReached,
        ServerShuttingDown, GatewayUnavailable, BrowserDisconnected, DeviceRevoked,
        DeviceExpired, TokenRevoked, TokenExpired,
    ];
    /// The agent WebSocket: refused before the upgrade.
    AgentSocket = AGENT, [InvalidRequest, CapacityReached];
    /// Minting a delegation token.
    Delegate = AUTHENTICATED, [InvalidRequest, InvalidParams, RateLimited];
    /// No token: only the store and the server itself can fail.
    Public = [ErrorCode::StoreUnavailable, ErrorCode::Internal], [];
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::IntoResponses;

    #[test]
    fn each_status_lists_its_codes_from_the_table() {
        let r = ToolCall::responses();
        let RefOr::T(conflict) = &r["409"] else {
            panic!("409 missing")
        };
        for code in ["`cancelled`", "`user_aborted`"] {
            assert!(
                conflict.description.contains(code),
                "{}",
                conflict.description
            );
        }
        let RefOr::T(busy) = &r["503"] else {
            panic!("503 missing")
        };
        assert!(busy.headers.contains_key("Retry-After"));
        let RefOr::T(missing) = &r["404"] else {
            panic!("404 missing")
        };
        assert!(missing.headers.is_empty());
        assert!(!r.contains_key("200"));
    }

    #[test]
    fn a_code_listed_twice_is_named_once() {
        let r = responses(&[ErrorCode::NotFound, ErrorCode::NotFound]);
        let RefOr::T(missing) = &r["404"] else {
            panic!("404 missing")
        };
        assert_eq!(missing.description.matches("not_found").count(), 1);
    }
}
