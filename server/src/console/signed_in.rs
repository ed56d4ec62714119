//! Signing in to the console with an admin or member API token, and the
//! server-side sign-in behind the cookie (docs/console.md, "Signing in"), which
//! single sign-on (`sso`) makes too.
//!
//! The cookie holds 256 random bits; the store keeps only their SHA-256 and the
//! hash of the token signed in with, or, after single sign-on, the member. Each
//! request reads the row and resolves the token as a bearer request would (or
//! reads the member and their role), so signing out, removing the member or
//! revoking the token ends the sign-in at once. The CSRF token is derived from
//! the cookie's secret, so it needs no storage and changes with each sign-in.

use std::net::SocketAddr;

use askama::Template;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{MemberRole, Role};
use serde::Deserialize;

use super::page::{ConsoleError, ConsoleForm, Frame, render};
use super::posted::{CsrfForm, Posted};
use super::sso::Offered;
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::{Principal, by_token_hash};
use crate::auth::secret;
use crate::auth::token_watch::TokenLease;
use crate::rate_limits::rate::RetryAfter;
use crate::store::ConsoleSessionRecord;

/// The cookie's name.
const COOKIE: &str = "latchkey_console";
/// How long a sign-in lasts.
pub const SIGN_IN_TTL_SECS: i64 = 12 * 60 * 60;
/// Longest token the sign-in form reads (API tokens are 46 characters).
const MAX_TOKEN_CHARS: usize = 256;

/// A request from a signed-in person.
#[derive(Debug)]
pub struct SignedIn {
    pub principal: Principal,
    /// The sign-in's CSRF token.
    pub csrf: String,
    /// The hash of the cookie's secret: the sign-in's row.
    id_hash: String,
}

impl SignedIn {
    pub fn is_admin(&self) -> bool {
        self.principal.role == Role::Admin
    }

    /// Whether the sign-in is still there (a long-lived stream asks; the token's
    /// own end is its lease's).
    pub async fn still_signed_in(&self, state: &AppState) -> bool {
        let now = state.clock.now_ms();
        matches!(
            state.store.console_session(&self.id_hash, now).await,
            Ok(Some(_))
        )
    }

    /// What the page frame shows.
    pub fn frame(&self) -> Frame {
        Frame {
            name: self.principal.token_name.clone(),
            role: if self.is_admin() { "admin" } else { "member" },
            csrf: self.csrf.clone(),
        }
    }

    /// Refuse a page or form that is for admins only, saying `why`.
    pub fn admin_only(&self, why: &str) -> Result<(), ConsoleError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::new(ErrorCode::PermissionDenied, why).into())
        }
    }

    /// Refuse a state-changing form unless it carries this sign-in's CSRF token
    /// and comes from this site.
    pub fn check_form(&self, headers: &HeaderMap, csrf: &str) -> Result<(), ConsoleError> {
        same_site(headers)?;
        if secret::ct_eq(csrf, &self.csrf) {
            Ok(())
        } else {
            Err(ConsoleError::forged())
        }
    }
}

/// The CSRF token of the sign-in whose cookie holds `cookie_secret`.
fn csrf_of(cookie_secret: &str) -> String {
    secret::hash(&format!("latchkey-console-csrf:{cookie_secret}"))
}

/// Refuse a request a browser says came from another site (`Sec-Fetch-Site`);
/// older browsers that do not send it still need the CSRF token.
pub(super) fn same_site(headers: &HeaderMap) -> Result<(), ConsoleError> {
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        None | Some(b"same-origin" | b"none") => Ok(()),
        Some(_) => Err(ConsoleError::forged()),
    }
}

/// The value of the cookie `name`, if the request carries exactly one: two are
/// a browser confused or a cookie planted beside ours, and count as none.
pub(super) fn one_cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = None;
    for value in headers.get_all(header::COOKIE) {
        for pair in value.to_str().ok()?.split(';') {
            if let Some((n, v)) = pair.trim().split_once('=')
                && n == name
            {
                if found.is_some() {
                    return None;
                }
                found = Some(v);
            }
        }
    }
    found
}

