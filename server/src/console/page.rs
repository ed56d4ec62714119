//! Rendering: every page is an askama template in `server/templates/console/`
//! (HTML-escaped by default), framed by `base.html`; failures become an error
//! page with the same stable code the API would give.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;

use crate::api_error::ApiError;

/// Who is signed in, as every page's frame shows them.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The name of the token signed in with.
    pub name: String,
    /// "admin" or "member".
    pub role: &'static str,
    /// The sign-in's CSRF token, for the forms on the page (sign-out included).
    pub csrf: String,
}

/// Render `page` with `status`; a template failure is a plain 500.
pub fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "console page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    frame: Option<Frame>,
    code: &'a str,
    message: &'a str,
}

/// Why a console request did not get its page.
#[derive(Debug)]
pub enum ConsoleError {
    /// No live sign-in: go to the sign-in page.
    SignIn,
    /// Refused or failed, with the API's code and message.
    Refused(ApiError),
}

impl From<ApiError> for ConsoleError {
    fn from(e: ApiError) -> Self {
        Self::Refused(e)
    }
}

impl From<crate::store::StoreError> for ConsoleError {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Refused(e.into())
    }
}

impl ConsoleError {
    /// A refused form: the page or CSRF check failed (docs/console.md, "Security").
    pub fn forged() -> Self {
        let mut e = ApiError::new(
            ErrorCode::PermissionDenied,
            "this form is out of date or came from another site: reload the page and try again",
        );
        e.data = Some(serde_json::json!({ "reason": "csrf" }));
        Self::Refused(e)
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        match self {
            Self::SignIn => Redirect::to("/console/sign-in").into_response(),
            Self::Refused(e) => {
                let status = StatusCode::from_u16(e.code.http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = render(
                    status,
                    &ErrorPage {
                        frame: None,
                        code: e.code.as_str(),
                        message: &e.message,
                    },
                );
                if let Some(secs) = e.retry_after_secs {
                    response
                        .headers_mut()
                        .insert(axum::http::header::RETRY_AFTER, secs.into());
                }
                response
            }
        }
    }
}

/// A form body; one that does not parse is refused with `invalid_request` on an
/// error page, not axum's plain text.
#[derive(Debug)]
pub struct ConsoleForm<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for ConsoleForm<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ConsoleError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ConsoleError> {
        match axum::Form::<T>::from_request(req, state).await {
            Ok(axum::Form(v)) => Ok(ConsoleForm(v)),
            Err(_) => Err(ConsoleError::Refused(ApiError::invalid(
                "the form is incomplete or malformed",
            ))),
        }
    }
}
