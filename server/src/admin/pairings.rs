//! `POST /v1/admin/pairings`: a one-time link `wss://HOST/extension#SECRET`, made for
//! a member of the team (whose browser it will pair) or for no one.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{
    CreatePairingRequest, MemberRef, PairingCreated, PairingList, PendingPairingView,
};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::principal::{AdminPrincipal, Principal};
use crate::auth::secret;
use crate::clock::rfc3339;
use crate::store::{NewPairing, PairingInsert, PairingQuota, PendingPairingRecord};

#[utoipa::path(
    post,
    operation_id = "pairings_create",
    path = "/v1/admin/pairings",
    tag = "pairings",
    summary = "Make a one-time pairing link",
    request_body = CreatePairingRequest,
    responses((status = 201, description = "The link; its secret is shown only here.", body = PairingCreated), crate::openapi::refusals::Create),
)]
pub async fn create(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    ApiJson(body): ApiJson<CreatePairingRequest>,
) -> Result<(StatusCode, Json<PairingCreated>), ApiError> {
    let created = create_link(&state, &p, body.label, body.ttl_secs, body.member_id).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// A one-time link in `p`'s tenant, for the member `owner` (whose browser it will
/// pair) or for no one; audited as `p`'s act. Also how a member makes a link for a
/// browser of their own (`/v1/me`).
pub(crate) async fn create_link(
    state: &AppState,
    p: &Principal,
    label: Option<String>,
    ttl_secs: Option<u64>,
    owner: Option<String>,
) -> Result<PairingCreated, ApiError> {
    let limits = &state.config.limits;
    let ttl = ttl_secs.unwrap_or(limits.pairing_ttl_secs);
    if ttl == 0 || ttl > limits.pairing_ttl_max_secs {
        return Err(ApiError::new(
            ErrorCode::InvalidParams,
            format!("ttl_secs must be 1..={}", limits.pairing_ttl_max_secs),
        ));
    }
    let label = label
        .as_deref()
        .map(|raw| super::clean_name(raw, "label", latchkey_protocol::text::MAX_LABEL_CHARS))
        .transpose()?;
    if owner
        .as_deref()
        .is_some_and(|id| !crate::ids::MEMBER.holds(id))
    {
        return Err(ApiError::not_found("member"));
    }
    let now = state.clock.now_ms();
    let secret_text = secret::random_secret();
    let pairing = NewPairing {
        id: crate::ids::PAIRING.mint(),
        tenant_id: p.tenant_id.clone(),
        secret_hash: secret::hash(&secret_text),
        label,
        created_by: p.token_name.clone(),
        created_at: now,
        expires_at: now.saturating_add(i64::try_from(ttl * 1000).unwrap_or(i64::MAX)),
        owner_id: owner,
    };
    let quota = PairingQuota {
        per_tenant: i64::from(limits.max_unused_pairings),
        per_member: i64::from(limits.max_unused_pairings_per_member),
    };
    match state.store.insert_pairing(&pairing, now, quota).await? {
        PairingInsert::Inserted => {}
        PairingInsert::NoSuchMember => return Err(ApiError::not_found("member")),
        PairingInsert::QuotaReached => {
            return Err(ApiError::new(
                ErrorCode::LimitReached,
                format!(
                    "the team already has {} unused pairing links; void some (`latchkey admin pairings`) or let them expire",
                    quota.per_tenant
                ),
            ));
        }
        PairingInsert::MemberQuotaReached => {
            return Err(ApiError::new(
                ErrorCode::LimitReached,
                format!(
                    "this member already has {} unused pairing links; use or let one expire first",
                    quota.per_member
                ),
            ));
        }
    }
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::PAIRING_CREATE,
            target: format!("pairing:{}", pairing.id),
            outcome: "ok",
            detail: Some(match &pairing.owner_id {
                Some(member) => format!("ttl {ttl}s, for member:{member}"),
                None => format!("ttl {ttl}s"),
            }),
        })
        .await;
    Ok(PairingCreated {
        id: pairing.id,
        link: format!("{}/extension#{secret_text}", state.public_base),
        expires_at: rfc3339(pairing.expires_at),
    })
}

/// `GET /v1/admin/pairings`: the links that can still pair a browser, with the
/// member each is for, so an admin sees what is outstanding and voids what should
/// not be.
#[utoipa::path(
    get,
    operation_id = "pairings_list",
    path = "/v1/admin/pairings",
    tag = "pairings",
    summary = "List unused pairing links",
    responses((status = 200, description = "Unused, unexpired links, newest first.", body = PairingList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<PairingList>, ApiError> {
    let now = state.clock.now_ms();
    let pending = state.store.pending_pairings(&p.tenant_id, now).await?;
    let wanted = pending.iter().map(|l| l.owner_id.as_deref());
    let members = super::members::references(&state, &p.tenant_id, wanted).await?;
    Ok(Json(PairingList {
        pairings: pending.into_iter().map(|r| view(r, &members)).collect(),
    }))
}

/// `DELETE /v1/admin/pairings/{id}`: void one pending link; it can never pair a
/// browser afterwards. A used, voided, expired, foreign or unknown id is `not_found`.
#[utoipa::path(
    delete,
    operation_id = "pairings_void",
    path = "/v1/admin/pairings/{id}",
    tag = "pairings",
    summary = "Void a pairing link",
    params(("id" = String, Path, description = "Pairing link id")),
    responses((status = 200, description = "The voided link.", body = PendingPairingView), crate::openapi::refusals::ReadOne),
)]
pub async fn void(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<PendingPairingView>, ApiError> {
    let voided = void_one(&state, &p, &id).await?;
    let wanted = std::iter::once(voided.owner_id.as_deref());
    let members = super::members::references(&state, &p.tenant_id, wanted).await?;
    Ok(Json(view(voided, &members)))
}

/// Void the pending link `id` of `p`'s tenant; audited as `p`'s act. A used,
/// voided, expired, foreign or unknown id is `not_found`. Also the console's.
pub(crate) async fn void_one(
    state: &AppState,
    p: &Principal,
    id: &str,
) -> Result<PendingPairingRecord, ApiError> {
    if !crate::ids::PAIRING.holds(id) {
        return Err(ApiError::not_found("pending pairing link"));
    }
    let now = state.clock.now_ms();
    let voided = state
        .store
        .void_pairing(&p.tenant_id, id, now)
        .await?
        .ok_or_else(|| ApiError::not_found("pending pairing link"))?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::PAIRING_VOID,
            target: format!("pairing:{}", voided.id),
            outcome: "ok",
            detail: None,
        })
        .await;
    Ok(voided)
}

fn view(r: PendingPairingRecord, members: &HashMap<String, MemberRef>) -> PendingPairingView {
    PendingPairingView {
        member: r.owner_id.as_ref().and_then(|id| members.get(id).cloned()),
        id: r.id,
        label: r.label,
        created_by: r.created_by,
        created_at: rfc3339(r.created_at),
        expires_at: rfc3339(r.expires_at),
    }
}