/// The console cookie's value, if the request carries exactly one well-formed one.
fn cookie_secret(headers: &HeaderMap) -> Option<&str> {
    one_cookie(headers, COOKIE).filter(|v| latchkey_protocol::authorize::is_token_shaped(v))
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ConsoleError> {
        let secret_value = cookie_secret(&parts.headers).ok_or(ConsoleError::SignIn)?;
        let id_hash = secret::hash(secret_value);
        let now = state.clock.now_ms();
        let row = state
            .store
            .console_session(&id_hash, now)
            .await?
            .filter(|r| secret::ct_eq(&r.id_hash, &id_hash))
            .ok_or(ConsoleError::SignIn)?;
        let principal = match &row.token_hash {
            Some(token_hash) => match by_token_hash(state, token_hash).await {
                Ok(p) if p.tenant_id == row.tenant_id => p,
                Ok(_) => return Err(ConsoleError::SignIn),
                Err(e) if e.code == ErrorCode::Unauthorized => return Err(ConsoleError::SignIn),
                Err(e) => return Err(e.into()),
            },
            None => by_member(state, &row).await?,
        };
        Ok(SignedIn {
            principal,
            csrf: csrf_of(secret_value),
            id_hash,
        })
    }
}

/// The caller behind a sign-in through single sign-on: its member, if still in
/// the team, with the role the team gives them now (so a role change or a
/// removal counts at the next request).
async fn by_member(
    state: &AppState,
    row: &ConsoleSessionRecord,
) -> Result<Principal, ConsoleError> {
    let member_id = row.member_id.as_deref().ok_or(ConsoleError::SignIn)?;
    let member = state
        .store
        .member(&row.tenant_id, member_id)
        .await?
        .filter(|m| m.removed_at.is_none())
        .ok_or(ConsoleError::SignIn)?;
    let role = match MemberRole::parse(&member.role) {
        Some(MemberRole::Owner | MemberRole::Admin) => Role::Admin,
        Some(MemberRole::Member) => Role::Member,
        None => return Err(ConsoleError::SignIn),
    };
    Ok(Principal {
        tenant_id: member.tenant_id,
        token_id: format!("sso:{}", member.id),
        token_name: member.display_name,
        role,
        person_actor: Some(crate::audit::member_ref(&member.id)),
        member_id: Some(member.id),
        expires_at: Some(row.expires_at),
        delegation: None,
        lease: TokenLease::unwatched(),
    })
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage<'a> {
    frame: Option<Frame>,
    problem: Option<&'a str>,
    /// The single sign-on providers offered, as buttons.
    providers: Vec<Offered>,
}

pub async fn sign_in_page(State(state): State<AppState>) -> Response {
    render(
        StatusCode::OK,
        &SignInPage {
            frame: None,
            problem: None,
            providers: state.sso.offered(),
        },
    )
}

/// The sign-in page again, saying why the last attempt was refused.
pub(super) fn refused_sign_in(state: &AppState, status: StatusCode, problem: &str) -> Response {
    render(
        status,
        &SignInPage {
            frame: None,
            problem: Some(problem),
            providers: state.sso.offered(),
        },
    )
}

/// Charge one sign-in attempt to the client's address; `rate_limited` when
/// it has made too many this minute.
pub(super) fn charge_attempt(
    state: &AppState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<(), ConsoleError> {
    let client =
        crate::rate_limits::client_ip::client_ip(peer, headers, &state.config.trusted_proxies);
    if let Err(RetryAfter(wait)) = state.console_sign_in_limiter.check(client) {
        crate::telemetry::metrics::refused("rate_limited");
        let e = ApiError::new(
            ErrorCode::RateLimited,
            "too many sign-in attempts from this address; wait a minute",
        );
        return Err(e.retry_after(wait.as_secs().max(1)).into());
    }
    Ok(())
}

#[derive(Deserialize)]
pub struct SignInForm {
    token: String,
}

/// Check the token, keep a sign-in for it, set the cookie.
pub async fn sign_in(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    ConsoleForm(form): ConsoleForm<SignInForm>,
) -> Result<Response, ConsoleError> {
    same_site(&headers)?;
    charge_attempt(&state, peer, &headers)?;
    let token = form.token.trim();
    let refused = |problem: &str| refused_sign_in(&state, StatusCode::UNAUTHORIZED, problem);
    if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
        return Ok(refused("Paste an admin or member API token."));
    }
    let token_hash = secret::hash(token);
    let principal = match by_token_hash(&state, &token_hash).await {
        Ok(p) => p,
        Err(e) if e.code == ErrorCode::Unauthorized => {
            return Ok(refused("That token is unknown, expired or revoked."));
        }
        Err(e) => return Err(e.into()),
    };
    if principal.role == Role::Agent {
        return Ok(refused(
            "That is an agent token. Sign in with an admin or member token.",
        ));
    }
    tracing::info!(tenant = %principal.tenant_id, token = %principal.token_id, "console sign-in");
    begin_sign_in(
        &state,
        &principal.tenant_id,
        Some(token_hash),
        principal.member_id,
    )
    .await
}

