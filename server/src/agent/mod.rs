//! The agent API (docs/agents.md, docs/cli.md): find the team's browsers, open sessions on one,
//! call any `tool.*` method, follow session events. Any API token of the tenant may use it; a
//! session is visible only to the token that opened it.

mod answers;
pub mod browsers;
mod events;
mod requests;
mod sessions;
pub mod socket;
pub mod socket_slots;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/browsers", get(browsers::list))
        .route("/v1/sessions", post(sessions::start).get(sessions::list))
        .route("/v1/sessions/{id}", delete(sessions::stop))
        .route("/v1/sessions/{id}/calls", post(sessions::call))
        .route("/v1/sessions/{id}/events", get(events::stream))
        .route("/v1/agent", get(socket::upgrade))
        .route("/v1/admin/sessions", get(sessions::admin_list))
        .route("/v1/admin/sessions/{id}", delete(sessions::admin_stop))
}
