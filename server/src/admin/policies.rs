//! Policies over HTTP (docs/policy.md): the team's (`/v1/admin/policy`, admins),
//! a browser's (`/v1/admin/devices/{id}/policy`, admins; `/v1/me/devices/{id}/policy`,
//! its owner). A write is checked whole before anything is stored, audited, and
//! reaches the open sessions it governs before it is answered.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::PolicyView;
use latchkey_protocol::policy::{EffectivePolicy, Layer, Policy};
use serde::Deserialize;

use super::devices::checked_id;
use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action, device_ref};
use crate::auth::principal::{AdminPrincipal, MemberPrincipal, Principal};
use crate::policy::{parse_stored, refresh};

/// `?effective=true`: add what sessions run under.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PolicyQuery {
    /// Add the policy sessions run under: every layer combined.
    effective: Option<bool>,
}

fn wants_effective(query: Result<Query<PolicyQuery>, QueryRejection>) -> Result<bool, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    Ok(q.effective.unwrap_or(false))
}

/// `body` as it will be stored: normalised, every bound checked, each agent a
/// token of this team (another team's id is refused exactly like an unknown one).
async fn checked(state: &AppState, tenant_id: &str, body: Policy) -> Result<Policy, ApiError> {
    let policy = body
        .normalized()
        .map_err(|e| ApiError::at_field(ErrorCode::InvalidParams, &e.field, e.to_string()))?;
    if let Some(agents) = &policy.agents {
        let tokens = state.store.list_api_tokens(tenant_id).await?;
        for (i, id) in agents.iter().enumerate() {
            if !tokens.iter().any(|t| &t.id == id) {
                return Err(ApiError::at_field(
                    ErrorCode::InvalidParams,
                    &format!("agents[{i}]"),
                    format!("agents[{i}]: no token {id} in this team"),
                ));
            }
        }
    }
    Ok(policy)
}

/// How a policy is stored: `{}` as no policy at all.
fn stored(policy: &Policy) -> Result<Option<String>, ApiError> {
    if policy == &Policy::default() {
        return Ok(None);
    }
    serde_json::to_string(policy)
        .map(Some)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "the policy could not be stored"))
}

/// One line for the audit trail: which limits the policy sets.
fn summary(policy: &Policy) -> String {
    let mut parts = Vec::new();
    let count = |name: &str, list: &Option<Vec<String>>| {
        list.as_ref().map(|l| format!("{name}:{}", l.len()))
    };
    parts.extend(count("agents", &policy.agents));
    parts.extend(policy.consent.map(|c| format!("consent:{}", c.as_str())));
    parts.extend(count("allow_sites", &policy.allow_sites));
    parts.extend(count("block_sites", &policy.block_sites));
    parts.extend(
        policy
            .schemes
            .as_ref()
            .map(|s| format!("schemes:{}", s.join(","))),
    );
    parts.extend(policy.capabilities.as_ref().map(|c| {
        let names: Vec<&str> = c.iter().map(|c| c.as_str()).collect();
        format!("capabilities:{}", names.join(","))
    }));
    parts.extend(
        policy
            .max_session_minutes
            .map(|m| format!("max_session_minutes:{m}")),
    );
    if parts.is_empty() {
        "no limits".to_string()
    } else {
        parts.join(" ")
    }
}

async fn audit_set(state: &AppState, p: &Principal, target: String, policy: &Policy) {
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::POLICY_SET,
            target,
            outcome: "ok",
            detail: Some(summary(policy)),
        })
        .await;
}

/// `GET /v1/admin/policy[?effective=true]`.
#[utoipa::path(
    get,
    operation_id = "policies_get_team",
    path = "/v1/admin/policy",
    tag = "policy",
    summary = "Read the team's policy",
    params(PolicyQuery),
    responses((status = 200, description = "The team policy.", body = PolicyView), crate::openapi::refusals::Write),
)]
pub async fn get_team(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    query: Result<Query<PolicyQuery>, QueryRejection>,
) -> Result<Json<PolicyView>, ApiError> {
    let effective = wants_effective(query)?;
    let policy = team_policy_of(&state, &p.tenant_id).await?;
    Ok(Json(PolicyView {
        scope: Layer::Team,
        device_id: None,
        effective: effective.then(|| EffectivePolicy::of(&[(Layer::Team, &policy)])),
        policy,
        sessions_ended: None,
    }))
}

/// The team's policy as set (`{}`: none).
pub(crate) async fn team_policy_of(state: &AppState, tenant_id: &str) -> Result<Policy, ApiError> {
    let text = state.store.team_policy(tenant_id).await?;
    parse_stored(text.as_deref()).map_err(ApiError::from)
}

/// `PUT /v1/admin/policy`: replace the team's policy (`{}` clears it).
#[utoipa::path(
    put,
    operation_id = "policies_put_team",
    path = "/v1/admin/policy",
    tag = "policy",
    summary = "Set the team's policy",
    request_body = Policy,
    responses((status = 200, description = "The policy as stored.", body = PolicyView), crate::openapi::refusals::Write),
)]
pub async fn put_team(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    ApiJson(body): ApiJson<Policy>,
) -> Result<Json<PolicyView>, ApiError> {
    set_team(&state, &p, body).await.map(Json)
}

/// Replace `p`'s team's policy with `body`, checked whole first; audited, and
/// applied to the open sessions before it returns. Also the console's.
pub(crate) async fn set_team(
    state: &AppState,
    p: &Principal,
    body: Policy,
) -> Result<PolicyView, ApiError> {
    let policy = checked(state, &p.tenant_id, body).await?;
    state
        .store
        .set_team_policy(&p.tenant_id, stored(&policy)?.as_deref())
        .await?;
    audit_set(state, p, "team".into(), &policy).await;
    let ended = refresh(state, &p.tenant_id, None).await;
    Ok(PolicyView {
        scope: Layer::Team,
        device_id: None,
        policy,
        effective: None,
        sessions_ended: Some(u32::try_from(ended).unwrap_or(u32::MAX)),
    })
}

