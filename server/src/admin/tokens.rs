//! API tokens: create (the secret is shown once), list, revoke.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{CreateTokenRequest, Role, TokenCreated, TokenList, TokenView};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::principal::AdminPrincipal;
use crate::auth::secret;
use crate::clock::rfc3339;
use crate::store::ApiTokenRecord;

/// Longest token lifetime: ten years.
const MAX_TOKEN_TTL_SECS: u64 = 10 * 366 * 86_400;

fn view(t: ApiTokenRecord) -> TokenView {
    TokenView {
        role: Role::parse(&t.role).unwrap_or(Role::Agent),
        id: t.id,
        name: t.name,
        created_at: rfc3339(t.created_at),
        expires_at: t.expires_at.map(rfc3339),
        revoked_at: t.revoked_at.map(rfc3339),
        last_used_at: t.last_used_at.map(rfc3339),
        member_id: t.member_id,
    }
}

#[utoipa::path(
    post,
    operation_id = "tokens_create",
    path = "/v1/admin/tokens",
    tag = "tokens",
    summary = "Create an API token",
    request_body = CreateTokenRequest,
    responses((status = 201, description = "The token; its secret is shown only here.", body = TokenCreated), crate::openapi::refusals::Create),
)]
pub async fn create(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    ApiJson(body): ApiJson<CreateTokenRequest>,
) -> Result<(StatusCode, Json<TokenCreated>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(create_token(&state, &p, &body).await?),
    ))
}

/// Create a token in `p`'s tenant as `body` asks; audited as `p`'s act. The
/// secret is in the answer and nowhere else. Also the console's.
pub(crate) async fn create_token(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    body: &CreateTokenRequest,
) -> Result<TokenCreated, ApiError> {
    let name = super::clean_name(
        &body.name,
        "name",
        latchkey_protocol::text::MAX_TOKEN_NAME_CHARS,
    )?;
    if body
        .ttl_secs
        .is_some_and(|t| t == 0 || t > MAX_TOKEN_TTL_SECS)
    {
        return Err(ApiError::new(
            ErrorCode::InvalidParams,
            "ttl_secs must be 1..=316224000",
        ));
    }
    let member_id = behind(state, p, body).await?;
    let now = state.clock.now_ms();
    let token = secret::new_api_token();
    let record = ApiTokenRecord {
        id: crate::ids::TOKEN.mint(),
        tenant_id: p.tenant_id.clone(),
        name,
        role: body.role.as_str().to_string(),
        token_hash: secret::hash(&token),
        created_at: now,
        expires_at: body
            .ttl_secs
            .map(|t| now.saturating_add(i64::try_from(t * 1000).unwrap_or(i64::MAX))),
        revoked_at: None,
        last_used_at: None,
        member_id,
    };
    if record.member_id.is_none() {
        state.store.insert_api_token(&record).await?;
    } else if !state.store.insert_member_token(&record).await? {
        // The member left meanwhile: an admin token for them is for no one, and an
        // agent token created by them is refused as their own token now is.
        return Err(match body.role {
            Role::Admin | Role::Member => ApiError::not_found("member"),
            Role::Agent => ApiError::from(crate::core_error::CoreError::Token(
                crate::auth::token_watch::TokenEnd::Revoked,
            )),
        });
    }
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::TOKEN_CREATE,
            target: format!("token:{}", record.id),
            outcome: "ok",
            detail: Some(format!("role {}", record.role)),
        })
        .await;
    Ok(TokenCreated {
        view: view(record),
        token,
    })
}

/// The person behind a new token (docs/people.md): for an admin or member token,
/// the member named in the request, whose own token it is (a member token must
/// name one); for an agent token, the person behind the token creating it. A member that is not in the team answers
/// `not_found`, as an unknown id does. The store checks again as it inserts.
async fn behind(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    body: &CreateTokenRequest,
) -> Result<Option<String>, ApiError> {
    match (body.role, &body.member_id) {
        (Role::Agent, Some(_)) => Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "member_id",
            "an agent token is no one's own: it records the member behind the token that creates it",
        )),
        (Role::Agent, None) => Ok(p.member_id.clone()),
        (Role::Admin, None) => Ok(None),
        (Role::Member, None) => Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "member_id",
            "a member token is a member's own: name the member",
        )),
        (Role::Admin | Role::Member, Some(id)) => {
            let live = crate::ids::MEMBER.holds(id)
                && state
                    .store
                    .member(&p.tenant_id, id)
                    .await?
                    .is_some_and(|m| m.removed_at.is_none());
            if live {
                Ok(Some(id.clone()))
            } else {
                Err(ApiError::not_found("member"))
            }
        }
    }
}

#[utoipa::path(
    get,
    operation_id = "tokens_list",
    path = "/v1/admin/tokens",
    tag = "tokens",
    summary = "List API tokens",
    responses((status = 200, description = "The team's tokens, never their secrets.", body = TokenList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<TokenList>, ApiError> {
    let tokens = state.store.list_api_tokens(&p.tenant_id).await?;
    Ok(Json(TokenList {
        tokens: tokens.into_iter().map(view).collect(),
    }))
}

/// Revoke a token and end everything it holds on this node at once: its agent
/// sockets close with 4006, its event streams end, its sessions end with reason
/// `token_revoked` and their calls in flight fail with `token_revoked`. As for a
/// device, the end is signalled before the commit (only for a token this tenant
/// holds here, so a foreign id ends nothing) and again after it, which catches a
/// request that authenticated in between.
#[utoipa::path(
    delete,
    operation_id = "tokens_revoke",
    path = "/v1/admin/tokens/{id}",
    tag = "tokens",
    summary = "Revoke an API token",
    params(("id" = String, Path, description = "Token id")),
    responses((status = 200, description = "The token, revoked; what it held has ended.", body = TokenView), crate::openapi::refusals::WriteOne),
)]
pub async fn revoke(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<TokenView>, ApiError> {
    Ok(Json(revoke_token(&state, &p, &id).await?))
}

/// Revoke the token `id` of `p`'s tenant and end what it holds (see [`revoke`]);
/// audited as `p`'s act. Also the console's.
pub(crate) async fn revoke_token(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    id: &str,
) -> Result<TokenView, ApiError> {
    let id = id.to_owned();
    if !crate::ids::TOKEN.holds(&id) {
        return Err(ApiError::not_found("token"));
    }
    let now = state.clock.now_ms();
    crate::auth::revoked::end_revoked(state, &p.tenant_id, std::slice::from_ref(&id));
    let token = state
        .store
        .revoke_api_token(&p.tenant_id, &id, now)
        .await?
        .ok_or_else(|| ApiError::not_found("token"))?;
    let in_use =
        crate::auth::revoked::end_revoked(state, &p.tenant_id, std::slice::from_ref(&token.id)) > 0;
    crate::delegation::mint::end_under_token(state, &p.tenant_id, &token.id).await;
    tracing::info!(tenant = %p.tenant_id, token = %token.id, in_use, "API token revoked");
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::TOKEN_REVOKE,
            target: format!("token:{}", token.id),
            outcome: "ok",
            detail: None,
        })
        .await;
    Ok(view(token))
}
