//! `POST /v1/delegations`, `GET /v1/delegations`, `DELETE /v1/delegations/{id}`
//! and `/.well-known/jwks.json` (docs/delegation.md). A delegation is never wider
//! than its delegator: each field it leaves out is the delegator's, and each it
//! names must fit inside the delegator's, or the mint is refused
//! `permission_denied` (`data.reason: "wider_than_delegator"`) naming the field.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use jsonwebtoken::{Algorithm, Header};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::delegation::{
    AUDIENCE, CreateDelegationRequest, DelegationClaims, DelegationList, DelegationRevoked,
    DelegationScope, DelegationView, MAX_CHAIN, MAX_TTL_SECS,
};
use latchkey_protocol::policy::{Capability, sites};
use serde_json::{Value, json};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::principal::{AgentPrincipal, Principal};
use crate::clock::rfc3339;
use crate::store::DelegationRecord;

fn wider(field: &str, message: impl Into<String>) -> ApiError {
    let mut e = ApiError::new(ErrorCode::PermissionDenied, message);
    e.data = Some(json!({ "field": field, "reason": "wider_than_delegator" }));
    e
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::at_field(ErrorCode::InvalidParams, field, message)
}

/// Whether every host `child` names is named by `parent` too.
fn covered(child: &str, parent: &str) -> bool {
    if parent == "*" || child == parent {
        return true;
    }
    match parent.strip_prefix("*.") {
        Some(p) => {
            let host = child.strip_prefix("*.").unwrap_or(child);
            host.len() > p.len() && host.ends_with(p) && host[..host.len() - p.len()].ends_with('.')
        }
        None => false,
    }
}

/// The scope the new delegation gets: the request's, each field checked to fit
/// the delegator's, the delegator's wherever the request is silent.
async fn narrowed(
    state: &AppState,
    p: &Principal,
    asked: DelegationScope,
) -> Result<DelegationScope, ApiError> {
    let parent = p
        .delegation
        .as_ref()
        .map(|d| d.scope.clone())
        .unwrap_or_default();
    let browsers = match (asked.browsers, parent.browsers) {
        (None, inherited) => inherited,
        (Some(list), limit) => {
            for (i, id) in list.iter().enumerate() {
                let field = format!("browsers[{i}]");
                if limit.as_ref().is_some_and(|l| !l.contains(id)) {
                    return Err(wider(
                        &field,
                        format!("{id} is not among the delegator's browsers"),
                    ));
                }
                let known = latchkey_protocol::authorize::is_device_id(id)
                    && state.store.device(&p.tenant_id, id).await?.is_some();
                if !known {
                    return Err(invalid(&field, "no such browser"));
                }
            }
            Some(list)
        }
    };
    let capabilities = match (asked.capabilities, parent.capabilities) {
        (None, inherited) => inherited,
        (Some(list), limit) => {
            if let Some(c) = list.iter().find(|c| {
                limit
                    .as_ref()
                    .is_some_and(|l: &Vec<Capability>| !l.contains(c))
            }) {
                return Err(wider(
                    "capabilities",
                    format!("{} is not the delegator's to give", c.as_str()),
                ));
            }
            Some(list)
        }
    };
    let sites = match (asked.sites, parent.sites) {
        (None, inherited) => inherited,
        (Some(list), limit) => {
            let mut out = Vec::with_capacity(list.len());
            for (i, raw) in list.iter().enumerate() {
                let field = format!("sites[{i}]");
                let pattern =
                    sites::normalize(raw).map_err(|m| invalid(&field, format!("{field}: {m}")))?;
                if limit
                    .as_ref()
                    .is_some_and(|l| !l.iter().any(|q| covered(&pattern, q)))
                {
                    return Err(wider(
                        &field,
                        format!("{pattern} reaches beyond the delegator's sites"),
                    ));
                }
                out.push(pattern);
            }
            if out.len() > latchkey_protocol::policy::MAX_SITE_PATTERNS {
                return Err(invalid("sites", "at most 100 patterns"));
            }
            Some(out)
        }
    };
    let session_id = match (asked.session_id, parent.session_id) {
        (None, inherited) => inherited,
        (Some(id), Some(limit)) if id != limit => {
            return Err(wider("session_id", "the delegator acts in another session"));
        }
        (Some(id), Some(_)) => Some(id),
        (Some(id), None) => {
            // One of the delegator's own sessions; anyone else's is unknown.
            state
                .sessions
                .get_owned(&p.tenant_id, &p.token_id, &id)
                .ok_or_else(|| {
                    ApiError::at_field(ErrorCode::NotFound, "session_id", "no such session")
                })?;
            Some(id)
        }
    };
    Ok(DelegationScope {
        browsers,
        sites,
        capabilities,
        session_id,
    })
}

