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
use crate::auth::principal::AdminPrincipal;
use crate::auth::secret;
use crate::clock::rfc3339;
use crate::store::{NewPairing, PairingInsert};

pub async fn create(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    ApiJson(body): ApiJson<CreatePairingRequest>,
) -> Result<(StatusCode, Json<PairingCreated>), ApiError> {
    let limits = &state.config.limits;
    let ttl = body.ttl_secs.unwrap_or(limits.pairing_ttl_secs);
    if ttl == 0 || ttl > limits.pairing_ttl_max_secs {
        return Err(ApiError::new(
            ErrorCode::InvalidParams,
            format!("ttl_secs must be 1..={}", limits.pairing_ttl_max_secs),
        ));
    }
    let label = body
        .label
        .as_deref()
        .map(|raw| super::clean_name(raw, "label", latchkey_protocol::text::MAX_LABEL_CHARS))
        .transpose()?;
    if body
        .member_id
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
        owner_id: body.member_id.clone(),
    };
    let max = i64::from(limits.max_unused_pairings);
    match state.store.insert_pairing(&pairing, now, max).await? {
        PairingInsert::Inserted => {}
        PairingInsert::NoSuchMember => return Err(ApiError::not_found("member")),
        PairingInsert::QuotaReached => {
            return Err(ApiError::new(
                ErrorCode::LimitReached,
                format!(
                    "the tenant already has {max} unused pairing links; let some expire or revoke all"
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
    Ok((
        StatusCode::CREATED,
        Json(PairingCreated {
            id: pairing.id,
            link: format!("{}/extension#{secret_text}", state.public_base),
            expires_at: rfc3339(pairing.expires_at),
        }),
    ))
}
