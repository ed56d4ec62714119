//! Policies and team settings in the console (docs/console.md, "Policies" and
//! "Team settings"): a browser's policy, edited by an admin or by the browser's
//! own person; the team's policy and audit retention, by admins. Every save goes
//! through the policy and audit APIs' own functions, so a policy the API refuses
//! is refused here the same way, shown beside the form as typed.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::ErrorCode;
use serde::Deserialize;

use super::devices::one;
use super::page::{ConsoleError, Frame, render};
use super::policy_form::{PolicyFields, PolicyForm};
use super::posted::{Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::audit_keeping::{retention_of, set_retention};
use crate::admin::policies::{device_view, set_device, set_team, team_policy_of};
use crate::api_error::ApiError;
use crate::app::AppState;

/// Why a member is refused the team's settings.
const ADMINS_ONLY: &str =
    "the team's settings are the admins'; a browser's own policy is on Devices";

/// `?saved=N`: the page after a save, with how many sessions it ended.
#[derive(Deserialize)]
pub struct Saved {
    saved: Option<u32>,
}

/// The team's live agent tokens (id, name): whom a policy can name.
async fn agents(state: &AppState, tenant_id: &str) -> Result<Vec<(String, String)>, ApiError> {
    let now = state.clock.now_ms();
    Ok(state
        .store
        .list_api_tokens(tenant_id)
        .await?
        .into_iter()
        .filter(|t| t.role == "agent" && t.revoked_at.is_none())
        .filter(|t| t.expires_at.is_none_or(|e| e > now))
        .map(|t| (t.id, t.name))
        .collect())
}

/// A refusal the form can show (its code and why); anything else is the
/// error page's.
fn shown(e: ApiError) -> Result<(&'static str, String), ConsoleError> {
    if e.code.http_status() == 400 {
        Ok((e.code.as_str(), e.message))
    } else {
        Err(e.into())
    }
}

#[derive(Template)]
#[template(path = "console/policy.html")]
struct PolicyPage {
    frame: Option<Frame>,
    id: String,
    label: String,
    owner: Option<String>,
    fields: PolicyFields,
    saved: Option<u32>,
    refused: Option<(&'static str, String)>,
}

/// The page of browser `id`'s policy: an admin's for any browser of the team, a
/// member's for their own; anyone else's answers as an unknown browser.
pub async fn device_page(
    State(state): State<AppState>,
    me: SignedIn,
    Path(id): Path<String>,
    Query(saved): Query<Saved>,
) -> Result<Response, ConsoleError> {
    let d = one(&state, &me, &id).await?;
    let tenant = &me.principal.tenant_id;
    let view = device_view(&state, tenant, &d.id, false).await?.0;
    let owner = owner_name(&state, tenant, d.owner_id.as_deref()).await?;
    Ok(render(
        StatusCode::OK,
        &PolicyPage {
            frame: Some(me.frame()),
            fields: PolicyFields::of(&view.policy, agents(&state, tenant).await?),
            id: d.id,
            label: d.label,
            owner,
            saved: saved.saved,
            refused: None,
        },
    ))
}

async fn owner_name(
    state: &AppState,
    tenant_id: &str,
    owner: Option<&str>,
) -> Result<Option<String>, ApiError> {
    let Some(owner) = owner else { return Ok(None) };
    Ok(state
        .store
        .member(tenant_id, owner)
        .await?
        .map(|m| m.display_name))
}

pub async fn device_save(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form }: Posted<PolicyForm>,
) -> Result<Response, ConsoleError> {
    let d = one(&state, &me, &id).await?;
    let tenant = &me.principal.tenant_id;
    let saved = match form.policy() {
        Ok(policy) => set_device(&state, &me.principal, &d.id, policy)
            .await
            .map(|r| r.0),
        Err(e) => Err(e),
    };
    match saved {
        Ok(view) => Ok(Redirect::to(&format!(
            "/console/devices/{}/policy?saved={}",
            d.id,
            view.sessions_ended.unwrap_or(0)
        ))
        .into_response()),
        Err(e) => {
            let refused = shown(e)?;
            let owner = owner_name(&state, tenant, d.owner_id.as_deref()).await?;
            Ok(render(
                StatusCode::BAD_REQUEST,
                &PolicyPage {
                    frame: Some(me.frame()),
                    fields: form.typed(agents(&state, tenant).await?),
                    id: d.id,
                    label: d.label,
                    owner,
                    saved: None,
                    refused: Some(refused),
                },
            ))
        }
    }
}

#[derive(Template)]
#[template(path = "console/team.html")]
struct TeamPage {
    frame: Option<Frame>,
    retention_days: u32,
    retention_default: bool,
    fields: PolicyFields,
    saved: Option<u32>,
    refused: Option<(&'static str, String)>,
}

async fn team_page(
    state: &AppState,
    me: &SignedIn,
    fields: Option<PolicyFields>,
    saved: Option<u32>,
    refused: Option<(&'static str, String)>,
) -> Result<Response, ConsoleError> {
    let tenant = &me.principal.tenant_id;
    let retention = retention_of(state, tenant).await?;
    let fields = match fields {
        Some(f) => f,
        None => PolicyFields::of(
            &team_policy_of(state, tenant).await?,
            agents(state, tenant).await?,
        ),
    };
    let status = if refused.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Ok(render(
        status,
        &TeamPage {
            frame: Some(me.frame()),
            retention_days: retention.days,
            retention_default: retention.is_default,
            fields,
            saved,
            refused,
        },
    ))
}

pub async fn team(
    State(state): State<AppState>,
    me: SignedIn,
    Query(saved): Query<Saved>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    team_page(&state, &me, None, saved.saved, None).await
}

pub async fn team_policy(
    State(state): State<AppState>,
    Posted { me, form }: Posted<PolicyForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let saved = match form.policy() {
        Ok(policy) => set_team(&state, &me.principal, policy).await,
        Err(e) => Err(e),
    };
    match saved {
        Ok(view) => Ok(Redirect::to(&format!(
            "/console/team?saved={}",
            view.sessions_ended.unwrap_or(0)
        ))
        .into_response()),
        Err(e) => {
            let refused = shown(e)?;
            let typed = form.typed(agents(&state, &me.principal.tenant_id).await?);
            team_page(&state, &me, Some(typed), None, Some(refused)).await
        }
    }
}

#[derive(Deserialize)]
pub struct RetentionForm {
    csrf: String,
    #[serde(default)]
    days: String,
}

impl WithCsrf for RetentionForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn team_retention(
    State(state): State<AppState>,
    Posted { me, form }: Posted<RetentionForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let days = match form.days.trim() {
        "" => Ok(None),
        n => n.parse::<u32>().map(Some).map_err(|_| {
            ApiError::at_field(
                ErrorCode::InvalidParams,
                "days",
                "days must be a whole number, or blank for the gateway's default",
            )
        }),
    };
    let saved = match days {
        Ok(days) => set_retention(&state, &me.principal, days).await,
        Err(e) => Err(e),
    };
    match saved {
        Ok(_) => Ok(Redirect::to("/console/team?saved=0").into_response()),
        Err(e) => {
            let refused = shown(e)?;
            team_page(&state, &me, None, None, Some(refused)).await
        }
    }
}
