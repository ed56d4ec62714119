//! Who is calling the HTTP API: an API token resolved to its tenant and role, with a
//! lease on it ([`TokenLease`]) so that whatever the request starts ends when the
//! token is revoked or expires.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::Role;

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::secret;
use crate::auth::token_watch::TokenLease;

/// An authenticated API caller. Every handler scopes its queries by `tenant_id`.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant_id: String,
    pub token_id: String,
    pub token_name: String,
    pub role: Role,
    /// The person behind the token, if any (docs/people.md).
    pub member_id: Option<String>,
    /// When the credential expires (ms), if it does: a delegation minted from it
    /// may not outlive it.
    pub expires_at: Option<i64>,
    /// Set when the credential is a delegation token (docs/delegation.md): what
    /// it is narrowed to.
    pub delegation: Option<std::sync::Arc<crate::delegation::Delegated>>,
    /// Set for a console sign-in through single sign-on, which has no token
    /// behind it (docs/console.md): the audit names the member (`member:<id>`)
    /// rather than a token.
    pub person_actor: Option<String>,
    /// Ends when the token is revoked or expires; sockets, streams and sessions the
    /// request starts keep a clone.
    pub lease: TokenLease,
}

impl Principal {
    pub fn actor(&self) -> String {
        self.person_actor
            .clone()
            .unwrap_or_else(|| crate::audit::token_actor(&self.token_name))
    }

    /// The token rate limits and session quotas are charged to: a delegation's
    /// root API token, so minting delegations never multiplies an agent's budget.
    pub fn quota_id(&self) -> &str {
        self.delegation
            .as_ref()
            .map_or(self.token_id.as_str(), |d| d.root_token_id.as_str())
    }
}

/// A caller whose token has the admin role.
#[derive(Debug, Clone)]
pub struct AdminPrincipal(pub Principal);

/// A caller of the agent API: an agent or admin token, charged to the agent rate
/// limits (per token and per tenant) like every agent, admins included. A member
/// token is refused: it is a person's, for their own browsers, not an agent's.
#[derive(Debug, Clone)]
pub struct AgentPrincipal(pub Principal);

/// A caller with a person behind the token (a member token, or an admin token that
/// is a member's own), on `/v1/me`: the member's own browsers and links.
#[derive(Debug, Clone)]
pub struct MemberPrincipal {
    pub principal: Principal,
    /// The caller's member id.
    pub member_id: String,
}

/// The bearer credential of a request: exactly one `Authorization: Bearer <x>`.
pub fn bearer(parts: &Parts) -> Option<&str> {
    let mut values = parts.headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = value.to_str().ok()?;
    let (scheme, credential) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let credential = credential.trim();
    (!credential.is_empty() && !credential.contains(' ')).then_some(credential)
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let credential = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        if crate::delegation::verify::is_jwt(credential) {
            return crate::delegation::verify::principal(state, credential).await;
        }
        by_token_hash(state, &secret::hash(credential)).await
    }
}

/// The caller holding the API token whose SHA-256 is `hash`, if the token is live;
/// `unauthorized` otherwise. What a bearer token and a console sign-in resolve to
/// (docs/console.md, "Signing in").
pub(crate) async fn by_token_hash(state: &AppState, hash: &str) -> Result<Principal, ApiError> {
    let hash = hash.to_owned();
    // A revocation signalled between the read and the lease sends us back to the
    // store (auth::token_watch); revocations are rare, so this loops at most a
    // few times.
    let (token, lease) = loop {
        let epoch = state.tokens.epoch();
        let now = state.clock.now_ms();
        // A record read under this epoch is as good as a new read: any
        // revocation since would have advanced it (auth::token_cache).
        let token = match state.token_cache.get(&hash, epoch, now) {
            Some(token) => token,
            None => {
                let token = state
                    .store
                    .api_token_by_hash(&hash)
                    .await?
                    .filter(|t| secret::ct_eq(&t.token_hash, &hash))
                    .ok_or_else(ApiError::unauthorized)?;
                state
                    .token_cache
                    .put(hash.clone(), token.clone(), epoch, now);
                token
            }
        };
        if token.revoked_at.is_some() || token.expires_at.is_some_and(|e| e <= now) {
            return Err(ApiError::unauthorized());
        }
        if let Ok(lease) = state.tokens.lease(&token, epoch, &state.clock) {
            break (token, lease);
        }
    };
    let role = Role::parse(&token.role).ok_or_else(ApiError::unauthorized)?;
    let now = state.clock.now_ms();
    // Recorded at most once a minute per token, so reads do not become writes.
    if token.last_used_at.is_none_or(|t| now - t > 60_000) {
        match state
            .store
            .touch_api_token(&token.tenant_id, &token.id, now)
            .await
        {
            Ok(()) => state.token_cache.touched(&hash, now),
            Err(e) => tracing::debug!(error = %e, "last_used_at not updated"),
        }
    }
    tracing::Span::current().record("tenant", tracing::field::display(&token.tenant_id));
    Ok(Principal {
        tenant_id: token.tenant_id,
        token_id: token.id,
        token_name: token.name,
        role,
        member_id: token.member_id,
        expires_at: token.expires_at,
        lease,
        delegation: None,
        person_actor: None,
    })
}

impl FromRequestParts<AppState> for AgentPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = Principal::from_request_parts(parts, state).await?;
        if p.role == Role::Member {
            return Err(ApiError::new(
                ErrorCode::PermissionDenied,
                "a member token manages its member's own browsers; agents use agent tokens",
            ));
        }
        if let Err(limited) = state.agent_limiter.check(&p.tenant_id, p.quota_id()) {
            crate::telemetry::metrics::refused("rate_limited");
            return Err(limited.api_error());
        }
        Ok(AgentPrincipal(p))
    }
}

impl FromRequestParts<AppState> for AdminPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = Principal::from_request_parts(parts, state).await?;
        if p.role != Role::Admin {
            return Err(ApiError::new(
                ErrorCode::PermissionDenied,
                "this needs an admin token",
            ));
        }
        Ok(AdminPrincipal(p))
    }
}

impl FromRequestParts<AppState> for MemberPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let p = Principal::from_request_parts(parts, state).await?;
        match (p.role, p.member_id.clone()) {
            (Role::Member | Role::Admin, Some(member_id)) => Ok(MemberPrincipal {
                principal: p,
                member_id,
            }),
            _ => Err(ApiError::new(
                ErrorCode::PermissionDenied,
                "this needs a member's own token (latchkey admin tokens create --role member --member ID)",
            )),
        }
    }
}
