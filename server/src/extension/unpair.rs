//! `DELETE /extension/device` (Latchkey's addition, docs/protocol.md "Latchkey's
//! additions"): the browser's person presses "Forget this server" in our
//! extension, and the device ends on the server too, not only in the browser.
//! Authenticated by the device's current credential, like a renewal; the device
//! is revoked exactly as an admin revokes it (its socket closes with 4001), and
//! the trail says its owner removed it (`device.unpair`, actor the device).
//!
//! Every refusal is the authorize endpoint's: a credential no live device holds
//! answers 401 and is charged to the client's address, so the endpoint is no
//! oracle for guessing credentials.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use latchkey_protocol::authorize::is_token_shaped;
use tracing::info;

use super::reply::Refusal;
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::secret;
use crate::rate_limits::client_ip::client_ip;

#[utoipa::path(
    delete,
    operation_id = "extension_unpair",
    path = "/extension/device",
    tag = "extension",
    summary = "Unpair this browser",
    description = "`Authorization: Bearer <device token>`: the device revokes itself.",
    security(()),
    responses(
        (status = 204, description = "Unpaired; the device token no longer works."),
        (status = 400, description = "`invalid_request` / `invalid_upgrade`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 401, description = "`invalid_authorization`: unknown, used, expired or revoked credential.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 429, description = "`rate_limited`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 503, description = "`authorization_store_busy` or `connection_capacity_reached`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
    ),
)]
pub async fn unpair(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match unpair_inner(&state, peer, &headers).await {
        Ok(()) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(refusal) => refusal.into_response(),
    }
}

async fn unpair_inner(
    state: &AppState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let client = client_ip(peer, headers, &state.config.trusted_proxies);
    let charged = |refusal: Refusal| match state.authorize_limiter.check(client) {
        Ok(()) => refusal,
        Err(_) => Refusal::RATE_LIMITED,
    };
    let Some(credential) = super::authorize::bearer(headers).filter(|c| is_token_shaped(c)) else {
        return Err(charged(Refusal::UNAUTHORIZED));
    };
    let hash = secret::hash(credential);
    let device = state
        .store
        .device_by_token_hash(&hash)
        .await
        .map_err(|_| Refusal::STORE_BUSY)?;
    let now = state.clock.now_ms();
    let Some(device) = device.filter(|d| secret::ct_eq(&d.token_hash, &hash) && d.is_live(now))
    else {
        return Err(charged(Refusal::UNAUTHORIZED));
    };
    let revoked =
        crate::devices::revocation::revoke_and_close(state, &device.tenant_id, &device.id)
            .await
            .map_err(|_| Refusal::STORE_BUSY)?;
    let Some((_, was_online)) = revoked else {
        return Err(Refusal::UNAUTHORIZED);
    };
    info!(tenant = %device.tenant_id, device = %device.id, "device forgotten by its owner");
    state
        .audit
        .record(Event::by_device(
            &device.tenant_id,
            &device.id,
            action::DEVICE_UNPAIR,
            "ok",
            Some(
                if was_online {
                    "forgotten by its owner in the extension; live socket closed"
                } else {
                    "forgotten by its owner in the extension"
                }
                .to_string(),
            ),
        ))
        .await;
    Ok(())
}
