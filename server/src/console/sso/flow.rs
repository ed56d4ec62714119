//! The two halves of a single sign-on (docs/console.md, "Single sign-on"):
//! `start` sends the browser to the provider with a fresh state, nonce and PKCE
//! challenge; `callback` takes it back, checks the state, trades the code (with
//! the PKCE verifier) for an ID token, verifies it and signs the person in.
//!
//! The state, nonce and verifier travel in a short-lived `HttpOnly` cookie
//! scoped to these two addresses, so any replica can finish a sign-in another
//! began, and nothing is stored for a sign-in that is never finished. The cookie
//! is `SameSite=Lax`: the provider's redirect back is a top-level navigation,
//! which carries it.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use openidconnect::core::{CoreAuthenticationFlow, CoreIdTokenClaims, CoreUserInfoClaims};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, CsrfToken, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RequestTokenError, Scope, TokenResponse, UserInfoError,
};
use serde::Deserialize;

use super::identity::{Person, member_for};
use super::{Client, Provider, error_chain, failed};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::secret;
use crate::console::page::ConsoleError;
use crate::console::signed_in::{begin_sign_in, cookie_attributes, one_cookie, refused_sign_in};

/// The cookie that carries a sign-in in progress from `start` to `callback`.
const FLOW_COOKIE: &str = "latchkey_sso";
/// Where that cookie is sent: these two addresses only.
const FLOW_PATH: &str = "/console/sign-in/sso";
/// How long a person may take at the provider.
const FLOW_TTL_SECS: i64 = 600;
/// Longest authorization code, state or provider error read from the address.
const MAX_PARAM_CHARS: usize = 2048;

/// A sign-in in progress, as its cookie carries it.
#[derive(Debug, PartialEq, Eq)]
struct Flow {
    provider: String,
    started_ms: i64,
    state: String,
    nonce: String,
    verifier: String,
}

impl Flow {
    /// `provider.started.state.nonce.verifier`: every part is URL-safe base64 or
    /// a provider id, so none holds a `.`.
    fn to_cookie(&self) -> String {
        format!(
            "{}.{}.{}.{}.{}",
            self.provider, self.started_ms, self.state, self.nonce, self.verifier
        )
    }

    fn from_cookie(value: &str) -> Option<Flow> {
        let mut parts = value.split('.');
        let flow = Flow {
            provider: parts.next()?.to_string(),
            started_ms: parts.next()?.parse().ok()?,
            state: parts.next()?.to_string(),
            nonce: parts.next()?.to_string(),
            verifier: parts.next()?.to_string(),
        };
        let safe = |s: &str| {
            !s.is_empty()
                && s.len() <= 256
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        (parts.next().is_none()
            && [&flow.provider, &flow.state, &flow.nonce, &flow.verifier]
                .iter()
                .all(|s| safe(s)))
        .then_some(flow)
    }
}

/// The flow cookie the request carries, if exactly one.
fn flow_cookie(headers: &HeaderMap) -> Option<Flow> {
    Flow::from_cookie(one_cookie(headers, FLOW_COOKIE)?)
}

/// Where the provider sends the browser back.
fn redirect_address(state: &AppState, provider: &str) -> String {
    format!(
        "{}{FLOW_PATH}/{provider}/callback",
        crate::mcp::http_base(&state.public_base)
    )
}

fn provider<'a>(state: &'a AppState, id: &str) -> Result<&'a Provider, ConsoleError> {
    state
        .sso
        .provider(id)
        .ok_or_else(|| ApiError::not_found("single sign-on provider").into())
}

