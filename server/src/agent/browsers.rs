//! `GET /v1/browsers`: the tenant's live devices with their online state.

use axum::Json;
use axum::extract::State;
use latchkey_protocol::agent::{BrowserList, BrowserView};

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::{AgentPrincipal, Principal};
use crate::clock::rfc3339;

#[utoipa::path(
    get,
    operation_id = "browsers_list",
    path = "/v1/browsers",
    tag = "browsers",
    summary = "List the team's browsers",
    responses((status = 200, description = "Live browsers with their online state.", body = BrowserList), crate::openapi::refusals::AgentRead),
)]
pub async fn list(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
) -> Result<Json<BrowserList>, ApiError> {
    Ok(Json(browser_list(&state, &p).await?))
}

/// The tenant's browsers (shared by the HTTP API and the agent socket).
pub async fn browser_list(state: &AppState, p: &Principal) -> Result<BrowserList, ApiError> {
    let now = state.clock.now_ms();
    let devices = state.store.list_devices(&p.tenant_id).await?;
    let browsers = devices
        .into_iter()
        .filter(|d| d.is_live(now))
        .map(|d| {
            let live = state.registry.status(&d.id);
            let last_seen = match live {
                Some((_, ms)) => Some(ms.max(d.last_seen_at.unwrap_or(0))),
                None => d.last_seen_at,
            };
            BrowserView {
                online: state.is_online(&p.tenant_id, &d.id),
                sessions: u32::try_from(state.sessions.count_on_device(&d.id)).unwrap_or(u32::MAX),
                id: d.id,
                label: d.label,
                browser_name: d.browser_name,
                browser_version: d.browser_version,
                last_seen_at: last_seen.map(rfc3339),
                expires_at: rfc3339(d.expires_at),
            }
        })
        .collect();
    Ok(BrowserList { browsers })
}
