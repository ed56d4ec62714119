//! `/v1/me/sessions`: the agent sessions on a person's own browsers, on every
//! replica, and ending one of them, which is the person's own Stop (the agent
//! hears `user_stopped`, docs/sessions.md). A session on anyone else's browser
//! answers exactly as an unknown one does.

use axum::Json;
use axum::extract::{Path, State};
use latchkey_protocol::agent::{SessionList, StopSessionResult};

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::MemberPrincipal;
use crate::sessions::routed;

/// `GET /v1/me/sessions`.
#[utoipa::path(
    get,
    operation_id = "me_sessions",
    path = "/v1/me/sessions",
    tag = "me",
    summary = "The agent sessions on my browsers",
    responses((status = 200, description = "Sessions open now on the caller's own browsers, oldest first.", body = SessionList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    me: MemberPrincipal,
) -> Result<Json<SessionList>, ApiError> {
    let list = routed::list_for_owner(&state, &me.principal.tenant_id, &me.member_id).await?;
    Ok(Json(list))
}

/// `DELETE /v1/me/sessions/{id}`.
#[utoipa::path(
    delete,
    operation_id = "me_end_session",
    path = "/v1/me/sessions/{id}",
    tag = "me",
    summary = "End an agent session on my browser",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, description = "Ended: the agent hears `session_ended` with reason `user_stopped`.", body = StopSessionResult), crate::openapi::refusals::AgentSession),
)]
pub async fn end(
    State(state): State<AppState>,
    me: MemberPrincipal,
    Path(id): Path<String>,
) -> Result<Json<StopSessionResult>, ApiError> {
    let ended = routed::stop_for_owner(&state, &me.principal.tenant_id, &me.member_id, &id).await?;
    Ok(Json(ended))
}
