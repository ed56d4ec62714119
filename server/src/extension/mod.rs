//! The extension-facing HTTP surface of docs/protocol.md, "Pairing and renewal": `POST
//! /extension/authorize` (pair and renew) and `GET /extension` (the authenticated
//! WebSocket upgrade). Refusals use bsk's bodies exactly, so any compatible extension
//! reacts correctly.

pub(crate) mod authorize;
pub(crate) mod local;
pub(crate) mod reply;
pub(crate) mod unpair;
pub mod upgrade;

use axum::Router;
use axum::routing::{delete, get, post};

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};

use crate::app::AppState;

async fn local_root(
    state: State<AppState>,
    peer: ConnectInfo<std::net::SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if !state.config.local {
        return reply::Refusal::NOT_FOUND.into_response();
    }
    upgrade::extension_socket(state, peer, uri, headers, ws).await
}

/// Routes under `/extension`. Any other method on these paths answers 404, as bsk does.
pub fn routes() -> Router<AppState> {
    Router::new()
        // Local mode also accepts extensions at `/`, as a local bsk daemon does;
        // elsewhere `/` answers 404.
        .route("/", get(local_root).fallback(reply::not_found))
        .route(
            "/extension",
            get(upgrade::extension_socket).fallback(reply::not_found),
        )
        .route(
            "/extension/authorize",
            post(authorize::authorize).fallback(reply::not_found),
        )
        .route(
            "/extension/device",
            delete(unpair::unpair).fallback(reply::not_found),
        )
}
