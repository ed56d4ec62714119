//! `POST /extension/authorize` (docs/protocol.md, "Pairing and renewal"–2.3): redeem a pairing
//! secret, or rotate a device token with exact-retry idempotency. Every change is committed
//! before the reply, so a lost reply can be retried exactly, even across a restart.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Json;
use axum::body::to_bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use latchkey_protocol::authorize::{
    AuthorizeAction, AuthorizeGrant, AuthorizeRequest, MAX_BODY_BYTES, clean_label,
    is_pairing_secret_shaped, is_token_shaped,
};
use tracing::{debug, info};

use super::reply::Refusal;
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::secret;
use crate::clock::rfc3339;
use crate::rate_limits::client_ip::client_ip;
use crate::rate_limits::cluster_charges::Refused;
use crate::store::{DeviceRecord, GrantTimes, NewDevice, RotateOutcome, StoreError};
use crate::telemetry::metrics as telemetry;
use latchkey_protocol::authorize::AuthorizeErrorTag;

/// The label used when the extension sends none.
const DEFAULT_DEVICE_LABEL: &str = "Browser";

/// Exactly one `Authorization: Bearer <credential>`.
pub(super) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let credential = value.to_str().ok()?.strip_prefix("Bearer ")?;
    (!credential.is_empty() && !credential.contains([' ', ','])).then_some(credential)
}

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn store_refusal(e: &StoreError) -> Refusal {
    match e {
        // A credential colliding with an existing one can only be a replay or an attack.
        StoreError::Conflict(_) => Refusal::UNAUTHORIZED,
        other => {
            metrics::counter!(telemetry::STORE_ERRORS, "kind" => "authorize").increment(1);
            tracing::warn!(error = %other, "store error during authorize");
            Refusal::STORE_BUSY
        }
    }
}

