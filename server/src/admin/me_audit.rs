//! `GET /v1/me/audit`: what the audit trail says about a person's own browsers
//! (docs/people.md, "Their own audit"): the rows about each browser (paired,
//! connected, revoked, Stop all agents, expiring) and the rows that name it for
//! a session (a session started on it, its person asked for consent or help);
//! with `session=ID`, every row of one session on it, each tool call included.
//!
//! The same rows the admin's trail holds, read through the same filters: a
//! person and their admin see one story. A session on anyone else's browser
//! answers exactly as an unknown one does.

use axum::Json;
use axum::extract::{Query, State};
use latchkey_protocol::api::AuditList;
use serde::Deserialize;

use super::audit_log::{page, page_limit};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::MemberPrincipal;
use crate::store::{AuditFilter, AuditRecord};

/// A page, and optionally one session; any other parameter is refused.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MeAuditQuery {
    /// The cursor: rows before this one (the previous page's `next_before`).
    pub before: Option<i64>,
    /// Rows per page, 1 … 1000 (default 100).
    pub limit: Option<i64>,
    /// One session on the caller's browsers: all of its rows.
    pub session: Option<String>,
}

#[utoipa::path(
    get,
    operation_id = "me_audit",
    path = "/v1/me/audit",
    tag = "me",
    summary = "The audit trail of my browsers",
    params(MeAuditQuery),
    responses((status = 200, description = "A page of rows about the caller's own browsers (or one session on them), newest first, with the cursor of the next.", body = AuditList), crate::openapi::refusals::WriteOne),
)]
pub async fn list(
    State(state): State<AppState>,
    me: MemberPrincipal,
    query: Result<Query<MeAuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditList>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    page_for_member(&state, &me.principal.tenant_id, &me.member_id, q)
        .await
        .map(Json)
}

/// One page of the rows about member `member_id`'s browsers as `q` asks: what
/// the API and the console's Activity page show.
pub(crate) async fn page_for_member(
    state: &AppState,
    tenant_id: &str,
    member_id: &str,
    q: MeAuditQuery,
) -> Result<AuditList, ApiError> {
    let limit = page_limit(q.limit)?;
    // Every browser that was theirs, revoked ones too: their history stays.
    let mine: Vec<String> =
        crate::devices::owned::of_member(state.store.as_ref(), tenant_id, member_id)
            .await?
            .into_iter()
            .map(|d| d.id)
            .collect();
    let rows = match q.session {
        Some(session) => one_session(state, tenant_id, &mine, &session, q.before, limit).await?,
        None => about_browsers(state, tenant_id, &mine, q.before, limit).await?,
    };
    Ok(page(rows, limit))
}

/// The rows about `devices` and the session rows that name one of them,
/// newest first: two reads per browser along the tenant's id index, merged.
async fn about_browsers(
    state: &AppState,
    tenant_id: &str,
    devices: &[String],
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRecord>, ApiError> {
    let mut rows = Vec::new();
    for id in devices {
        let device = crate::audit::device_ref(id);
        for filter in [
            AuditFilter {
                before,
                target: Some(device.clone()),
                ..AuditFilter::default()
            },
            AuditFilter {
                before,
                action_prefix: Some("session.".into()),
                detail_prefix: Some(device.clone()),
                ..AuditFilter::default()
            },
        ] {
            rows.extend(
                state
                    .store
                    .list_audit(tenant_id, &filter, limit + 1)
                    .await?,
            );
        }
    }
    rows.sort_unstable_by_key(|r| std::cmp::Reverse(r.id));
    rows.dedup_by_key(|r| r.id);
    rows.truncate(usize::try_from(limit + 1).unwrap_or(usize::MAX));
    Ok(rows)
}

/// Every row of session `session`, if it ran (or asked to run) on one of
/// `devices`; `not_found` otherwise, as for a session that never was.
async fn one_session(
    state: &AppState,
    tenant_id: &str,
    devices: &[String],
    session: &str,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRecord>, ApiError> {
    let unknown = || ApiError::not_found("session");
    if !latchkey_protocol::cluster::session_route::is_session_id(session) {
        return Err(unknown());
    }
    let target = crate::audit::session_ref(session);
    // Its rows that name a browser (its start, a consent or help request) say
    // whose browser it was.
    let naming = AuditFilter {
        target: Some(target.clone()),
        detail_prefix: Some("device:".into()),
        ..AuditFilter::default()
    };
    let named = state.store.list_audit(tenant_id, &naming, 1).await?;
    let theirs = named.first().is_some_and(|r| {
        r.detail
            .as_deref()
            .and_then(|d| d.strip_prefix("device:"))
            .map(|d| d.split(' ').next().unwrap_or_default())
            .is_some_and(|d| devices.iter().any(|mine| mine == d))
    });
    if !theirs {
        return Err(unknown());
    }
    let filter = AuditFilter {
        before,
        target: Some(target),
        ..AuditFilter::default()
    };
    Ok(state
        .store
        .list_audit(tenant_id, &filter, limit + 1)
        .await?)
}
