//! The extension-facing HTTP surface of docs/protocol.md, "Pairing and renewal": `POST
//! /extension/authorize` (pair and renew) and `GET /extension` (the authenticated
//! WebSocket upgrade). Refusals use bsk's bodies exactly, so any compatible extension
//! reacts correctly.

pub(crate) mod authorize;
pub(crate) mod local;
pub(crate) mod reply;
pub(crate) mod unpair;
pub mod upgrade;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::transport::ws_upgrade::{NotAnUpgrade, WsUpgrade};

/// The extension socket at `/`, in local mode only, as a local bsk daemon serves it.
#[utoipa::path(
    get,
    operation_id = "extension_socket_local",
    path = "/",
    tag = "extension",
    summary = "The extension socket (local mode)",
    security(()),
    responses(
        (status = 101, description = "Switching to the extension socket, in local mode."),
        (status = 404, description = "Not local mode.", body = latchkey_protocol::authorize::AuthorizeErrorBody),
    ),
)]
async fn local_root(
    state: State<AppState>,
    peer: ConnectInfo<std::net::SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    ws: Result<WsUpgrade, NotAnUpgrade>,
) -> Response {
    if !state.config.local {
        return reply::Refusal::NOT_FOUND.into_response();
    }
    upgrade::extension_socket(state, peer, uri, headers, ws).await
}

/// Routes under `/extension`. Any other method on these paths answers 404, as bsk does.
pub fn routes() -> OpenApiRouter<AppState> {
    let bsk = |(schemas, paths, method): utoipa_axum::router::UtoipaMethodRouter<AppState>| {
        (schemas, paths, method.fallback(reply::not_found))
    };
    OpenApiRouter::new()
        // Local mode also accepts extensions at `/`, as a local bsk daemon does;
        // elsewhere `/` answers 404.
        .routes(bsk(routes!(local_root)))
        .routes(bsk(routes!(upgrade::extension_socket)))
        .routes(bsk(routes!(authorize::authorize)))
        .routes(bsk(routes!(unpair::unpair)))
}
