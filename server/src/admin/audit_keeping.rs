//! The audit trail kept and taken away (docs/operations.md, "Export" and
//! "Retention"):
//! - `GET /v1/admin/audit/export?since=…&until=…`: the team's chain as JSON
//!   lines, running to a signed checkpoint, for `latchkey audit verify-file`;
//! - `GET /v1/admin/audit/keys`: the public audit keys that check it;
//! - `GET` and `PUT /v1/admin/audit/retention`: how long the team keeps its rows.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use futures_util::stream;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{AuditRetention, SetAuditRetention};
use latchkey_protocol::audit_chain::{AuditKeySet, Checkpoint, ExportHeader, ExportedRow, GENESIS};
use serde::Deserialize;

use super::audit_log::time_param;
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::audit_chain::ChainedRow;
use crate::audit_keeping::MAX_RETENTION_DAYS;
use crate::auth::principal::{AdminPrincipal, Principal};
use crate::clock::rfc3339;
use crate::store::StoreError;

/// The span of the chain to export; any other parameter is refused.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// From this time on: RFC 3339, or how long ago (`30m`, `2h`, `30d`).
    since: Option<String>,
    /// Before this time: RFC 3339, or how long ago.
    until: Option<String>,
}

/// Rows read per query while exporting.
const EXPORT_PAGE: i64 = 500;

#[utoipa::path(
    get,
    operation_id = "audit_export",
    path = "/v1/admin/audit/export",
    tag = "audit",
    summary = "Export the audit trail",
    params(ExportQuery),
    responses((status = 200, description = "JSON Lines: a header line, then every row in chain order, verifiable offline (docs/audit.md).", content_type = "application/x-ndjson"), crate::openapi::refusals::Write),
)]
pub async fn export(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    query: Result<Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    export_of(&state, &p, q.since.as_deref(), q.until.as_deref()).await
}

/// The team's chain from `since` to `until` as JSON Lines, the export recorded
/// in the trail under `p`: what the API and the console's Export give.
pub(crate) async fn export_of(
    state: &AppState,
    p: &Principal,
    since: Option<&str>,
    until: Option<&str>,
) -> Result<Response, ApiError> {
    let now = state.clock.now_ms();
    let since = time_param(now, "since", since)?;
    let until = time_param(now, "until", until)?;
    let tenant = p.tenant_id.clone();
    let store = state.store.clone();
    state
        .audit
        .record(Event {
            tenant_id: &tenant,
            actor: p.actor(),
            action: action::AUDIT_EXPORT,
            target: "audit".into(),
            outcome: "ok",
            detail: Some(format!(
                "since {}, until {}",
                since.map_or("the start".into(), rfc3339),
                until.map_or("now".into(), rfc3339)
            )),
        })
        .await;
    // Sign the chain as it is now (the export's own row included), so an export
    // to now ends at a checkpoint.
    let signed = crate::audit_keeping::checkpoint(state, &tenant).await?;
    let (first, last) = store.audit_seq_bounds(&tenant, since, until).await?;
    let last = match (until, signed) {
        (None, Some(place)) => Some(place),
        _ => last,
    };
    // Run on to the first checkpoint at or after the last row asked for, so every
    // exported row is covered by a signature.
    let range = match (first, last) {
        (Some(from), Some(last)) if from <= last => {
            let to = store
                .audit_next_checkpoint(&tenant, last)
                .await?
                .unwrap_or(last);
            Some((from, to))
        }
        _ => None,
    };
    let (after_seq, after_hash) = match range {
        Some((from, _)) => start_of(state, &tenant, from).await?,
        None => {
            let head = store.audit_head(&tenant).await?;
            head.unwrap_or((0, GENESIS.to_string()))
        }
    };
    let header = ExportHeader {
        latchkey_audit_export: 1,
        tenant_id: tenant.clone(),
        team: state
            .team_names
            .of(store.as_ref(), &tenant)
            .await
            .unwrap_or_default(),
        exported_at: rfc3339(now),
        after_seq,
        after_hash,
    };
    let first_line = Bytes::from(line(&header));
    let (next, to) = range.map_or((i64::MAX, 0), |(from, to)| (from - 1, to));
    let rows = stream::try_unfold(
        (store, tenant, next),
        move |(store, tenant, after)| async move {
            if after >= to {
                return Ok::<_, StoreError>(None);
            }
            let page = store.audit_chain_page(&tenant, after, EXPORT_PAGE).await?;
            let Some(last) = page.last().map(|r| r.seq) else {
                return Ok(None);
            };
            let text: String = page
                .iter()
                .filter(|r| r.seq <= to)
                .map(|r| line(&exported(r)))
                .collect();
            Ok(Some((Bytes::from(text), (store, tenant, last))))
        },
    );
    let body = stream::once(async move { Ok(first_line) }).chain(rows);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response())
}

