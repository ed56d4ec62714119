//! A form posted by a signed-in person: extracting it is the check that it came
//! from this site with the sign-in's CSRF token (docs/console.md, "Security"), so
//! no state-changing handler can forget it.

use axum::extract::{FromRequest, FromRequestParts, Request};
use serde::de::DeserializeOwned;

use super::page::{ConsoleError, ConsoleForm};
use super::signed_in::SignedIn;
use crate::app::AppState;

/// A form that carries the CSRF token.
pub trait WithCsrf {
    fn csrf(&self) -> &str;
}

/// A form with nothing but the CSRF token (a button).
#[derive(serde::Deserialize)]
pub struct CsrfForm {
    csrf: String,
}

impl WithCsrf for CsrfForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// The signed-in person and their checked form.
pub struct Posted<T> {
    pub me: SignedIn,
    pub form: T,
}

impl<T> FromRequest<AppState> for Posted<T>
where
    T: DeserializeOwned + WithCsrf + Send,
{
    type Rejection = ConsoleError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ConsoleError> {
        let (mut parts, body) = request.into_parts();
        let me = SignedIn::from_request_parts(&mut parts, state).await?;
        let headers = parts.headers.clone();
        let ConsoleForm(form) =
            ConsoleForm::<T>::from_request(Request::from_parts(parts, body), state).await?;
        me.check_form(&headers, form.csrf())?;
        Ok(Posted { me, form })
    }
}
