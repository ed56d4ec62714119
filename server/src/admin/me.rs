//! `/v1/me`: a person's own browsers, with their own token (a member token, or an
//! admin token that is theirs; docs/people.md). They see and revoke only browsers
//! that are theirs, and make links only for themselves: another member's browser
//! answers exactly as an unknown id does.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::api::{
    CreateOwnPairingRequest, DeviceList, DeviceView, MemberView, PairingCreated,
};

use super::devices::{checked_id, owners, revoke_one, view, view_one};
use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::auth::principal::MemberPrincipal;

/// `GET /v1/me`: who the token's person is.
#[utoipa::path(
    get,
    operation_id = "me_whoami",
    path = "/v1/me",
    tag = "me",
    summary = "Who the token belongs to",
    responses((status = 200, description = "The caller's member.", body = MemberView), crate::openapi::refusals::Read),
)]
pub async fn whoami(
    State(state): State<AppState>,
    me: MemberPrincipal,
) -> Result<Json<MemberView>, ApiError> {
    let member = state
        .store
        .member(&me.principal.tenant_id, &me.member_id)
        .await?
        .filter(|m| m.removed_at.is_none())
        // Removal revokes the member's tokens; one that raced it is no one's.
        .ok_or_else(ApiError::unauthorized)?;
    Ok(Json(super::members::view(member)))
}

/// `GET /v1/me/devices`: the caller's own browsers.
#[utoipa::path(
    get,
    operation_id = "me_devices",
    path = "/v1/me/devices",
    tag = "me",
    summary = "List my browsers",
    responses((status = 200, description = "The caller's own browsers.", body = DeviceList), crate::openapi::refusals::Read),
)]
pub async fn devices(
    State(state): State<AppState>,
    me: MemberPrincipal,
) -> Result<Json<DeviceList>, ApiError> {
    let tenant = &me.principal.tenant_id;
    let mine =
        crate::devices::owned::of_member(state.store.as_ref(), tenant, &me.member_id).await?;
    let owners = owners(&state, tenant, &mine).await?;
    Ok(Json(DeviceList {
        devices: mine.into_iter().map(|d| view(&state, d, &owners)).collect(),
    }))
}

/// `POST /v1/me/pairings`: a one-time link for a browser of the caller's own.
#[utoipa::path(
    post,
    operation_id = "me_pair",
    path = "/v1/me/pairings",
    tag = "me",
    summary = "Make a pairing link for a browser of my own",
    request_body = CreateOwnPairingRequest,
    responses((status = 201, description = "The link; its secret is shown only here.", body = PairingCreated), crate::openapi::refusals::Create),
)]
pub async fn pair(
    State(state): State<AppState>,
    me: MemberPrincipal,
    ApiJson(body): ApiJson<CreateOwnPairingRequest>,
) -> Result<(StatusCode, Json<PairingCreated>), ApiError> {
    let created = super::pairings::create_link(
        &state,
        &me.principal,
        body.label,
        body.ttl_secs,
        Some(me.member_id.clone()),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// `DELETE /v1/me/devices/{id}`: revoke a browser of the caller's own; its live
/// connection closes with 4001 at once. Anyone else's answers `not_found`.
#[utoipa::path(
    delete,
    operation_id = "me_revoke",
    path = "/v1/me/devices/{id}",
    tag = "me",
    summary = "Revoke my browser",
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The browser, revoked.", body = DeviceView), crate::openapi::refusals::ReadOne),
)]
pub async fn revoke(
    State(state): State<AppState>,
    me: MemberPrincipal,
    Path(id): Path<String>,
) -> Result<Json<DeviceView>, ApiError> {
    let tenant = &me.principal.tenant_id;
    let id = checked_id(&id)?;
    // A device's owner is set when it pairs and never changes, so this read
    // decides for the revocation below.
    let mine = state
        .store
        .device(tenant, id)
        .await?
        .is_some_and(|d| d.owner_id.as_deref() == Some(me.member_id.as_str()));
    if !mine {
        return Err(ApiError::not_found("device"));
    }
    let d = revoke_one(&state, &me.principal, id).await?;
    Ok(Json(view_one(&state, tenant, d).await?))
}