/// The place and hash an export starting at `from` follows: the row before it,
/// or, where that was pruned, what the checkpoint at `from` names.
async fn start_of(state: &AppState, tenant: &str, from: i64) -> Result<(i64, String), ApiError> {
    if from <= 1 {
        return Ok((0, GENESIS.to_string()));
    }
    let page = state.store.audit_chain_page(tenant, from - 2, 2).await?;
    let before = page.iter().find(|r| r.seq == from - 1);
    let at = page.iter().find(|r| r.seq == from);
    let hash = match (before, at) {
        (Some(row), _) => Some(row.hash.clone()),
        (None, Some(row)) => row
            .event
            .detail
            .as_deref()
            .and_then(|d| serde_json::from_str::<Checkpoint>(d).ok())
            .map(|cp| cp.hash),
        (None, None) => None,
    };
    // A row the chain has lost: the export still starts, and its check names it.
    Ok((from - 1, hash.unwrap_or_else(|| GENESIS.to_string())))
}

fn exported(r: &ChainedRow) -> ExportedRow {
    let e = &r.event;
    ExportedRow {
        id: r.id,
        seq: r.seq,
        at: rfc3339(e.at),
        at_ms: e.at,
        actor: e.actor.clone(),
        action: e.action.clone(),
        target: e.target.clone(),
        outcome: e.outcome.clone(),
        detail: e.detail.clone(),
        hash: r.hash.clone(),
    }
}

fn line<T: serde::Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_default();
    text.push('\n');
    text
}

#[utoipa::path(
    get,
    operation_id = "audit_keys",
    path = "/v1/admin/audit/keys",
    tag = "audit",
    summary = "The audit signing keys",
    responses((status = 200, description = "The public keys checkpoints are signed with.", body = AuditKeySet), crate::openapi::refusals::Read),
)]
pub async fn keys(
    State(state): State<AppState>,
    AdminPrincipal(_): AdminPrincipal,
) -> Result<Json<AuditKeySet>, ApiError> {
    state.audit_keys.refresh(state.store.as_ref()).await?;
    Ok(Json(state.audit_keys.key_set()))
}

pub(crate) async fn retention_of(
    state: &AppState,
    tenant: &str,
) -> Result<AuditRetention, ApiError> {
    let own = state
        .store
        .audit_retentions()
        .await?
        .into_iter()
        .find(|(t, _)| t == tenant)
        .and_then(|(_, days)| days);
    Ok(AuditRetention {
        days: own.map_or(state.config.audit.retention_days, |d| d as u32),
        is_default: own.is_none(),
    })
}

#[utoipa::path(
    get,
    operation_id = "audit_get_retention",
    path = "/v1/admin/audit/retention",
    tag = "audit",
    summary = "Read the audit retention",
    responses((status = 200, description = "How long rows are kept.", body = AuditRetention), crate::openapi::refusals::Read),
)]
pub async fn get_retention(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<AuditRetention>, ApiError> {
    Ok(Json(retention_of(&state, &p.tenant_id).await?))
}

#[utoipa::path(
    put,
    operation_id = "audit_put_retention",
    path = "/v1/admin/audit/retention",
    tag = "audit",
    summary = "Set the audit retention",
    request_body = SetAuditRetention,
    responses((status = 200, description = "The retention as stored.", body = AuditRetention), crate::openapi::refusals::Write),
)]
pub async fn put_retention(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    body: Result<Json<SetAuditRetention>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<AuditRetention>, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::invalid(e.body_text()))?;
    Ok(Json(set_retention(&state, &p, body.days).await?))
}

/// Keep `p`'s team's rows `days` days (`None`: the gateway's default); audited
/// as `p`'s act. Also the console's.
pub(crate) async fn set_retention(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    days: Option<u32>,
) -> Result<AuditRetention, ApiError> {
    let days = days.map(i64::from);
    if days.is_some_and(|d| !(1..=MAX_RETENTION_DAYS).contains(&d)) {
        return Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "days",
            format!("days must be 1..={MAX_RETENTION_DAYS}, or null for the gateway's default"),
        ));
    }
    state.store.set_audit_retention(&p.tenant_id, days).await?;
    let now = retention_of(state, &p.tenant_id).await?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::AUDIT_RETENTION,
            target: "audit".into(),
            outcome: "ok",
            detail: Some(if now.is_default {
                format!("{} days (the gateway's default)", now.days)
            } else {
                format!("{} days", now.days)
            }),
        })
        .await;
    Ok(now)
}
