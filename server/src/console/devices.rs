//! The Devices page (docs/console.md, "Devices"): every browser of the team for
//! an admin, a member's own for a member, with owner, status, last seen and
//! expiry; revoking one asks first, naming the device and its owner.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::human::{When, person};
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted};
use super::signed_in::SignedIn;
use crate::admin::devices::{checked_id, owners, revoke_one, view};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::store::DeviceRecord;
use latchkey_protocol::api::DeviceStatus;

/// One row of the table.
pub struct DeviceRow {
    pub id: String,
    pub label: String,
    /// Name and email of the member it was paired for, if any.
    pub owner: Option<String>,
    pub browser: String,
    /// "Online", "Offline", "Revoked", "Expired".
    pub status: &'static str,
    pub last_seen: Option<When>,
    pub expires: When,
    pub sessions: usize,
    pub revocable: bool,
}

#[derive(Template)]
#[template(path = "console/devices.html")]
struct DevicesPage {
    frame: Option<Frame>,
    admin: bool,
    rows: Vec<DeviceRow>,
}

#[derive(Template)]
#[template(path = "console/revoke.html")]
struct RevokePage {
    frame: Option<Frame>,
    row: DeviceRow,
}

/// The devices `me` may see: the team's for an admin, their own for a member.
pub(super) async fn visible(
    state: &AppState,
    me: &SignedIn,
) -> Result<Vec<DeviceRecord>, ApiError> {
    let all = state.store.list_devices(&me.principal.tenant_id).await?;
    if me.is_admin() {
        return Ok(all);
    }
    let mine = me.principal.member_id.as_deref();
    Ok(all
        .into_iter()
        .filter(|d| mine.is_some() && d.owner_id.as_deref() == mine)
        .collect())
}

async fn rows(
    state: &AppState,
    me: &SignedIn,
    devices: Vec<DeviceRecord>,
) -> Result<Vec<DeviceRow>, ApiError> {
    let tenant = &me.principal.tenant_id;
    let owners = owners(state, tenant, &devices).await?;
    let now = state.clock.now_ms();
    Ok(devices
        .into_iter()
        .map(|d| {
            let expires = d.expires_at;
            let sessions = state.sessions.count_on_device(&d.id);
            let v = view(state, d, &owners);
            let last_seen_ms = v
                .last_seen_at
                .as_deref()
                .and_then(crate::clock::parse_rfc3339);
            let status = match v.status {
                DeviceStatus::Revoked => "Revoked",
                DeviceStatus::Expired => "Expired",
                DeviceStatus::Active if v.online => "Online",
                DeviceStatus::Active => "Offline",
            };
            DeviceRow {
                owner: v.owner.map(|o| person(&o.display_name, &o.email)),
                browser: match (v.browser_name, v.browser_version) {
                    (Some(n), Some(ver)) => format!("{n} {ver}"),
                    (Some(n), None) => n,
                    _ => "unknown browser".into(),
                },
                label: v.label,
                status,
                last_seen: last_seen_ms.map(|ms| When::of(now, ms)),
                expires: When::of(now, expires),
                sessions,
                revocable: v.status == DeviceStatus::Active,
                id: v.id,
            }
        })
        .collect())
}

/// The rows of every device `me` may see, as the page and its live updates show them.
pub async fn device_rows(state: &AppState, me: &SignedIn) -> Result<Vec<DeviceRow>, ApiError> {
    let devices = visible(state, me).await?;
    rows(state, me, devices).await
}

pub async fn list(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    let rows = device_rows(&state, &me).await?;
    Ok(render(
        StatusCode::OK,
        &DevicesPage {
            frame: Some(me.frame()),
            admin: me.is_admin(),
            rows,
        },
    ))
}

/// The device `id` if `me` may see it; otherwise `not_found`, exactly as for an
/// unknown id.
pub(super) async fn one(
    state: &AppState,
    me: &SignedIn,
    id: &str,
) -> Result<DeviceRecord, ApiError> {
    let id = checked_id(id)?;
    let d = state
        .store
        .device(&me.principal.tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("device"))?;
    let mine = me.principal.member_id.is_some() && d.owner_id == me.principal.member_id;
    if me.is_admin() || mine {
        Ok(d)
    } else {
        Err(ApiError::not_found("device"))
    }
}

pub async fn confirm_revoke(
    State(state): State<AppState>,
    me: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let d = one(&state, &me, &id).await?;
    let row = rows(&state, &me, vec![d])
        .await?
        .pop()
        .ok_or_else(|| ApiError::not_found("device"))?;
    Ok(render(
        StatusCode::OK,
        &RevokePage {
            frame: Some(me.frame()),
            row,
        },
    ))
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let d = one(&state, &me, &id).await?;
    revoke_one(&state, &me.principal, &d.id).await?;
    Ok(Redirect::to("/console/devices").into_response())
}
