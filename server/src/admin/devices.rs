//! Devices: list (with each one's owner), get, rename, revoke one, revoke all.
//! Revocation closes the live socket by push (close code `revoked`) before the
//! commit and again after it, so the socket is gone within milliseconds rather
//! than at the next poll.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, State};
use latchkey_protocol::api::{
    DeviceList, DeviceStatus, DeviceView, ForgetResult, MemberRef, RenameDeviceRequest,
    RevokeAllResult,
};
use latchkey_protocol::authorize::is_device_id;

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{self, Event, action};
use crate::auth::principal::{AdminPrincipal, Principal};
use crate::clock::rfc3339;
use crate::devices::grant::Verdict;
use crate::store::{DeviceRecord, Forget};

/// The owners of `devices`, by member id.
pub(crate) async fn owners(
    state: &AppState,
    tenant_id: &str,
    devices: &[DeviceRecord],
) -> Result<HashMap<String, MemberRef>, ApiError> {
    let wanted = devices.iter().map(|d| d.owner_id.as_deref());
    super::members::references(state, tenant_id, wanted).await
}

/// One device as an admin sees it, with its owner.
pub(crate) async fn view_one(
    state: &AppState,
    tenant_id: &str,
    d: DeviceRecord,
) -> Result<DeviceView, ApiError> {
    let owners = owners(state, tenant_id, std::slice::from_ref(&d)).await?;
    Ok(view(state, d, &owners))
}

pub(crate) fn view(
    state: &AppState,
    d: DeviceRecord,
    owners: &HashMap<String, MemberRef>,
) -> DeviceView {
    let now = state.clock.now_ms();
    let live = state.registry.status(&d.id);
    // Here, or on another replica (docs/cluster.md).
    let online =
        live.is_some_and(|(online, _)| online) || state.peers.holds_elsewhere(&d.tenant_id, &d.id);
    let status = match Verdict::of(Some(&d), now) {
        Verdict::Revoked => DeviceStatus::Revoked,
        Verdict::Expired => DeviceStatus::Expired,
        Verdict::Live | Verdict::Unconfirmed => DeviceStatus::Active,
    };
    let last_seen = match (live, d.last_seen_at) {
        (Some((_, live_ms)), Some(stored)) => Some(live_ms.max(stored)),
        (Some((_, live_ms)), None) => Some(live_ms),
        (None, stored) => stored,
    };
    DeviceView {
        id: d.id,
        label: d.label,
        browser_name: d.browser_name,
        browser_version: d.browser_version,
        owner: d.owner_id.as_ref().and_then(|id| owners.get(id).cloned()),
        created_by: d.created_by,
        created_at: rfc3339(d.created_at),
        expires_at: rfc3339(d.expires_at),
        renew_after: rfc3339(d.renew_after),
        last_seen_at: last_seen.map(rfc3339),
        revoked_at: d.revoked_at.map(rfc3339),
        status,
        online,
    }
}

/// A malformed id cannot exist; answer exactly as for an unknown one.
pub(crate) fn checked_id(id: &str) -> Result<&str, ApiError> {
    if is_device_id(id) {
        Ok(id)
    } else {
        Err(ApiError::not_found("device"))
    }
}

#[utoipa::path(
    get,
    operation_id = "devices_list",
    path = "/v1/admin/devices",
    tag = "devices",
    summary = "List the team's devices",
    responses((status = 200, description = "Every device with its owner, status and expiry.", body = DeviceList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<DeviceList>, ApiError> {
    let devices = state.store.list_devices(&p.tenant_id).await?;
    let owners = owners(&state, &p.tenant_id, &devices).await?;
    Ok(Json(DeviceList {
        devices: devices
            .into_iter()
            .map(|d| view(&state, d, &owners))
            .collect(),
    }))
}

#[utoipa::path(
    get,
    operation_id = "devices_get_one",
    path = "/v1/admin/devices/{id}",
    tag = "devices",
    summary = "Show one device",
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The device.", body = DeviceView), crate::openapi::refusals::ReadOne),
)]
pub async fn get_one(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<DeviceView>, ApiError> {
    let d = state
        .store
        .device(&p.tenant_id, checked_id(&id)?)
        .await?
        .ok_or_else(|| ApiError::not_found("device"))?;
    Ok(Json(view_one(&state, &p.tenant_id, d).await?))
}

#[utoipa::path(
    patch,
    operation_id = "devices_rename",
    path = "/v1/admin/devices/{id}",
    tag = "devices",
    summary = "Rename a device",
    request_body = RenameDeviceRequest,
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The device, renamed.", body = DeviceView), crate::openapi::refusals::WriteOne),
)]
pub async fn rename(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RenameDeviceRequest>,
) -> Result<Json<DeviceView>, ApiError> {
    let d = rename_one(&state, &p, checked_id(&id)?, &body.label).await?;
    Ok(Json(view_one(&state, &p.tenant_id, d).await?))
}

