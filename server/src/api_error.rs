//! The error every admin and agent API handler returns: a stable code, a human
//! message, and for retryable refusals a `Retry-After`. Status codes come from the
//! protocol crate's one table.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use latchkey_protocol::error_code::ApiErrorBody;
use latchkey_protocol::{ErrorBody, ErrorCode};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// The error's `data` object, passed through (for example `reason`).
    pub data: Option<serde_json::Value>,
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
            retry_after_secs: None,
        }
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// A refusal about one field of the request: `data.field` names it.
    pub fn at_field(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(code, message);
        e.data = Some(serde_json::json!({ "field": field }));
        e
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("no such {what}"))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "missing, unknown, expired or revoked API token",
        )
    }
}

impl From<ErrorBody> for ApiError {
    fn from(e: ErrorBody) -> Self {
        let retry = matches!(
            e.code,
            ErrorCode::CapacityReached
                | ErrorCode::GatewayUnavailable
                | ErrorCode::StoreUnavailable
        )
        .then_some(1);
        Self {
            code: e.code,
            message: e.message,
            data: e.data,
            retry_after_secs: retry,
        }
    }
}

impl From<crate::core_error::CoreError> for ApiError {
    fn from(e: crate::core_error::CoreError) -> Self {
        ApiError::from(e.into_body())
    }
}

/// The same refusal as a frame's or a tool result's error body (the agent socket,
/// MCP): code, message and data unchanged.
impl From<ApiError> for ErrorBody {
    fn from(e: ApiError) -> Self {
        ErrorBody {
            code: e.code,
            message: e.message,
            data: e.data,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e.noted() {
            StoreError::Unavailable(_) | StoreError::Contended(_) => ApiError::new(
                ErrorCode::StoreUnavailable,
                "the store is unavailable; retry shortly",
            )
            .retry_after(1),
            StoreError::Conflict(_) => ApiError::invalid("conflicts with an existing record"),
            StoreError::Internal(_) => ApiError::new(ErrorCode::Internal, "internal error"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ApiErrorBody {
            error: ErrorBody {
                code: self.code,
                message: self.message,
                data: self.data,
            },
        };
        let mut response = (status, Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// JSON body extraction whose failures are our `invalid_request`, not axum's text.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            // The rejection text names the field and the problem, never the value.
            Err(rejection) => Err(ApiError::invalid(rejection.body_text())),
        }
    }
}
