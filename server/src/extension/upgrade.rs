//! `GET /extension`: every check of docs/protocol.md, "The upgrade" happens before the 101.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use latchkey_protocol::authorize::is_token_shaped;
use latchkey_protocol::methods::AUTH_SUBPROTOCOL_PREFIX;
use tracing::debug;

use super::reply::Refusal;
use crate::app::AppState;
use crate::auth::secret;
use crate::config::is_extension_id;
use crate::rate_limits::client_ip::client_ip;
use crate::rate_limits::rate::RetryAfter;
use crate::store::DeviceRecord;
use crate::transport::ws_upgrade::{NotAnUpgrade, WsUpgrade};

/// Check the single `Origin`: `chrome-extension://` + 32 a–p, optionally allow-listed.
pub fn check_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), Refusal> {
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let (Some(origin), None) = (origins.next(), origins.next()) else {
        return Err(Refusal::UNAUTHORIZED);
    };
    let id = origin
        .to_str()
        .ok()
        .and_then(|o| o.strip_prefix("chrome-extension://"))
        .filter(|id| is_extension_id(id))
        .ok_or(Refusal::FORBIDDEN_ORIGIN)?;
    if !allowed.is_empty() && !allowed.iter().any(|a| a == id) {
        return Err(Refusal::FORBIDDEN_ORIGIN);
    }
    Ok(())
}

/// The one offered subprotocol, `bsk-auth.<token>`: returns the whole value and the token.
pub fn auth_subprotocol(headers: &HeaderMap) -> Result<(HeaderValue, &str), Refusal> {
    let mut offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .flat_map(|v| v.to_str().map(|s| s.split(',')).into_iter().flatten())
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let (Some(value), None) = (offered.next(), offered.next()) else {
        return Err(Refusal::UNAUTHORIZED);
    };
    let token = value
        .strip_prefix(AUTH_SUBPROTOCOL_PREFIX)
        .filter(|t| is_token_shaped(t))
        .ok_or(Refusal::UNAUTHORIZED)?;
    let echo = HeaderValue::from_str(value).map_err(|_| Refusal::UNAUTHORIZED)?;
    Ok((echo, token))
}

/// The device whose current token is the offered `bsk-auth.` subprotocol.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(DeviceRecord, HeaderValue), Refusal> {
    let (echo, token) = auth_subprotocol(headers)?;
    let hash = secret::hash(token);
    match state.token_reads.device(hash.clone()).await {
        Ok(Some(d)) if secret::ct_eq(&d.token_hash, &hash) && d.is_live(state.clock.now_ms()) => {
            Ok((d, echo))
        }
        Ok(_) => Err(Refusal::UNAUTHORIZED),
        Err(e) => {
            debug!(error = %e, "store error during upgrade");
            Err(Refusal::STORE_BUSY)
        }
    }
}

