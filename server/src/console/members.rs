//! The Members page (docs/console.md, "Members"), for admins: the team's people,
//! adding one, and removing one after a confirmation that says what goes with
//! them (their browsers, tokens, links and console sign-ins, at once).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{CreateMemberRequest, MemberRole};
use serde::Deserialize;

use super::human::When;
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::members::{add, remove_one};
use crate::api_error::ApiError;
use crate::app::AppState;

/// One member.
pub struct MemberRow {
    pub id: String,
    pub name: String,
    pub email: String,
    pub role: &'static str,
    pub added: When,
    /// Browsers paired for them and still active.
    pub browsers: usize,
}

#[derive(Template)]
#[template(path = "console/members.html")]
struct MembersPage {
    frame: Option<Frame>,
    rows: Vec<MemberRow>,
}

#[derive(Template)]
#[template(path = "console/remove_member.html")]
struct RemovePage {
    frame: Option<Frame>,
    row: MemberRow,
}

/// Why a member is refused here.
const ADMINS_ONLY: &str = "members are managed by the team's admins";

async fn rows(state: &AppState, me: &SignedIn) -> Result<Vec<MemberRow>, ApiError> {
    let tenant = &me.principal.tenant_id;
    let now = state.clock.now_ms();
    let devices = state.store.list_devices(tenant).await?;
    Ok(state
        .store
        .list_members(tenant, false)
        .await?
        .into_iter()
        .map(|m| MemberRow {
            browsers: devices
                .iter()
                .filter(|d| {
                    d.owner_id.as_deref() == Some(m.id.as_str())
                        && d.revoked_at.is_none()
                        && d.expires_at > now
                })
                .count(),
            role: MemberRole::parse(&m.role).unwrap_or_default().as_str(),
            added: When::of(now, m.created_at),
            name: m.display_name,
            email: m.email,
            id: m.id,
        })
        .collect())
}

pub async fn list(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let rows = rows(&state, &me).await?;
    Ok(render(
        StatusCode::OK,
        &MembersPage {
            frame: Some(me.frame()),
            rows,
        },
    ))
}

#[derive(Deserialize)]
pub struct NewMemberForm {
    csrf: String,
    name: String,
    email: String,
    #[serde(default)]
    role: String,
}

impl WithCsrf for NewMemberForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// The role a form names; empty means `member`.
fn role_of(raw: &str) -> Result<MemberRole, ApiError> {
    if raw.is_empty() {
        return Ok(MemberRole::Member);
    }
    MemberRole::parse(raw).ok_or_else(|| {
        ApiError::at_field(
            ErrorCode::InvalidParams,
            "role",
            "role must be member, admin or owner",
        )
    })
}

pub async fn create(
    State(state): State<AppState>,
    Posted { me, form }: Posted<NewMemberForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let role = role_of(&form.role)?;
    let body = CreateMemberRequest {
        display_name: form.name,
        email: form.email,
        role,
    };
    add(&state, &me.principal, &body).await?;
    Ok(Redirect::to("/console/members").into_response())
}

/// The member `id` as a row, or `not_found` as for an unknown id.
async fn one(state: &AppState, me: &SignedIn, id: &str) -> Result<MemberRow, ApiError> {
    rows(state, me)
        .await?
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(|| ApiError::not_found("member"))
}

pub async fn confirm_remove(
    State(state): State<AppState>,
    me: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let row = one(&state, &me, &id).await?;
    Ok(render(
        StatusCode::OK,
        &RemovePage {
            frame: Some(me.frame()),
            row,
        },
    ))
}

pub async fn remove(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    remove_one(&state, &me.principal, &id).await?;
    Ok(Redirect::to("/console/members").into_response())
}

#[derive(Deserialize)]
pub struct RoleForm {
    csrf: String,
    role: String,
}

impl WithCsrf for RoleForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Change a member's role (what they may do when they sign in as themselves).
pub async fn set_role(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form }: Posted<RoleForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let role = role_of(&form.role)?;
    crate::admin::members::set_role(&state, &me.principal, &id, role).await?;
    Ok(Redirect::to("/console/members").into_response())
}
