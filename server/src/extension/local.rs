//! Local mode (docs/configuration.md, "Local mode"): on a loopback-only gateway, an
//! extension connecting from this machine with an extension Origin is accepted
//! without pairing, as a local BrowserSkill daemon accepts it on
//! `ws://127.0.0.1:52800`.
//!
//! Each browser profile is one device of the default tenant: the extension id
//! together with the handshake's `instance_id` (every profile keeps its own), so two
//! profiles with the same extension are two devices and never replace each other.
//! Because the `instance_id` arrives only in the first frame, the upgrade is answered
//! first and the device is worked out from that frame. A revoked local device stays
//! revoked: its connection is closed with 4001 and nothing of it changes; an
//! operator who wants it back forgets it (`POST /v1/admin/devices/{id}/forget`) and
//! the next connection makes a new device.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::authorize::clean_label;
use latchkey_protocol::{CloseCode, ErrorFrame, Frame};
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::reply::Refusal;
use crate::app::AppState;
use crate::audit::{self, Event, action};
use crate::auth::bootstrap::DEFAULT_TENANT;
use crate::auth::secret;
use crate::devices::connection::Accepted;
use crate::devices::grant::Verdict;
use crate::devices::handshake;
use crate::store::NewDevice;
use crate::transport::ws_socket::WsSocket;
use crate::transport::ws_upgrade::{WsStream, WsUpgrade};

/// The label of a local device whose extension sends none.
const DEFAULT_LOCAL_LABEL: &str = "Local browser";

/// How often a refused connection of one revoked local device is written to the
/// audit trail at most.
const REFUSAL_AUDIT_EVERY: Duration = Duration::from_secs(60);

/// The device id of a local browser profile: stable per extension id and handshake
/// `instance_id`.
pub fn local_device_id(extension_id: &str, instance_id: &str) -> String {
    let digest = Sha256::digest(format!("latchkey-local:{extension_id}:{instance_id}").as_bytes());
    hex::encode(&digest[..16])
}

/// The key the replacement-loop guard counts a local extension's replacements
/// under: known at the upgrade, before the first frame names the profile.
fn guard_key(extension_id: &str) -> String {
    format!("local:{extension_id}")
}

/// `GET /` or `/extension` without credentials on a local gateway (the Origin is
/// already checked): accept a connection from this machine, then work out its device.
pub async fn upgrade(
    state: AppState,
    headers: &HeaderMap,
    peer: SocketAddr,
    ws: WsUpgrade,
) -> Response {
    if !state.config.local || !peer.ip().to_canonical().is_loopback() {
        return Refusal::UNAUTHORIZED.into_response();
    }
    let Some(extension_id) = headers
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .and_then(|o| o.strip_prefix("chrome-extension://"))
        .map(str::to_string)
    else {
        return Refusal::UNAUTHORIZED.into_response();
    };
    let limits = &state.config.limits;
    if let Some(wait) = state.registry.replacement_backoff(
        &guard_key(&extension_id),
        limits.max_replacements_per_minute,
    ) {
        crate::telemetry::metrics::refused("replacement_loop");
        return Refusal {
            retry_after_secs: Some(wait.as_secs().max(1)),
            ..Refusal::RATE_LIMITED
        }
        .into_response();
    }
    let peer = peer.ip().to_canonical();
    ws.accept(&state.clone(), None, move |socket| {
        serve(socket, state, extension_id, peer)
    })
}