#[utoipa::path(
    get,
    operation_id = "extension_socket",
    path = "/extension",
    tag = "extension",
    summary = "The extension socket",
    description = "The authenticated WebSocket upgrade a paired extension dials (docs/protocol.md, \"The upgrade\").",
    security(()),
    responses(
        (status = 101, description = "Switching to the extension socket."),
        (status = 400, description = "`invalid_request` / `invalid_upgrade`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 401, description = "`invalid_authorization`: unknown, used, expired or revoked credential.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 429, description = "`rate_limited`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 503, description = "`authorization_store_busy` or `connection_capacity_reached`, with `Retry-After`.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
        (status = 403, description = "`invalid_authorization`: an Origin that is not an allowed extension.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
    ),
)]
pub async fn extension_socket(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    ws: Result<WsUpgrade, NotAnUpgrade>,
) -> Response {
    let client = client_ip(peer, &headers, &state.config.trusted_proxies);
    if let Err(RetryAfter(wait)) = state.upgrade_limiter.check(client) {
        crate::telemetry::metrics::refused("rate_limited");
        return Refusal {
            retry_after_secs: Some(wait.as_secs().max(1)),
            ..Refusal::RATE_LIMITED
        }
        .into_response();
    }
    if uri.query().is_some() {
        return Refusal::UNAUTHORIZED.into_response();
    }
    let Ok(ws) = ws else {
        return Refusal::INVALID_UPGRADE.into_response();
    };
    if let Err(r) = check_origin(&headers, &state.config.allowed_extension_ids) {
        return r.into_response();
    }
    if state.config.local && !headers.contains_key(header::SEC_WEBSOCKET_PROTOCOL) {
        return super::local::upgrade(state, &headers, peer, ws).await;
    }
    // Noted before the store is read: the connection re-reads the grant only if a
    // close was signalled since (devices::connection::start).
    let grant_changes = state.registry.grant_changes();
    // The upgrade is bounded like the rest of setup: a store that cannot answer in
    // time gets the client a 503 to retry, not a hanging request.
    let bound = std::time::Duration::from_millis(state.config.limits.setup_timeout_ms);
    let (device, echo) = match tokio::time::timeout(bound, authenticate(&state, &headers)).await {
        Ok(Ok(found)) => found,
        Ok(Err(r)) => return r.into_response(),
        Err(_) => return Refusal::STORE_BUSY.into_response(),
    };
    if let Some(wait) = state
        .registry
        .replacement_backoff(&device.id, state.config.limits.max_replacements_per_minute)
    {
        crate::telemetry::metrics::refused("replacement_loop");
        return Refusal {
            retry_after_secs: Some(wait.as_secs().max(1)),
            ..Refusal::RATE_LIMITED
        }
        .into_response();
    }
    if !state
        .registry
        .admits(&device.id, state.config.limits.max_online_devices)
    {
        crate::telemetry::metrics::refused("connection_capacity_reached");
        return Refusal::AT_CAPACITY.into_response();
    }
    // One pointer waits in the upgrade task, not the connection's whole start.
    let accepted = Box::new(crate::devices::connection::Accepted {
        guard_key: device.id.clone(),
        core: state.core.clone(),
        device,
        peer: client,
        grant_changes,
        first_frame: None,
    });
    ws.accept(&state, Some(echo), move |socket| {
        crate::devices::connection::run(
            crate::transport::ws_socket::WsSocket::new(socket),
            accepted,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    #[test]
    fn origin_rules() {
        let good = format!("chrome-extension://{}", "a".repeat(32));
        assert!(check_origin(&headers(&[("origin", &good)]), &[]).is_ok());
        assert_eq!(check_origin(&headers(&[]), &[]), Err(Refusal::UNAUTHORIZED));
        assert_eq!(
            check_origin(&headers(&[("origin", &good), ("origin", &good)]), &[]),
            Err(Refusal::UNAUTHORIZED)
        );
        for bad in [
            "chrome-extension://".to_string(),
            format!("chrome-extension://{}", "q".repeat(32)),
            format!("chrome-extension://{}/", "a".repeat(32)),
            format!("CHROME-EXTENSION://{}", "a".repeat(32)),
            "http://localhost".to_string(),
            "null".to_string(),
        ] {
            assert_eq!(
                check_origin(&headers(&[("origin", &bad)]), &[]),
                Err(Refusal::FORBIDDEN_ORIGIN),
                "{bad}"
            );
        }
        assert_eq!(
            check_origin(&headers(&[("origin", &good)]), &["b".repeat(32)]),
            Err(Refusal::FORBIDDEN_ORIGIN)
        );
    }

    #[test]
    fn subprotocol_rules() {
        let token = "a".repeat(43);
        let one = format!("bsk-auth.{token}");
        assert!(auth_subprotocol(&headers(&[("sec-websocket-protocol", &one)])).is_ok());
        for bad in [
            format!("{one}, chat"),
            format!("bsk-auth.{}", "a".repeat(42)),
            format!("bsk-auth.{}!", "a".repeat(42)),
            "chat".to_string(),
        ] {
            assert!(
                auth_subprotocol(&headers(&[("sec-websocket-protocol", &bad)])).is_err(),
                "{bad}"
            );
        }
        assert!(
            auth_subprotocol(&headers(&[
                ("sec-websocket-protocol", &one),
                ("sec-websocket-protocol", &one)
            ]))
            .is_err()
        );
        assert!(auth_subprotocol(&headers(&[])).is_err());
    }
}
