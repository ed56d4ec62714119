//! `POST /v1/admin/pairings`: a one-time link `wss://HOST/extension#SECRET`, made for
//! a member of the team (whose browser it will pair) or for no one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{CreatePairingRequest, PairingCreated};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::principal::{AdminPrincipal, Principal};
use crate::auth::secret;
use crate::clock::rfc3339;
use crate::store::{NewPairing, PairingInsert, PairingQuota};

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
        .is_some_and(|id| !super::members::is_member_id(id))
    {
        return Err(ApiError::not_found("member"));
    }
    let now = state.clock.now_ms();
    let secret_text = secret::random_secret();
    let pairing = NewPairing {
        id: format!("pair_{}", secret::random_hex(8)),
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
                    "the tenant already has {} unused pairing links; let some expire or revoke all",
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