/// Send the browser to the provider.
pub async fn start(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let provider = provider(&state, &id)?;
    let client = state
        .sso
        .client(provider, &redirect_address(&state, &id), false)
        .await?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, csrf, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scope(Scope::new("email".into()))
        .add_scope(Scope::new("profile".into()))
        .set_pkce_challenge(challenge)
        .url();
    let flow = Flow {
        provider: id,
        started_ms: state.clock.now_ms(),
        state: csrf.secret().clone(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
    };
    let cookie = format!(
        "{FLOW_COOKIE}={}; Path={FLOW_PATH}; Max-Age={FLOW_TTL_SECS}{}",
        flow.to_cookie(),
        cookie_attributes(&state)
    );
    let mut response = Redirect::to(url.as_str()).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(response)
}

/// What the provider sends back in the address.
#[derive(Debug, Deserialize)]
pub struct Returned {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Take the browser back from the provider and sign the person in. The flow
/// cookie is cleared whatever happens: a sign-in is tried once.
pub async fn callback(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(returned): Query<Returned>,
) -> Response {
    let mut response = match finish(&state, peer, &headers, &id, returned).await {
        Ok(response) => response,
        Err(ConsoleError::Refused(e)) if e.code != ErrorCode::RateLimited => {
            refused_sign_in(&state, status_of(&e), &e.message)
        }
        Err(e) => e.into_response(),
    };
    let clear = format!(
        "{FLOW_COOKIE}=; Path={FLOW_PATH}; Max-Age=0{}",
        cookie_attributes(&state)
    );
    if let Ok(v) = HeaderValue::from_str(&clear) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

fn status_of(e: &ApiError) -> StatusCode {
    StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn finish(
    state: &AppState,
    peer: SocketAddr,
    headers: &HeaderMap,
    id: &str,
    returned: Returned,
) -> Result<Response, ConsoleError> {
    crate::console::signed_in::charge_attempt(state, peer, headers)?;
    let provider = provider(state, id)?;
    let stale = || {
        ConsoleError::from(ApiError::new(
            ErrorCode::InvalidRequest,
            "This sign-in was started in another browser or took longer than 10 minutes: start again.",
        ))
    };
    let flow = flow_cookie(headers).ok_or_else(stale)?;
    let now = state.clock.now_ms();
    if flow.provider != id || now - flow.started_ms > FLOW_TTL_SECS * 1000 || now < flow.started_ms
    {
        return Err(stale());
    }
    // The state first, for an error answer too: only our own redirect counts.
    let returned_state = returned.state.unwrap_or_default();
    if !secret::ct_eq(&returned_state, &flow.state) {
        return Err(stale());
    }
    if let Some(error) = returned.error {
        let said = returned.error_description.unwrap_or(error);
        let said = latchkey_protocol::text::clean(&said, 200);
        return Err(ApiError::new(
            ErrorCode::PermissionDenied,
            format!("The identity provider did not sign you in: {said}"),
        )
        .into());
    }
    let code = returned
        .code
        .filter(|c| !c.is_empty() && c.len() <= MAX_PARAM_CHARS)
        .ok_or_else(stale)?;
    let redirect = redirect_address(state, id);
    let client = state.sso.client(provider, &redirect, false).await?;
    let http = state.sso.http()?;
    let tokens = client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|_| failed("the provider has no token endpoint"))?
        .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier))
        .request_async(http)
        .await
        .map_err(|e| {
            tracing::warn!(provider = %id, error = %token_failure(&e), "single sign-on code exchange failed");
            failed("the provider did not accept the sign-in")
        })?;
    let id_token = tokens
        .id_token()
        .ok_or_else(|| failed("the provider sent no ID token"))?;
    let nonce = Nonce::new(flow.nonce);
    let first = id_token
        .claims(&client.id_token_verifier(), &nonce)
        .cloned();
    let (client, claims) = match first {
        Ok(claims) => (client, claims),
        // Signed with a key we have not read yet: the provider rotated its keys.
        Err(ClaimsVerificationError::SignatureVerification(_)) => {
            let client: Client = state.sso.client(provider, &redirect, true).await?;
            let claims = id_token
                .claims(&client.id_token_verifier(), &nonce)
                .map_err(|e| unverified(id, &e))?
                .clone();
            (client, claims)
        }
        Err(e) => return Err(unverified(id, &e).into()),
    };
    let mut person = person_of(&claims);
    // A provider that keeps the ID token small (as the specification lets it
    // when an access token is issued) gives the address at its UserInfo
    // endpoint, for the same subject only.
    if person.email.is_none()
        && let Ok(request) = client.user_info(
            tokens.access_token().clone(),
            Some(claims.subject().clone()),
        )
    {
        let info: CoreUserInfoClaims = request.request_async(http).await.map_err(|e| {
            tracing::warn!(provider = %id, error = %user_info_failure(&e), "UserInfo request failed");
            failed("its UserInfo answer could not be read")
        })?;
        person = Person {
            email: info.email().map(|e| e.as_str().to_string()),
            email_verified: info.email_verified(),
            name: info
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.as_str().to_string()),
        };
    }
    let member = member_for(state, &provider.config, &person).await?;
    tracing::info!(tenant = %member.tenant_id, member = %member.id, provider = %id, "console sign-in through single sign-on");
    begin_sign_in(state, &member.tenant_id, None, Some(member.id)).await
}

