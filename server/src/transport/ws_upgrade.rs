//! The WebSocket upgrade (RFC 6455, section 4.2) as an extractor of our own, and
//! the task that serves an upgraded socket.
//!
//! Ours rather than axum's `WebSocketUpgrade` so that what an idle device holds is
//! decided here: the task that serves a socket is spawned on the server's tracker
//! (shutdown waits for it), and the socket is built in a scope that ends before the
//! serving future is awaited, so the task keeps no second place for it. The checks
//! are RFC 6455's, stricter than axum's: header tokens are compared as tokens, not
//! substrings, and the key must be 16 bytes in base64. Measured in
//! docs/benchmarks.md, "The WebSocket upgrade of our own".

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tracing::debug;

use crate::app::AppState;

/// An upgraded socket, as hyper hands it over.
pub type WsStream = WebSocketStream<TokioIo<Upgraded>>;

/// Why a request is not a WebSocket upgrade we can accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotAnUpgrade {
    #[error("the method must be GET")]
    MethodNotGet,
    #[error("the Connection header must include `upgrade`")]
    ConnectionHeader,
    #[error("the Upgrade header must be `websocket`")]
    UpgradeHeader,
    #[error("the Sec-WebSocket-Version header must be `13`")]
    VersionHeader,
    #[error("the Sec-WebSocket-Key header must be 16 bytes in base64")]
    KeyHeader,
    #[error("this connection cannot be upgraded")]
    NotUpgradable,
}

/// Answered when a handler does not map the rejection itself: 400 with the reason
/// as text (426 for a wrong version, with the version we speak, as RFC 6455 asks).
impl IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        if self == Self::VersionHeader {
            let version = [(header::SEC_WEBSOCKET_VERSION, "13")];
            return (StatusCode::UPGRADE_REQUIRED, version, self.to_string()).into_response();
        }
        (StatusCode::BAD_REQUEST, self.to_string()).into_response()
    }
}

/// A valid WebSocket upgrade request, not yet answered.
#[derive(Debug)]
pub struct WsUpgrade {
    /// The client's `Sec-WebSocket-Key`, from which the 101 proves it understood.
    key: HeaderValue,
    /// Resolves to the connection once the 101 has been written.
    on_upgrade: OnUpgrade,
}

impl<S: Send + Sync> FromRequestParts<S> for WsUpgrade {
    type Rejection = NotAnUpgrade;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, NotAnUpgrade> {
        if parts.method != Method::GET {
            return Err(NotAnUpgrade::MethodNotGet);
        }
        if !has_token(&parts.headers, header::CONNECTION, "upgrade") {
            return Err(NotAnUpgrade::ConnectionHeader);
        }
        if !has_token(&parts.headers, header::UPGRADE, "websocket") {
            return Err(NotAnUpgrade::UpgradeHeader);
        }
        if !is_only(&parts.headers, header::SEC_WEBSOCKET_VERSION, "13") {
            return Err(NotAnUpgrade::VersionHeader);
        }
        let key = parts
            .headers
            .get(header::SEC_WEBSOCKET_KEY)
            .filter(|k| is_key(k))
            .ok_or(NotAnUpgrade::KeyHeader)?
            .clone();
        let on_upgrade = parts
            .extensions
            .remove::<OnUpgrade>()
            .ok_or(NotAnUpgrade::NotUpgradable)?;
        Ok(Self { key, on_upgrade })
    }
}

impl WsUpgrade {
    /// Answer 101, selecting `protocol` if given, and once hyper hands the
    /// connection over run `serve` on the socket, as a task on the server's
    /// tracker with the server's WebSocket settings.
    pub fn accept<F, Fut>(
        self,
        state: &AppState,
        protocol: Option<HeaderValue>,
        serve: F,
    ) -> Response
    where
        F: FnOnce(WsStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Self { key, on_upgrade } = self;
        let config = super::websocket_config(&state.config.limits);
        state.tasks.spawn(async move {
            // The socket lives in this scope only: once `serve` has it, the task
            // keeps no second place for it (see the module's doc).
            let served = {
                let upgraded = match on_upgrade.await {
                    Ok(upgraded) => upgraded,
                    Err(e) => {
                        debug!(error = %e, "the upgraded connection was not handed over");
                        return;
                    }
                };
                let io = TokioIo::new(upgraded);
                serve(WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await)
            };
            served.await;
        });
        switching_protocols(&key, protocol)
    }
}

/// The 101 that completes the handshake: `Sec-WebSocket-Accept` proves the
/// server read the client's key; `protocol` is the subprotocol selected, if any.
fn switching_protocols(key: &HeaderValue, protocol: Option<HeaderValue>) -> Response {
    let mut response = (
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, HeaderValue::from_static("upgrade")),
            (header::UPGRADE, HeaderValue::from_static("websocket")),
        ],
    )
        .into_response();
    let headers = response.headers_mut();
    // Base64 is always a valid header value.
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    if let Some(protocol) = protocol {
        headers.insert(header::SEC_WEBSOCKET_PROTOCOL, protocol);
    }
    response
}

/// Whether every `name` header together, as a comma-separated list, has `token`
/// (compared without case, as RFC 9110 compares tokens).
fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Whether `name` is sent once, with exactly `value`.
fn is_only(headers: &HeaderMap, name: HeaderName, value: &str) -> bool {
    let mut all = headers.get_all(name).iter();
    matches!((all.next(), all.next()), (Some(v), None) if v.as_bytes().trim_ascii() == value.as_bytes())
}

/// A `Sec-WebSocket-Key`: a base64-encoded 16-byte value (RFC 6455, section 4.1).
fn is_key(key: &HeaderValue) -> bool {
    base64::engine::general_purpose::STANDARD
        .decode(key.as_bytes())
        .is_ok_and(|k| k.len() == 16)
}

#[cfg(test)]
mod tests;
