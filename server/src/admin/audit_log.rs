//! `GET /v1/admin/audit?before=ID&limit=N`: the tenant's audit trail, newest first.

use axum::Json;
use axum::extract::{Query, State};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{AuditEventView, AuditList};
use serde::Deserialize;

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::AdminPrincipal;
use crate::clock::rfc3339;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    before: Option<i64>,
    limit: Option<i64>,
}

pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditList>, ApiError> {
    // A query that does not decode is the request's fault (`invalid_request`); a
    // value that decodes but breaks a rule is a param's (`invalid_params`).
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidParams,
            "limit must be 1..=1000",
        ));
    }
    let rows = state
        .store
        .list_audit(&p.tenant_id, q.before, limit + 1)
        .await?;
    let more = rows.len() as i64 > limit;
    let events: Vec<AuditEventView> = rows
        .into_iter()
        .take(limit as usize)
        .map(|r| AuditEventView {
            id: r.id,
            at: rfc3339(r.at),
            actor: r.actor,
            action: r.action,
            target: r.target,
            outcome: r.outcome,
            detail: r.detail,
        })
        .collect();
    let next_before = more.then(|| events.last().map(|e| e.id)).flatten();
    Ok(Json(AuditList {
        events,
        next_before,
    }))
}