/// A browser's policy, and the effective one when asked for.
pub(crate) async fn device_view(
    state: &AppState,
    tenant_id: &str,
    id: &str,
    effective: bool,
) -> Result<Json<PolicyView>, ApiError> {
    let rows = state
        .store
        .device_policies(tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("device"))?;
    let parse = |t: Option<&str>| parse_stored(t).map_err(ApiError::from);
    let (team, device) = (parse(rows.team.as_deref())?, parse(rows.device.as_deref())?);
    Ok(Json(PolicyView {
        scope: Layer::Device,
        device_id: Some(id.to_string()),
        effective: effective
            .then(|| EffectivePolicy::of(&[(Layer::Team, &team), (Layer::Device, &device)])),
        policy: device,
        sessions_ended: None,
    }))
}

/// Replace browser `id`'s policy with `body`, checked whole first; audited, and
/// applied to its open sessions before it returns. The caller has checked that
/// `p` may. Also the console's.
pub(crate) async fn set_device(
    state: &AppState,
    p: &Principal,
    id: &str,
    body: Policy,
) -> Result<Json<PolicyView>, ApiError> {
    let policy = checked(state, &p.tenant_id, body).await?;
    if !state
        .store
        .set_device_policy(&p.tenant_id, id, stored(&policy)?.as_deref())
        .await?
    {
        return Err(ApiError::not_found("device"));
    }
    audit_set(state, p, device_ref(id), &policy).await;
    let ended = refresh(state, &p.tenant_id, Some(id)).await;
    Ok(Json(PolicyView {
        scope: Layer::Device,
        device_id: Some(id.to_string()),
        policy,
        effective: None,
        sessions_ended: Some(u32::try_from(ended).unwrap_or(u32::MAX)),
    }))
}

/// `GET /v1/admin/devices/{id}/policy[?effective=true]`.
#[utoipa::path(
    get,
    operation_id = "policies_get_device",
    path = "/v1/admin/devices/{id}/policy",
    tag = "policy",
    summary = "Read a browser's policy",
    params(("id" = String, Path, description = "Device id"), PolicyQuery),
    responses((status = 200, description = "The browser's own policy, and with `effective=true` what sessions run under.", body = PolicyView), crate::openapi::refusals::WriteOne),
)]
pub async fn get_device(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
    query: Result<Query<PolicyQuery>, QueryRejection>,
) -> Result<Json<PolicyView>, ApiError> {
    let effective = wants_effective(query)?;
    device_view(&state, &p.tenant_id, checked_id(&id)?, effective).await
}

/// `PUT /v1/admin/devices/{id}/policy`: replace a browser's policy.
#[utoipa::path(
    put,
    operation_id = "policies_put_device",
    path = "/v1/admin/devices/{id}/policy",
    tag = "policy",
    summary = "Set a browser's policy",
    request_body = Policy,
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The policy as stored.", body = PolicyView), crate::openapi::refusals::WriteOne),
)]
pub async fn put_device(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Policy>,
) -> Result<Json<PolicyView>, ApiError> {
    set_device(&state, &p, checked_id(&id)?, body).await
}

/// The caller's own browser `id`; anyone else's answers exactly like an unknown id.
async fn mine<'a>(
    state: &AppState,
    me: &MemberPrincipal,
    id: &'a str,
) -> Result<&'a str, ApiError> {
    let id = checked_id(id)?;
    let owned = state
        .store
        .device(&me.principal.tenant_id, id)
        .await?
        .is_some_and(|d| d.owner_id.as_deref() == Some(me.member_id.as_str()));
    if owned {
        Ok(id)
    } else {
        Err(ApiError::not_found("device"))
    }
}

/// `GET /v1/me/devices/{id}/policy[?effective=true]`: a browser of the caller's own.
#[utoipa::path(
    get,
    operation_id = "policies_get_mine",
    path = "/v1/me/devices/{id}/policy",
    tag = "me",
    summary = "Read my browser's policy",
    params(("id" = String, Path, description = "Device id"), PolicyQuery),
    responses((status = 200, description = "The policy of the caller's own browser.", body = PolicyView), crate::openapi::refusals::WriteOne),
)]
pub async fn get_mine(
    State(state): State<AppState>,
    me: MemberPrincipal,
    Path(id): Path<String>,
    query: Result<Query<PolicyQuery>, QueryRejection>,
) -> Result<Json<PolicyView>, ApiError> {
    let effective = wants_effective(query)?;
    let id = mine(&state, &me, &id).await?;
    device_view(&state, &me.principal.tenant_id, id, effective).await
}

/// `PUT /v1/me/devices/{id}/policy`: the owner sets their browser's policy,
/// within the team's (the effective policy is the intersection of both).
#[utoipa::path(
    put,
    operation_id = "policies_put_mine",
    path = "/v1/me/devices/{id}/policy",
    tag = "me",
    summary = "Set my browser's policy",
    request_body = Policy,
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The policy as stored.", body = PolicyView), crate::openapi::refusals::WriteOne),
)]
pub async fn put_mine(
    State(state): State<AppState>,
    me: MemberPrincipal,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Policy>,
) -> Result<Json<PolicyView>, ApiError> {
    let id = mine(&state, &me, &id).await?;
    set_device(&state, &me.principal, id, body).await
}