/// Why the code exchange failed, for the log. An answer that did not parse
/// may hold a token, so only where it broke is named, never what it said.
fn token_failure<RE, T>(e: &RequestTokenError<RE, T>) -> String
where
    RE: std::error::Error + 'static,
    T: openidconnect::ErrorResponse + 'static,
{
    match e {
        RequestTokenError::ServerResponse(r) => format!("the provider refused: {r}"),
        RequestTokenError::Request(e) => format!("request failed: {}", error_chain(e)),
        RequestTokenError::Parse(e, _) => format!("unreadable answer at `{}`", e.path()),
        RequestTokenError::Other(why) => why.clone(),
    }
}

/// Why the UserInfo request failed, for the log: never the claims it held.
fn user_info_failure<RE: std::error::Error + 'static>(e: &UserInfoError<RE>) -> String {
    match e {
        UserInfoError::ClaimsVerification(e) => {
            format!("claims did not verify: {}", error_chain(e))
        }
        UserInfoError::Parse(e) => format!("unreadable answer at `{}`", e.path()),
        UserInfoError::Request(e) => format!("request failed: {}", error_chain(e)),
        UserInfoError::Response(status, _, why) => format!("HTTP {status}: {why}"),
        UserInfoError::Other(why) => why.clone(),
        _ => "failed".to_string(),
    }
}

fn unverified(provider: &str, e: &ClaimsVerificationError) -> ApiError {
    tracing::warn!(provider = %provider, error = %error_chain(e), "ID token did not verify");
    failed("its ID token did not verify")
}

fn person_of(claims: &CoreIdTokenClaims) -> Person {
    Person {
        email: claims.email().map(|e| e.as_str().to_string()),
        email_verified: claims.email_verified(),
        name: claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.as_str().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow {
            provider: "acme".into(),
            started_ms: 1_700_000_000_000,
            state: "c3RhdGU_-x".into(),
            nonce: "bm9uY2U".into(),
            verifier: "dmVyaWZpZXI-_0123456789".into(),
        }
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(value).expect("header"),
        );
        h
    }

    #[test]
    fn the_flow_cookie_reads_back_what_was_written() {
        let f = flow();
        let h = with_cookie(&format!("a=b; {FLOW_COOKIE}={}", f.to_cookie()));
        assert_eq!(flow_cookie(&h), Some(f));
    }

    #[test]
    fn a_malformed_or_doubled_flow_cookie_is_no_flow() {
        let f = flow().to_cookie();
        for bad in [
            format!("{FLOW_COOKIE}={f}.extra"),
            format!("{FLOW_COOKIE}=acme.x.a.b.c"),
            format!("{FLOW_COOKIE}=acme.1.a.b"),
            format!("{FLOW_COOKIE}=ac%20me.1.a.b.c"),
            format!("{FLOW_COOKIE}={f}; {FLOW_COOKIE}={f}"),
            "other=1".to_string(),
        ] {
            assert_eq!(flow_cookie(&with_cookie(&bad)), None, "{bad}");
        }
    }
}