#[utoipa::path(
    post,
    operation_id = "extension_authorize",
    path = "/extension/authorize",
    tag = "extension",
    summary = "Pair a browser, or renew its device token",
    description = "`Authorization: Bearer <pairing secret or device token>`; the body names the next token. Refusals are `{\"error\": <tag>}` as the extension contract spells them (docs/protocol.md, \"Pairing and renewal\").",
    security(()),
    request_body = latchkey_protocol::authorize::AuthorizeRequest,
    responses(
        (status = 200, description = "The device grant.", body = latchkey_protocol::authorize::AuthorizeGrant),
        (status = 400, description = "`invalid_request` / `invalid_upgrade`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 401, description = "`invalid_authorization`: unknown, used, expired or revoked credential.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 429, description = "`rate_limited`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 503, description = "`authorization_store_busy` or `connection_capacity_reached`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
    ),
)]
pub async fn authorize(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let span = tracing::info_span!(
        "authorize",
        action = tracing::field::Empty,
        outcome = tracing::field::Empty
    );
    let result =
        tracing::Instrument::instrument(authorize_inner(&state, peer, request), span.clone()).await;
    span.record("outcome", if result.is_ok() { "ok" } else { "refused" });
    match result {
        Ok(grant) => {
            metrics::counter!(telemetry::AUTHORIZE, "outcome" => "ok").increment(1);
            let mut response = Json(grant).into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(refusal) => {
            debug!(status = refusal.status.as_u16(), "authorize refused");
            let outcome = refusal.tag.as_str();
            metrics::counter!(telemetry::AUTHORIZE, "outcome" => outcome).increment(1);
            if refusal.tag == AuthorizeErrorTag::RateLimited {
                telemetry::refused("rate_limited");
            }
            refusal.into_response()
        }
    }
}

async fn authorize_inner(
    state: &AppState,
    peer: SocketAddr,
    request: Request,
) -> Result<AuthorizeGrant, Refusal> {
    let client = client_ip(peer, request.headers(), &state.config.trusted_proxies);
    // Whatever is not a renewal of a known device is charged to the client's
    // address (and the node, and in cluster mode the cluster): a refusal here
    // still spends the budget, and a spent budget answers 429 instead.
    let charged = |refusal: Refusal| async move {
        match spend(state, client).await {
            Ok(()) => refusal,
            Err(r) => r,
        }
    };
    if request.uri().query().is_some() {
        return Err(charged(Refusal::UNAUTHORIZED).await);
    }
    let Some(credential) = bearer(request.headers()).map(str::to_string) else {
        return Err(charged(Refusal::UNAUTHORIZED).await);
    };
    if !is_json(&request) {
        return Err(charged(Refusal::BAD_REQUEST).await);
    }
    let body_timeout = Duration::from_millis(state.config.limits.body_timeout_ms);
    let body =
        match tokio::time::timeout(body_timeout, to_bytes(request.into_body(), MAX_BODY_BYTES))
            .await
        {
            Ok(Ok(body)) => body,
            _ => return Err(charged(Refusal::BAD_REQUEST).await),
        };
    let body = match serde_json::from_slice::<AuthorizeRequest>(&body) {
        Ok(body) if is_token_shaped(&body.next_token) => body,
        _ => return Err(charged(Refusal::BAD_REQUEST).await),
    };
    let action = match body.action {
        AuthorizeAction::Pair => "pair",
        AuthorizeAction::Renew => "renew",
    };
    tracing::Span::current().record("action", action);
    match body.action {
        AuthorizeAction::Pair => {
            spend(state, client).await?;
            pair(state, &credential, &body, client).await
        }
        AuthorizeAction::Renew => {
            // Whose token is this? A device's renewal is charged to that device's
            // own budget; anything else is a guess, charged like a pairing attempt.
            let known = if is_token_shaped(&credential) {
                state
                    .store
                    .device_for_bearer(&secret::hash(&credential))
                    .await
                    .map_err(|e| store_refusal(&e))?
            } else {
                None
            };
            match known {
                None => Err(charged(Refusal::UNAUTHORIZED).await),
                Some((_, device_id)) if state.renewal_limiter.check(&device_id).is_err() => {
                    Err(Refusal::RATE_LIMITED)
                }
                Some(_) => renew(state, &credential, &body).await,
            }
        }
    }
}

/// Spend one of `client`'s pairing attempts: on this node's limiter, then in
/// cluster mode on the cluster's count (docs/cluster.md, "Rate limits").
async fn spend(state: &AppState, client: std::net::IpAddr) -> Result<(), Refusal> {
    if state.authorize_limiter.check(client).is_err() {
        return Err(Refusal::RATE_LIMITED);
    }
    match crate::rate_limits::cluster_charges::charge(state, client).await {
        Ok(()) => Ok(()),
        Err(Refused::OverLimit) => Err(Refusal::RATE_LIMITED),
        Err(Refused::Store(e)) => Err(store_refusal(&e)),
    }
}

fn grant(state: &AppState, d: &DeviceRecord) -> AuthorizeGrant {
    AuthorizeGrant {
        device_id: d.id.clone(),
        expires_at: rfc3339(d.expires_at),
        renew_after: rfc3339(d.renew_after),
        service_name: Some(state.config.service_name.clone()),
    }
}

fn grant_times(state: &AppState) -> GrantTimes {
    let now = state.clock.now_ms();
    let ms = |secs: u64| i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    GrantTimes {
        now,
        expires_at: now.saturating_add(ms(state.config.limits.device_ttl_secs)),
        renew_after: now.saturating_add(ms(state.config.limits.renew_after_secs)),
    }
}

async fn pair(
    state: &AppState,
    secret_text: &str,
    body: &AuthorizeRequest,
    client: std::net::IpAddr,
) -> Result<AuthorizeGrant, Refusal> {
    if !is_pairing_secret_shaped(secret_text) {
        return Err(Refusal::UNAUTHORIZED);
    }
    let times = grant_times(state);
    let label = body
        .label
        .as_deref()
        .map(clean_label)
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| DEFAULT_DEVICE_LABEL.to_string());
    let new_device = NewDevice {
        id: secret::random_hex(16),
        label,
        token_hash: secret::hash(&body.next_token),
        created_at: times.now,
        expires_at: times.expires_at,
        renew_after: times.renew_after,
    };
    let device = state
        .store
        .redeem_pairing(&secret::hash(secret_text), &new_device)
        .await
        .map_err(|e| store_refusal(&e))?
        .ok_or(Refusal::UNAUTHORIZED)?;
    crate::failpoint::hit("authorize.after_commit");
    info!(tenant = %device.tenant_id, device = %device.id, "device paired");
    state
        .audit
        .record(Event::by_device(
            &device.tenant_id,
            &device.id,
            action::DEVICE_PAIR,
            "ok",
            Some(format!(
                "from {client}; pairing created by {}",
                device.created_by
            )),
        ))
        .await;
    Ok(grant(state, &device))
}

async fn renew(
    state: &AppState,
    current: &str,
    body: &AuthorizeRequest,
) -> Result<AuthorizeGrant, Refusal> {
    if !is_token_shaped(current) || secret::ct_eq(current, &body.next_token) {
        return Err(Refusal::UNAUTHORIZED);
    }
    let outcome = state
        .store
        .rotate_device_token(
            &secret::hash(current),
            &secret::hash(&body.next_token),
            grant_times(state),
        )
        .await
        .map_err(|e| store_refusal(&e))?;
    let (device, act) = match outcome {
        RotateOutcome::Rotated(d) => {
            crate::failpoint::hit("authorize.after_commit");
            (d, action::DEVICE_RENEW)
        }
        RotateOutcome::ExactRetry(d) => (d, action::DEVICE_RENEW_RETRY),
        RotateOutcome::Refused(known) => {
            if let Some((tenant_id, device_id)) = known {
                info!(tenant = %tenant_id, device = %device_id, "renewal refused");
                state
                    .audit
                    .record(Event::by_device(
                        &tenant_id,
                        &device_id,
                        action::DEVICE_RENEW_REFUSED,
                        "refused",
                        Some(
                            "old or rotated credential, different successor, or grant ended".into(),
                        ),
                    ))
                    .await;
            }
            return Err(Refusal::UNAUTHORIZED);
        }
    };
    info!(tenant = %device.tenant_id, device = %device.id, action = act, "device renewed");
    state
        .audit
        .record(Event::by_device(
            &device.tenant_id,
            &device.id,
            act,
            "ok",
            None,
        ))
        .await;
    Ok(grant(state, &device))
}