fn view(d: &DelegationRecord, token: Option<String>) -> DelegationView {
    DelegationView {
        id: d.id.clone(),
        name: d.name.clone(),
        chain: d.chain.split(' ').map(String::from).collect(),
        scope: serde_json::from_str(&d.scope).unwrap_or_default(),
        created_at: rfc3339(d.created_at),
        expires_at: rfc3339(d.expires_at),
        revoked_at: d.revoked_at.map(rfc3339),
        token,
    }
}

/// `POST /v1/delegations`: mint a narrower, shorter-lived token from the caller's own.
#[utoipa::path(
    post,
    operation_id = "delegations_create",
    path = "/v1/delegations",
    tag = "delegations",
    summary = "Mint a delegation token",
    request_body = CreateDelegationRequest,
    responses((status = 201, description = "The delegation; its token is shown only here.", body = DelegationView), crate::openapi::refusals::Delegate),
)]
pub async fn create(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    ApiJson(body): ApiJson<CreateDelegationRequest>,
) -> Result<(StatusCode, Json<DelegationView>), ApiError> {
    if !(1..=MAX_TTL_SECS).contains(&body.ttl_secs) {
        return Err(invalid(
            "ttl_secs",
            format!("ttl_secs must be 1 … {MAX_TTL_SECS}"),
        ));
    }
    let name = match body.name.as_deref() {
        Some(n) => {
            crate::admin::clean_name(n, "name", latchkey_protocol::text::MAX_TOKEN_NAME_CHARS)?
        }
        None => "delegation".to_string(),
    };
    let now = state.clock.now_ms();
    let expires_at = now.saturating_add(i64::try_from(body.ttl_secs * 1_000).unwrap_or(i64::MAX));
    // Seconds, as the token carries them: no longer than the delegator's own.
    let expires_at = expires_at - expires_at.rem_euclid(1_000);
    if p.expires_at.is_some_and(|limit| expires_at > limit) {
        return Err(wider(
            "ttl_secs",
            "longer than the delegator's own lifetime",
        ));
    }
    let scope = narrowed(&state, &p, body.scope).await?;
    let id = crate::ids::DELEGATION.mint();
    let mut chain = match &p.delegation {
        Some(d) => d.chain.clone(),
        None => vec![p.token_id.clone()],
    };
    chain.push(id.clone());
    if chain.len() > MAX_CHAIN {
        return Err(invalid(
            "chain",
            format!("a chain is at most {MAX_CHAIN} long"),
        ));
    }
    let record = DelegationRecord {
        id: id.clone(),
        tenant_id: p.tenant_id.clone(),
        root_token_id: chain[0].clone(),
        chain: chain.join(" "),
        name: name.clone(),
        scope: serde_json::to_string(&scope)
            .map_err(|_| ApiError::new(ErrorCode::Internal, "scope"))?,
        created_at: now,
        expires_at,
        revoked_at: None,
    };
    let (kid, key) = state.signing_keys.signer(state.store.as_ref(), now).await?;
    let claims = DelegationClaims {
        iss: state.public_base.to_string(),
        aud: AUDIENCE.into(),
        sub: id.clone(),
        jti: id.clone(),
        tid: p.tenant_id.clone(),
        iat: now.div_euclid(1_000),
        nbf: now.div_euclid(1_000),
        exp: expires_at.div_euclid(1_000),
        chain,
        name,
        scope,
    };
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid);
    let token = jsonwebtoken::encode(&header, &claims, &key)
        .map_err(|_| ApiError::new(ErrorCode::Internal, "signing the delegation failed"))?;
    state.store.insert_delegation(&record).await?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::DELEGATION_CREATE,
            target: format!("delegation:{id}"),
            outcome: "ok",
            detail: Some(format!("ttl {}s", body.ttl_secs)),
        })
        .await;
    Ok((StatusCode::CREATED, Json(view(&record, Some(token)))))
}

/// `GET /v1/delegations`: those the caller minted, and every one below them.
#[utoipa::path(
    get,
    operation_id = "delegations_list",
    path = "/v1/delegations",
    tag = "delegations",
    summary = "List my delegations",
    responses((status = 200, description = "Those the caller minted, and every one below them.", body = DelegationList), crate::openapi::refusals::AgentRead),
)]
pub async fn list(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
) -> Result<Json<DelegationList>, ApiError> {
    let rows = state
        .store
        .delegations_under(&p.tenant_id, &p.token_id)
        .await?;
    Ok(Json(DelegationList {
        delegations: rows
            .iter()
            .filter(|d| d.id != p.token_id)
            .map(|d| view(d, None))
            .collect(),
    }))
}

