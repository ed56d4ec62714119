//! The extension-facing HTTP surface of contract §2: `POST /extension/authorize`
//! (pair and renew) and `GET /extension` (the authenticated WebSocket upgrade).
//! Refusals use bsk's bodies exactly, so any compatible extension reacts correctly.

pub mod authorize;
pub mod reply;
pub mod upgrade;

use axum::Router;
use axum::routing::{get, post};

use crate::app::AppState;

/// Routes under `/extension`. Any other method on these paths answers 404, as bsk does.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/extension",
            get(upgrade::extension_socket).fallback(reply::not_found),
        )
        .route(
            "/extension/authorize",
            post(authorize::authorize).fallback(reply::not_found),
        )
}
