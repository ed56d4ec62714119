//! What an admin does to browsers beyond revoking one (docs/console.md,
//! "Devices"): rename one, and revoke every browser of the team at once after
//! typing the team's name, so a stray click can never take the whole team
//! offline. Both go through the admin API's own functions.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::DeviceStatus;
use serde::Deserialize;

use super::devices::one;
use super::page::{ConsoleError, Frame, render};
use super::posted::{Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::devices::{rename_one, revoke_everything};
use crate::api_error::ApiError;
use crate::app::AppState;

/// Why a member is refused here.
const ADMINS_ONLY: &str =
    "browsers are renamed and revoked all at once by the team's admins; revoke your own on Devices";

#[derive(Template)]
#[template(path = "console/rename.html")]
struct RenamePage {
    frame: Option<Frame>,
    id: String,
    /// The label now, or as typed when it was refused.
    label: String,
    problem: Option<String>,
}

#[derive(Deserialize)]
pub struct RenameForm {
    csrf: String,
    label: String,
}

impl WithCsrf for RenameForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn confirm_rename(
    State(state): State<AppState>,
    me: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let d = one(&state, &me, &id).await?;
    Ok(render(
        StatusCode::OK,
        &RenamePage {
            frame: Some(me.frame()),
            id: d.id,
            label: d.label,
            problem: None,
        },
    ))
}

pub async fn rename(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form }: Posted<RenameForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let d = one(&state, &me, &id).await?;
    match rename_one(&state, &me.principal, &d.id, &form.label).await {
        Ok(_) => Ok(Redirect::to("/console/devices").into_response()),
        // A label the API refuses is shown beside the field, to be corrected.
        Err(e) if e.code == ErrorCode::InvalidParams => Ok(render(
            StatusCode::BAD_REQUEST,
            &RenamePage {
                frame: Some(me.frame()),
                id: d.id,
                label: form.label,
                problem: Some(e.message),
            },
        )),
        Err(e) => Err(e.into()),
    }
}

#[derive(Template)]
#[template(path = "console/revoke_all.html")]
struct RevokeAllPage {
    frame: Option<Frame>,
    team: String,
    /// Browsers that are not revoked or expired now.
    active: usize,
    /// Of those, connected now.
    online: usize,
    problem: Option<String>,
}

#[derive(Deserialize)]
pub struct RevokeAllForm {
    csrf: String,
    /// The team's name, typed.
    confirm: String,
}

impl WithCsrf for RevokeAllForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// The page that asks, with what is at stake counted.
async fn asking(
    state: &AppState,
    me: &SignedIn,
    problem: Option<String>,
) -> Result<RevokeAllPage, ConsoleError> {
    let tenant = &me.principal.tenant_id;
    let team = team_name(state, tenant).await?;
    let devices = state.store.list_devices(tenant).await?;
    let views = crate::admin::devices::owners(state, tenant, &devices).await?;
    let (mut active, mut online) = (0, 0);
    for d in devices {
        let v = crate::admin::devices::view(state, d, &views);
        if v.status == DeviceStatus::Active {
            active += 1;
            online += usize::from(v.online);
        }
    }
    Ok(RevokeAllPage {
        frame: Some(me.frame()),
        team,
        active,
        online,
        problem,
    })
}

async fn team_name(state: &AppState, tenant: &str) -> Result<String, ApiError> {
    state
        .team_names
        .of(state.store.as_ref(), tenant)
        .await
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::StoreUnavailable,
                "the team's name cannot be read now; try again",
            )
        })
}

pub async fn confirm_revoke_all(
    State(state): State<AppState>,
    me: SignedIn,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    Ok(render(StatusCode::OK, &asking(&state, &me, None).await?))
}

pub async fn revoke_all(
    State(state): State<AppState>,
    Posted { me, form }: Posted<RevokeAllForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let team = team_name(&state, &me.principal.tenant_id).await?;
    if form.confirm.trim() != team {
        let problem =
            format!("Nothing was revoked: type the team's name, {team}, exactly to confirm.");
        let page = asking(&state, &me, Some(problem)).await?;
        return Ok(render(StatusCode::BAD_REQUEST, &page));
    }
    revoke_everything(&state, &me.principal).await?;
    Ok(Redirect::to("/console/devices").into_response())
}