/// End what the delegations minted from API token `token_id` hold on every replica
/// (the token was revoked: its delegations can no longer authenticate either).
pub async fn end_under_token(state: &AppState, tenant_id: &str, token_id: &str) {
    match state.store.delegations_under(tenant_id, token_id).await {
        Ok(rows) => {
            let ids: Vec<String> = rows.into_iter().map(|d| d.id).collect();
            end_leases(state, tenant_id, &ids);
        }
        Err(e) => {
            tracing::warn!(error = %e, "listing a revoked token's delegations failed; their requests are refused, their sessions end at expiry")
        }
    }
}

/// End every lease of the delegations `ids`, here and on every other replica.
pub fn end_leases(state: &AppState, tenant_id: &str, ids: &[String]) {
    crate::auth::revoked::end_revoked(state, tenant_id, ids);
}

/// `DELETE /v1/delegations/{id}`: revoke one the caller minted (or any below it),
/// and every delegation below it; what they hold ends at once. An admin may
/// revoke any of the team's.
#[utoipa::path(
    delete,
    operation_id = "delegations_revoke",
    path = "/v1/delegations/{id}",
    tag = "delegations",
    summary = "Revoke a delegation",
    params(("id" = String, Path, description = "Delegation id")),
    responses((status = 200, description = "The delegation and every one below it, revoked.", body = DelegationRevoked), crate::openapi::refusals::ReadOne),
)]
pub async fn revoke(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> Result<Json<DelegationRevoked>, ApiError> {
    Ok(Json(revoke_one(&state, &p, id).await?))
}

/// Revoke delegation `id` (if `p` minted it or one above it, or is an admin)
/// and every one below it, ending what they hold; audited. Also the console's.
pub(crate) async fn revoke_one(
    state: &AppState,
    p: &Principal,
    id: String,
) -> Result<DelegationRevoked, ApiError> {
    if !crate::ids::DELEGATION.holds(&id) {
        return Err(ApiError::not_found("delegation"));
    }
    let record = state.store.delegation(&p.tenant_id, &id).await?;
    let mine = record.as_ref().is_some_and(|d| {
        p.role == latchkey_protocol::api::Role::Admin
            || d.chain.split(' ').any(|link| link == p.token_id) && d.id != p.token_id
    });
    if !mine {
        return Err(ApiError::not_found("delegation"));
    }
    let now = state.clock.now_ms();
    let revoked = state
        .store
        .revoke_delegation(&p.tenant_id, &id, now)
        .await?;
    end_leases(state, &p.tenant_id, &revoked);
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::DELEGATION_REVOKE,
            target: format!("delegation:{id}"),
            outcome: "ok",
            detail: Some(format!("{} revoked", revoked.len())),
        })
        .await;
    Ok(DelegationRevoked { id, revoked })
}

/// `/.well-known/jwks.json`: the public keys delegation tokens are verified with.
#[utoipa::path(
    get,
    operation_id = "delegations_jwks",
    path = "/.well-known/jwks.json",
    tag = "delegations",
    summary = "Delegation verification keys",
    security(()),
    responses((status = 200, description = "A JWK set: the public keys delegation tokens are verified with.", body = Object), crate::openapi::refusals::Public),
)]
pub async fn jwks(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let _ = state
        .signing_keys
        .signer(state.store.as_ref(), state.clock.now_ms())
        .await?;
    Ok(Json(state.signing_keys.jwks()))
}

#[cfg(test)]
mod tests {
    use super::covered;

    #[test]
    fn a_child_pattern_is_covered_only_by_a_parent_that_names_all_its_hosts() {
        assert!(covered("a.shop.test", "*.shop.test"));
        assert!(covered("*.a.shop.test", "*.shop.test"));
        assert!(covered("*.shop.test", "*.shop.test"));
        assert!(covered("anything.test", "*"));
        assert!(covered("shop.test", "shop.test"));
        assert!(
            !covered("shop.test", "*.shop.test"),
            "the parent host itself"
        );
        assert!(!covered("*.shop.test", "shop.test"));
        assert!(!covered("badshop.test", "*.shop.test"));
        assert!(!covered("*", "*.shop.test"));
        assert!(!covered("a.shop.test.evil", "*.shop.test"));
    }
}