/// The attributes every console cookie carries: script cannot read it, other
/// sites' requests other than links do not carry it, and behind TLS it is sent
/// over TLS only.
pub(super) fn cookie_attributes(state: &AppState) -> &'static str {
    if state.public_base.starts_with("wss://") {
        "; HttpOnly; SameSite=Lax; Secure"
    } else {
        "; HttpOnly; SameSite=Lax"
    }
}

/// Keep a new sign-in (by a token, or by single sign-on for a member), set its
/// cookie and go to the Devices page.
pub(super) async fn begin_sign_in(
    state: &AppState,
    tenant_id: &str,
    token_hash: Option<String>,
    member_id: Option<String>,
) -> Result<Response, ConsoleError> {
    let cookie_value = secret::random_secret();
    let now = state.clock.now_ms();
    state
        .store
        .put_console_session(
            &ConsoleSessionRecord {
                id_hash: secret::hash(&cookie_value),
                tenant_id: tenant_id.to_string(),
                token_hash,
                member_id,
                created_at: now,
                expires_at: now + SIGN_IN_TTL_SECS * 1000,
            },
            now,
        )
        .await?;
    let cookie = format!(
        "{COOKIE}={cookie_value}; Path=/console; Max-Age={SIGN_IN_TTL_SECS}{}",
        cookie_attributes(state)
    );
    Ok(with_cookie(Redirect::to("/console/devices"), &cookie))
}

/// End the sign-in here and in the store.
pub async fn sign_out(
    State(state): State<AppState>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    state.store.delete_console_session(&me.id_hash).await?;
    state
        .console_sign_outs
        .send_modify(|n| *n = n.wrapping_add(1));
    let cookie = format!(
        "{COOKIE}=; Path=/console; Max-Age=0{}",
        cookie_attributes(&state)
    );
    Ok(with_cookie(Redirect::to("/console/sign-in"), &cookie))
}

fn with_cookie(redirect: Redirect, cookie: &str) -> Response {
    let mut response = redirect.into_response();
    if let Ok(v) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookies(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::COOKIE, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn the_cookie_is_read_only_when_it_is_one_and_well_formed() {
        let s = secret::random_secret();
        assert_eq!(
            cookie_secret(&cookies(&[&format!("a=1; {COOKIE}={s}")])),
            Some(s.as_str())
        );
        assert_eq!(cookie_secret(&cookies(&["a=1"])), None);
        assert_eq!(cookie_secret(&cookies(&[&format!("{COOKIE}=short")])), None);
        let two = [
            format!("{COOKIE}={s}"),
            format!("{COOKIE}={}", secret::random_secret()),
        ];
        assert_eq!(cookie_secret(&cookies(&[&two[0], &two[1]])), None);
    }

    #[test]
    fn a_cross_site_form_is_refused_and_the_csrf_token_is_per_sign_in() {
        let mut h = HeaderMap::new();
        assert!(same_site(&h).is_ok());
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(same_site(&h).is_ok());
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(same_site(&h).is_err());
        h.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        assert!(same_site(&h).is_err());
        assert_ne!(csrf_of("a"), csrf_of("b"));
        assert_eq!(csrf_of("a"), csrf_of("a"));
    }
}