/// Read the first frame, find or make the device it names, and run the connection.
async fn serve(mut socket: WsStream, state: AppState, extension_id: String, peer: IpAddr) {
    let wait = Duration::from_millis(state.config.limits.handshake_timeout_ms);
    let Ok(Some(first)) = tokio::time::timeout(wait, first_text(&mut socket)).await else {
        close(&mut socket, CloseCode::PolicyViolation).await;
        return;
    };
    let params = match handshake::judge(first.as_str()) {
        Ok((_, params)) => params,
        Err(refused) => {
            if let Some((id, error)) = refused.reply {
                let frame = Frame::Error(ErrorFrame { id, error }).to_text();
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    socket.send(Message::Text(frame.into())),
                )
                .await;
            }
            close(&mut socket, CloseCode::PolicyViolation).await;
            return;
        }
    };
    let grant_changes = state.registry.grant_changes();
    let device = match local_device(&state, &extension_id, &params.instance_id, &params.label).await
    {
        Ok(d) => d,
        Err(code) => {
            close(&mut socket, code).await;
            return;
        }
    };
    // The store just extended this profile's grant: only a revocation refuses it.
    let verdict = Verdict::of(Some(&device), state.clock.now_ms());
    if let Some(code) = verdict.close_code() {
        refused(&state, &device.tenant_id, &device.id, peer, verdict).await;
        close(&mut socket, code).await;
        return;
    }
    let accepted = Box::new(Accepted {
        guard_key: guard_key(&extension_id),
        core: state.core.clone(),
        device,
        peer,
        grant_changes,
        first_frame: Some(first.into()),
    });
    crate::devices::connection::run(WsSocket::new(socket), accepted).await;
}

/// The first text message (Pings are answered by the WebSocket layer meanwhile);
/// `None` if the socket ends or sends something else first.
async fn first_text(socket: &mut WsStream) -> Option<Utf8Bytes> {
    loop {
        match socket.next().await? {
            Ok(Message::Text(text)) => return Some(text),
            Ok(Message::Ping(_) | Message::Pong(_)) => {
                let stall = Duration::from_secs(1);
                tokio::time::timeout(stall, socket.flush())
                    .await
                    .ok()?
                    .ok()?;
            }
            _ => return None,
        }
    }
}

async fn close(socket: &mut WsStream, code: CloseCode) {
    let frame = CloseFrame {
        code: code.code().into(),
        reason: code.reason().into(),
    };
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        socket.send(Message::Close(Some(frame))),
    )
    .await;
}

/// The device of this profile: made on its first connection (its label from the
/// handshake), its grant extended on later ones, unless it was revoked.
async fn local_device(
    state: &AppState,
    extension_id: &str,
    instance_id: &str,
    label: &str,
) -> Result<crate::store::DeviceRecord, CloseCode> {
    let unavailable = |e: crate::store::StoreError| {
        tracing::warn!(error = %e, "local device could not be read or written");
        CloseCode::TryAgainLater
    };
    let tenant = state
        .store
        .tenant_by_name(DEFAULT_TENANT)
        .await
        .map_err(unavailable)?
        .ok_or(CloseCode::Unauthorized)?;
    let now = state.clock.now_ms();
    let ms = |secs: u64| i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let limits = &state.config.limits;
    let label = Some(clean_label(label))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| DEFAULT_LOCAL_LABEL.to_string());
    let device = NewDevice {
        id: local_device_id(extension_id, instance_id),
        label,
        // No credential opens this device: local mode authenticates by place.
        token_hash: secret::hash(&secret::random_secret()),
        created_at: now,
        expires_at: now.saturating_add(ms(limits.device_ttl_secs)),
        renew_after: now.saturating_add(ms(limits.renew_after_secs)),
    };
    state
        .store
        .ensure_local_device(&tenant.id, &device)
        .await
        .map_err(unavailable)
}

/// A revoked local device tried to connect: one audit row a minute at most, and
/// nothing else written.
async fn refused(
    state: &AppState,
    tenant_id: &str,
    device_id: &str,
    peer: IpAddr,
    verdict: Verdict,
) {
    if !state
        .audit
        .due(&format!("refused:{device_id}"), REFUSAL_AUDIT_EVERY)
    {
        return;
    }
    state
        .audit
        .record(Event {
            tenant_id,
            actor: audit::device_ref(device_id),
            action: action::DEVICE_CONNECT,
            target: audit::device_ref(device_id),
            outcome: "refused",
            detail: Some(format!(
                "from {peer}: {} (logged at most once a minute)",
                verdict.why()
            )),
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_of_an_extension_is_its_own_device() {
        let ext = "abcdefghijklmnopabcdefghijklmnop";
        let a = local_device_id(ext, "a1b2c3d4");
        let b = local_device_id(ext, "e5f6a7b8");
        assert_ne!(a, b);
        assert_eq!(a, local_device_id(ext, "a1b2c3d4"));
        assert!(latchkey_protocol::authorize::is_device_id(&a));
    }
}
