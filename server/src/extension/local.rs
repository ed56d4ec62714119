//! Local mode (design §6): on a loopback-only gateway, an extension connecting
//! from this machine with an extension Origin is accepted without pairing, as a
//! local BrowserSkill daemon accepts it on `ws://127.0.0.1:52800`. Each extension id
//! becomes one device of the default tenant, listed and revocable like any other.

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};

use super::reply::Refusal;
use crate::app::AppState;
use crate::auth::bootstrap::DEFAULT_TENANT;
use crate::auth::secret;
use crate::store::{DeviceRecord, NewDevice};

/// The device id of a local extension: stable per extension id.
pub fn local_device_id(extension_id: &str) -> String {
    let digest = Sha256::digest(format!("latchkey-local:{extension_id}").as_bytes());
    hex::encode(&digest[..16])
}

/// The device for a local connection (Origin already checked), or a refusal.
pub async fn local_device(
    state: &AppState,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<DeviceRecord, Refusal> {
    if !state.config.local || !peer.ip().to_canonical().is_loopback() {
        return Err(Refusal::UNAUTHORIZED);
    }
    let extension_id = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .and_then(|o| o.strip_prefix("chrome-extension://"))
        .ok_or(Refusal::UNAUTHORIZED)?;
    let tenant = state
        .store
        .tenant_by_name(DEFAULT_TENANT)
        .await
        .map_err(|_| Refusal::STORE_BUSY)?
        .ok_or(Refusal::UNAUTHORIZED)?;
    let now = state.clock.now_ms();
    let ms = |secs: u64| i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let limits = &state.config.limits;
    let device = NewDevice {
        id: local_device_id(extension_id),
        label: "Local browser".to_string(),
        // No credential opens this device: local mode authenticates by place.
        token_hash: secret::hash(&secret::random_secret()),
        created_at: now,
        expires_at: now.saturating_add(ms(limits.device_ttl_secs)),
        renew_after: now.saturating_add(ms(limits.renew_after_secs)),
    };
    let record = state
        .store
        .ensure_local_device(&tenant.id, &device)
        .await
        .map_err(|_| Refusal::STORE_BUSY)?;
    if record.revoked_at.is_some() {
        return Err(Refusal::UNAUTHORIZED);
    }
    Ok(record)
}
