//! `GET /v1/admin/audit?before=ID&limit=N&action=…&actor=…&target=…&outcome=…&since=…&until=…`:
//! the tenant's audit trail, newest first, narrowed by any of those
//! (docs/operations.md, "Audit").

use axum::Json;
use axum::extract::{Query, State};
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{AuditEventView, AuditList};
use serde::Deserialize;

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::AdminPrincipal;
use crate::clock::rfc3339;
use crate::store::AuditFilter;

/// Filters and a page; any other parameter is refused.
#[derive(Debug, Default, Clone, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// The cursor: rows before this one (the previous page's `next_before`).
    pub before: Option<i64>,
    /// Rows per page, 1 … 1000 (default 100).
    pub limit: Option<i64>,
    /// An action (`session.call`), or a family of them (`session.*`).
    pub action: Option<String>,
    /// Who acted (`token:NAME`, `device:ID`, …).
    pub actor: Option<String>,
    /// What was acted on (`device:ID`, `session:ID`, …).
    pub target: Option<String>,
    /// `ok`, or a refusal's code.
    pub outcome: Option<String>,
    /// At or after `since`, before `until`: RFC 3339 times, or how long ago
    /// (`30m`, `2h`, `7d`).
    pub since: Option<String>,
    pub until: Option<String>,
}

/// Longest filter value: the longest reference a row holds.
const MAX_FILTER_CHARS: usize = latchkey_protocol::text::MAX_AUDIT_REF_CHARS;

/// `text` as a span back from now: digits, then `s`, `m`, `h` or `d`.
fn ago(text: &str) -> Option<i64> {
    let unit = match text.chars().last()? {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return None,
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

pub(super) fn time_param(
    now: i64,
    field: &str,
    value: Option<&str>,
) -> Result<Option<i64>, ApiError> {
    value
        .map(|v| {
            crate::clock::parse_rfc3339(v)
                .or_else(|| ago(v).map(|span| now.saturating_sub(span)))
                .ok_or_else(|| {
                    ApiError::at_field(
                        ErrorCode::InvalidParams,
                        field,
                        format!(
                            "{field} must be an RFC 3339 time (2026-12-03T10:00:00Z) or a span back from now (30m, 2h, 7d)"
                        ),
                    )
                })
        })
        .transpose()
}

fn filter_of(now: i64, q: AuditQuery) -> Result<AuditFilter, ApiError> {
    for (field, value) in [
        ("action", &q.action),
        ("actor", &q.actor),
        ("target", &q.target),
        ("outcome", &q.outcome),
    ] {
        // No stored value holds a control or formatting character, so a filter
        // with one matches nothing; refused rather than sent (PostgreSQL refuses
        // a NUL in text outright).
        if value.as_ref().is_some_and(|v| {
            v.is_empty()
                || v.chars().count() > MAX_FILTER_CHARS
                || v.chars().any(latchkey_protocol::text::is_unsafe)
        }) {
            return Err(ApiError::at_field(
                ErrorCode::InvalidParams,
                field,
                format!("{field} must be 1..={MAX_FILTER_CHARS} printable characters"),
            ));
        }
    }
    let (action, action_prefix) = match q.action {
        Some(a) => match a.strip_suffix('*') {
            Some(prefix) => (None, Some(prefix.to_string())),
            None => (Some(a), None),
        },
        None => (None, None),
    };
    Ok(AuditFilter {
        before: q.before,
        action,
        action_prefix,
        since: time_param(now, "since", q.since.as_deref())?,
        until: time_param(now, "until", q.until.as_deref())?,
        actor: q.actor,
        target: q.target,
        outcome: q.outcome,
        detail_prefix: None,
    })
}

#[utoipa::path(
    get,
    operation_id = "audit_list",
    path = "/v1/admin/audit",
    tag = "audit",
    summary = "Read the audit trail",
    params(AuditQuery),
    responses((status = 200, description = "A page of rows, newest first, with the cursor of the next.", body = AuditList), crate::openapi::refusals::Write),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditList>, ApiError> {
    // A query that does not decode is the request's fault (`invalid_request`); a
    // value that decodes but breaks a rule is a param's (`invalid_params`).
    let Query(q) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    page_of(&state, &p.tenant_id, q).await.map(Json)
}

/// One page of tenant `tenant_id`'s trail as `q` asks for it: what the API and
/// the console's Audit page show.
pub(crate) async fn page_of(
    state: &AppState,
    tenant_id: &str,
    q: AuditQuery,
) -> Result<AuditList, ApiError> {
    let limit = page_limit(q.limit)?;
    let filter = filter_of(state.clock.now_ms(), q)?;
    let rows = state
        .store
        .list_audit(tenant_id, &filter, limit + 1)
        .await?;
    Ok(page(rows, limit))
}

/// Rows per page as asked: 1 … 1000, default 100.
pub(crate) fn page_limit(asked: Option<i64>) -> Result<i64, ApiError> {
    let limit = asked.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidParams,
            "limit must be 1..=1000",
        ));
    }
    Ok(limit)
}

/// A page of `limit` rows from `rows` (newest first, up to `limit + 1`: one
/// more says there is a next page).
pub(crate) fn page(rows: Vec<crate::store::AuditRecord>, limit: i64) -> AuditList {
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
    AuditList {
        events,
        next_before,
    }
}