/// Give device `id` of `p`'s tenant the label `label` (checked and cleaned as
/// every label is); audited as `p`'s act. Also the console's Rename.
pub(crate) async fn rename_one(
    state: &AppState,
    p: &Principal,
    id: &str,
    label: &str,
) -> Result<DeviceRecord, ApiError> {
    let label = super::clean_name(label, "label", latchkey_protocol::text::MAX_LABEL_CHARS)?;
    let d = state
        .store
        .rename_device(&p.tenant_id, id, &label)
        .await?
        .ok_or_else(|| ApiError::not_found("device"))?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::DEVICE_RENAME,
            target: audit::device_ref(id),
            outcome: "ok",
            detail: None,
        })
        .await;
    Ok(d)
}

#[utoipa::path(
    delete,
    operation_id = "devices_revoke",
    path = "/v1/admin/devices/{id}",
    tag = "devices",
    summary = "Revoke a device",
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "The device, revoked; its connection is closed.", body = DeviceView), crate::openapi::refusals::ReadOne),
)]
pub async fn revoke(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<DeviceView>, ApiError> {
    let d = revoke_one(&state, &p, checked_id(&id)?).await?;
    Ok(Json(view_one(&state, &p.tenant_id, d).await?))
}

/// Revoke one device of `p`'s tenant and close its live socket (4001); audited as
/// `p`'s act. Also how a member revokes a browser of their own (`/v1/me`).
pub(crate) async fn revoke_one(
    state: &AppState,
    p: &Principal,
    id: &str,
) -> Result<DeviceRecord, ApiError> {
    let span = tracing::info_span!("revoke", tenant = %p.tenant_id, device = %id);
    let revoked = tracing::Instrument::instrument(
        crate::devices::revocation::revoke_and_close(state, &p.tenant_id, id),
        span,
    )
    .await;
    let (d, was_online) = revoked?.ok_or_else(|| ApiError::not_found("device"))?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::DEVICE_REVOKE,
            target: audit::device_ref(id),
            outcome: "ok",
            detail: was_online.then(|| "live socket closed".to_string()),
        })
        .await;
    Ok(d)
}

#[utoipa::path(
    post,
    operation_id = "devices_revoke_all",
    path = "/v1/admin/devices/revoke-all",
    tag = "devices",
    summary = "Revoke every device of the team",
    responses((status = 200, description = "How many were revoked.", body = RevokeAllResult), crate::openapi::refusals::Read),
)]
pub async fn revoke_all(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<RevokeAllResult>, ApiError> {
    revoke_everything(&state, &p).await.map(Json)
}

/// Revoke every device of `p`'s tenant, void its unused links and close every
/// live socket (4001); audited as `p`'s act. Also the console's Revoke all.
pub(crate) async fn revoke_everything(
    state: &AppState,
    p: &Principal,
) -> Result<RevokeAllResult, ApiError> {
    let now = state.clock.now_ms();
    // Closed first and again after the commit, as in `revoke`.
    crate::devices::revocation::close_revoked_team(state, &p.tenant_id);
    let (ids, voided) = state.store.revoke_all_devices(&p.tenant_id, now).await?;
    crate::devices::revocation::close_revoked(state, &p.tenant_id, &ids);
    metrics::counter!(crate::telemetry::metrics::REVOCATIONS).increment(ids.len() as u64);
    tracing::info!(tenant = %p.tenant_id, devices = ids.len(), voided, "all devices revoked");
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::DEVICE_REVOKE_ALL,
            target: "devices:*".to_string(),
            outcome: "ok",
            detail: Some(format!(
                "{} devices revoked, {voided} pairing links voided",
                ids.len()
            )),
        })
        .await;
    Ok(RevokeAllResult {
        revoked_devices: ids.len() as u64,
        voided_pairings: voided,
    })
}

/// `POST /v1/admin/devices/{id}/forget`: take a device whose grant has ended
/// (revoked or expired) off the tenant's list. A live device is refused
/// (`invalid_request`: revoke it first); the audit rows about it stay. This is how a
/// revoked local browser is brought back: forgotten, its next connection makes a
/// new device.
#[utoipa::path(
    post,
    operation_id = "devices_forget",
    path = "/v1/admin/devices/{id}/forget",
    tag = "devices",
    summary = "Forget a revoked or expired device",
    params(("id" = String, Path, description = "Device id")),
    responses((status = 200, description = "What was forgotten.", body = ForgetResult), crate::openapi::refusals::WriteOne),
)]
pub async fn forget(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<ForgetResult>, ApiError> {
    let id = checked_id(&id)?;
    match state
        .store
        .forget_device(&p.tenant_id, id, state.clock.now_ms())
        .await?
    {
        Forget::NotFound => Err(ApiError::not_found("device")),
        Forget::Live => Err(ApiError::invalid(
            "the device's grant is live: revoke it before forgetting it",
        )),
        Forget::Forgotten => {
            state
                .audit
                .record(Event {
                    tenant_id: &p.tenant_id,
                    actor: p.actor(),
                    action: action::DEVICE_FORGET,
                    target: audit::device_ref(id),
                    outcome: "ok",
                    detail: None,
                })
                .await;
            Ok(Json(ForgetResult {
                id: id.to_string(),
                forgotten: true,
            }))
        }
    }
}
