//! bsk-compatible refusals: `{"error": <tag>}`, `content-type: application/json`,
//! `cache-control: no-store`, `connection: close`, and `Retry-After` where the
//! contract asks for one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use latchkey_protocol::authorize::{AuthorizeErrorBody, AuthorizeErrorTag};

/// A refusal on the extension endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub tag: AuthorizeErrorTag,
    pub retry_after_secs: Option<u64>,
}

impl Refusal {
    pub const fn new(status: StatusCode, tag: AuthorizeErrorTag) -> Self {
        Self {
            status,
            tag,
            retry_after_secs: None,
        }
    }

    /// 401: unknown, used, expired or revoked credential; any query string.
    pub const UNAUTHORIZED: Refusal = Refusal::new(
        StatusCode::UNAUTHORIZED,
        AuthorizeErrorTag::InvalidAuthorization,
    );
    /// 403: an Origin that is not an allowed extension.
    pub const FORBIDDEN_ORIGIN: Refusal = Refusal::new(
        StatusCode::FORBIDDEN,
        AuthorizeErrorTag::InvalidAuthorization,
    );
    /// 400: a body or upgrade that breaks the rules.
    pub const BAD_REQUEST: Refusal =
        Refusal::new(StatusCode::BAD_REQUEST, AuthorizeErrorTag::InvalidRequest);
    pub const NOT_FOUND: Refusal = Refusal::new(StatusCode::NOT_FOUND, AuthorizeErrorTag::NotFound);
    pub const RATE_LIMITED: Refusal = Refusal {
        status: StatusCode::TOO_MANY_REQUESTS,
        tag: AuthorizeErrorTag::RateLimited,
        retry_after_secs: Some(60),
    };
    /// 503: a new device while the node is at its online capacity (docs/protocol.md, "The
    /// upgrade").
    pub const AT_CAPACITY: Refusal = Refusal {
        status: StatusCode::SERVICE_UNAVAILABLE,
        tag: AuthorizeErrorTag::ConnectionCapacityReached,
        retry_after_secs: Some(5),
    };
    pub const STORE_BUSY: Refusal = Refusal {
        status: StatusCode::SERVICE_UNAVAILABLE,
        tag: AuthorizeErrorTag::AuthorizationStoreBusy,
        retry_after_secs: Some(1),
    };

    /// 400 `invalid_upgrade` for a malformed WebSocket upgrade (bsk's tag).
    pub const INVALID_UPGRADE: Refusal =
        Refusal::new(StatusCode::BAD_REQUEST, AuthorizeErrorTag::InvalidUpgrade);
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body =
            serde_json::to_string(&AuthorizeErrorBody { error: self.tag }).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// Fallback for other methods on the extension paths.
pub async fn not_found() -> Refusal {
    Refusal::NOT_FOUND
}
