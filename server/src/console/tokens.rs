//! The Agents and tokens page (docs/console.md, "Agents and tokens"), for admins:
//! the team's API tokens with their role, person, last use and expiry; a new one
//! shown once with a copy button; revoking one ends what it holds at once.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{CreateTokenRequest, Role};
use serde::Deserialize;

use super::human::{MemberChoice, When, person};
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::tokens::{create_token, revoke_token};
use crate::api_error::ApiError;
use crate::app::AppState;

/// One token, never its secret.
pub struct TokenRow {
    pub id: String,
    pub name: String,
    pub role: &'static str,
    /// Whose own token it is, or who made it (an agent token).
    pub person: Option<String>,
    pub created: When,
    pub last_used: Option<When>,
    pub expires: Option<When>,
    /// "Active", "Revoked", "Expired".
    pub status: &'static str,
}

#[derive(Template)]
#[template(path = "console/tokens.html")]
struct TokensPage {
    frame: Option<Frame>,
    rows: Vec<TokenRow>,
    members: Vec<MemberChoice>,
    /// The name and secret of a token just made, shown once.
    created: Option<(String, String)>,
    /// The team's live delegations.
    delegations: Vec<super::delegations::DelegationRow>,
}

impl TokensPage {
    fn lifetimes(&self) -> [(u64, &'static str); 4] {
        LIFETIMES
    }
}

/// Lifetimes offered, in seconds; 0 for none.
pub const LIFETIMES: [(u64, &str); 4] = [
    (0, "No expiry"),
    (30 * 86_400, "30 days"),
    (90 * 86_400, "90 days"),
    (365 * 86_400, "1 year"),
];

/// Why a member is refused here.
const ADMINS_ONLY: &str = "tokens are managed by the team's admins";

async fn page(
    state: &AppState,
    me: &SignedIn,
    created: Option<(String, String)>,
) -> Result<Response, ConsoleError> {
    let tenant = &me.principal.tenant_id;
    let now = state.clock.now_ms();
    let members = state.store.list_members(tenant, true).await?;
    let name = |id: &str| {
        members
            .iter()
            .find(|m| m.id == id)
            .map(|m| person(&m.display_name, &m.email))
    };
    let tokens = state.store.list_api_tokens(tenant).await?;
    let delegations = super::delegations::rows(state, tenant, |id| {
        tokens.iter().find(|t| t.id == id).map(|t| t.name.clone())
    })
    .await?;
    let rows = tokens
        .into_iter()
        .map(|t| TokenRow {
            role: match Role::parse(&t.role) {
                Some(Role::Admin) => "admin",
                Some(Role::Member) => "member",
                _ => "agent",
            },
            person: t.member_id.as_deref().and_then(name),
            created: When::of(now, t.created_at),
            last_used: t.last_used_at.map(|ms| When::of(now, ms)),
            expires: t.expires_at.map(|ms| When::of(now, ms)),
            status: if t.revoked_at.is_some() {
                "Revoked"
            } else if t.expires_at.is_some_and(|e| e <= now) {
                "Expired"
            } else {
                "Active"
            },
            name: t.name,
            id: t.id,
        })
        .collect();
    let choices = members
        .iter()
        .filter(|m| m.removed_at.is_none())
        .map(MemberChoice::of)
        .collect();
    let status = if created.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(render(
        status,
        &TokensPage {
            frame: Some(me.frame()),
            rows,
            members: choices,
            created,
            delegations,
        },
    ))
}

pub async fn list(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    page(&state, &me, None).await
}

#[derive(Deserialize)]
pub struct NewTokenForm {
    csrf: String,
    name: String,
    role: String,
    /// Whose own token an admin or member token is; empty for none.
    #[serde(default)]
    member: String,
    /// 0 for no expiry.
    #[serde(default)]
    ttl_secs: u64,
}

impl WithCsrf for NewTokenForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn create(
    State(state): State<AppState>,
    Posted { me, form }: Posted<NewTokenForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let role = Role::parse(&form.role).ok_or_else(|| {
        ApiError::at_field(
            ErrorCode::InvalidParams,
            "role",
            "role must be agent, member or admin",
        )
    })?;
    let body = CreateTokenRequest {
        name: form.name,
        role,
        ttl_secs: Some(form.ttl_secs).filter(|t| *t > 0),
        member_id: Some(form.member).filter(|m| !m.is_empty()),
    };
    let made = create_token(&state, &me.principal, &body).await?;
    page(&state, &me, Some((made.view.name, made.token))).await
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    revoke_token(&state, &me.principal, &id).await?;
    Ok(Redirect::to("/console/tokens").into_response())
}
