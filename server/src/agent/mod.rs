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

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(browsers::list))
        .routes(routes!(sessions::start, sessions::list))
        .routes(routes!(sessions::stop))
        .routes(routes!(sessions::call))
        .routes(routes!(events::stream))
        .routes(routes!(socket::upgrade))
        .routes(routes!(sessions::admin_list))
        .routes(routes!(sessions::admin_stop))
}
