//! Sessions and calls over HTTP. A call's HTTP request is its lifetime: if the agent goes away
//! mid-call, the call is cancelled on the device (docs/protocol.md, "Cancellation").

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::agent::{
    CallRequest, SessionList, SessionView, StartSessionRequest, StopSessionResult,
};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::auth::principal::{AdminPrincipal, AgentPrincipal};
use crate::sessions::calls::{self, ToolCall};
use crate::sessions::routed::{self, Scope};
use crate::sessions::start_stop;

#[utoipa::path(
    post,
    operation_id = "sessions_start",
    path = "/v1/sessions",
    tag = "sessions",
    summary = "Start a session",
    request_body = StartSessionRequest,
    responses((status = 201, description = "The session, with its Agent Window.", body = SessionView), crate::openapi::refusals::SessionStart),
)]
pub async fn start(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    ApiJson(body): ApiJson<StartSessionRequest>,
) -> Result<(StatusCode, Json<SessionView>), ApiError> {
    let session = start_stop::start(&state, &p, body).await?;
    Ok((StatusCode::CREATED, Json(session.view())))
}

#[utoipa::path(
    get,
    operation_id = "sessions_list",
    path = "/v1/sessions",
    tag = "sessions",
    summary = "List my sessions",
    responses((status = 200, description = "The sessions this token opened.", body = SessionList), crate::openapi::refusals::AgentRead),
)]
pub async fn list(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
) -> Json<SessionList> {
    Json(routed::list(&state, Scope::Agent(&p)).await)
}

#[utoipa::path(
    delete,
    operation_id = "sessions_stop",
    path = "/v1/sessions/{id}",
    tag = "sessions",
    summary = "Stop a session",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, description = "The session, ended.", body = StopSessionResult), crate::openapi::refusals::AgentSession),
)]
pub async fn stop(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    Path(id): Path<String>,
) -> Result<Json<StopSessionResult>, ApiError> {
    Ok(Json(routed::stop(&state, Scope::Agent(&p), &id).await?))
}

/// [`latchkey_protocol::api::CallResult`] with the device's result relayed as the raw JSON it
/// arrived as.
#[derive(serde::Serialize)]
pub struct RawCallResult {
    pub result: crate::devices::link::RawResult,
}

#[utoipa::path(
    post,
    operation_id = "sessions_call",
    path = "/v1/sessions/{id}/calls",
    tag = "sessions",
    summary = "Call a tool",
    request_body = CallRequest,
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, description = "The tool's result, as docs/tools.md describes it for the method.", body = latchkey_protocol::agent::CallResult), crate::openapi::refusals::ToolCall),
)]
pub async fn call(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CallRequest>,
) -> Result<Json<RawCallResult>, ApiError> {
    let call = ToolCall {
        method: body.method,
        params: calls::params_object(body.params)?,
        timeout_ms: body.timeout_ms,
        limit: p.delegation.as_ref().map(|d| d.limit.clone()),
    };
    let result = routed::call(&state, &p, &id, call).await?;
    Ok(Json(RawCallResult { result }))
}

/// `GET /v1/admin/sessions`: every session of the tenant.
#[utoipa::path(
    get,
    operation_id = "sessions_admin_list",
    path = "/v1/admin/sessions",
    tag = "sessions",
    summary = "List every session of the team",
    responses((status = 200, description = "Every open session of the team.", body = SessionList), crate::openapi::refusals::Read),
)]
pub async fn admin_list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Json<SessionList> {
    let scope = Scope::Admin {
        tenant_id: &p.tenant_id,
    };
    Json(routed::list(&state, scope).await)
}

/// `DELETE /v1/admin/sessions/{id}`: stop any session of the tenant.
#[utoipa::path(
    delete,
    operation_id = "sessions_admin_stop",
    path = "/v1/admin/sessions/{id}",
    tag = "sessions",
    summary = "Stop any session of the team",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, description = "The session, ended.", body = StopSessionResult), crate::openapi::refusals::AgentSession),
)]
pub async fn admin_stop(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<StopSessionResult>, ApiError> {
    let scope = Scope::Admin {
        tenant_id: &p.tenant_id,
    };
    Ok(Json(routed::stop(&state, scope, &id).await?))
}
