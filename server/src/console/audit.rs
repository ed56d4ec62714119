//! The Audit page (docs/console.md, "Audit"), for admins: the team's trail,
//! newest first, narrowed by the audit API's filters, paged by its cursor, and
//! exported as the same verifiable JSON Lines as `GET /v1/admin/audit/export`.
//! Both read through the admin API's own functions, so the console shows
//! exactly what the API answers.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use latchkey_protocol::api::AuditEventView;

use super::human::When;
use super::page::{ConsoleError, Frame, render};
use super::signed_in::SignedIn;
use crate::admin::audit_keeping::export_of;
use crate::admin::audit_log::{AuditQuery, page_of};
use crate::api_error::ApiError;
use crate::app::AppState;

/// Rows on a page unless the address asks for another number.
const PAGE_ROWS: i64 = 50;

/// Why a member is refused here.
const ADMINS_ONLY: &str = "the team's audit trail is read by its admins";

/// One row of the trail.
pub struct AuditRow {
    pub id: i64,
    pub at: When,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub ok: bool,
    pub detail: String,
    /// Where the target leads (the rows of the session it names), if anywhere.
    pub link: Option<String>,
}

/// The filters as typed, to fill the form again.
#[derive(Default)]
pub struct Typed {
    pub action: String,
    pub actor: String,
    pub target: String,
    pub outcome: String,
    pub since: String,
    pub until: String,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    frame: Option<Frame>,
    typed: Typed,
    rows: Vec<AuditRow>,
    /// The filters were refused: the code and why.
    refused: Option<(&'static str, String)>,
    /// The address of the next (older) page, if there is one.
    older: Option<String>,
    /// A page other than the newest is shown.
    paged: bool,
    /// The address of the export of this time range.
    export: String,
    /// Some filter is in use.
    filtered: bool,
}

/// A form sends an empty field for a filter left blank: that is no filter.
fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn normalised(q: AuditQuery) -> AuditQuery {
    AuditQuery {
        before: q.before,
        limit: q.limit,
        action: given(q.action),
        actor: given(q.actor),
        target: given(q.target),
        outcome: given(q.outcome),
        since: given(q.since),
        until: given(q.until),
    }
}

/// `/console/audit…` with `q`'s filters (blank ones left out) and `before`.
fn address(path: &str, q: &AuditQuery, before: Option<i64>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in [
        ("action", &q.action),
        ("actor", &q.actor),
        ("target", &q.target),
        ("outcome", &q.outcome),
        ("since", &q.since),
        ("until", &q.until),
    ] {
        if let Some(v) = value {
            query.append_pair(name, v);
        }
    }
    if let Some(limit) = q.limit {
        query.append_pair("limit", &limit.to_string());
    }
    if let Some(before) = before {
        query.append_pair("before", &before.to_string());
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// `e` as a row; `link` makes a session target lead to that session's rows.
pub(super) fn row(now: i64, e: AuditEventView, link: impl Fn(&str) -> Option<String>) -> AuditRow {
    AuditRow {
        link: e.target.strip_prefix("session:").and_then(&link),
        id: e.id,
        at: When::of(now, crate::clock::parse_rfc3339(&e.at).unwrap_or(now)),
        ok: e.outcome == "ok",
        detail: e.detail.unwrap_or_default(),
        actor: e.actor,
        action: e.action,
        target: e.target,
        outcome: e.outcome,
    }
}

/// A query that does not decode (a cursor that is not a number): refused like
/// the API refuses it.
type Asked = Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>;

pub async fn list(
    State(state): State<AppState>,
    me: SignedIn,
    asked: Asked,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let Query(q) = asked.map_err(|e| ApiError::invalid(e.body_text()))?;
    let mut q = normalised(q);
    q.limit = Some(q.limit.unwrap_or(PAGE_ROWS));
    let typed = Typed {
        action: q.action.clone().unwrap_or_default(),
        actor: q.actor.clone().unwrap_or_default(),
        target: q.target.clone().unwrap_or_default(),
        outcome: q.outcome.clone().unwrap_or_default(),
        since: q.since.clone().unwrap_or_default(),
        until: q.until.clone().unwrap_or_default(),
    };
    let shown = AuditQuery {
        limit: q.limit.filter(|&l| l != PAGE_ROWS),
        before: None,
        ..q.clone()
    };
    let range = AuditQuery {
        since: q.since.clone(),
        until: q.until.clone(),
        ..AuditQuery::default()
    };
    let mut page = AuditPage {
        frame: Some(me.frame()),
        filtered: [
            &q.action, &q.actor, &q.target, &q.outcome, &q.since, &q.until,
        ]
        .iter()
        .any(|f| f.is_some()),
        typed,
        rows: Vec::new(),
        refused: None,
        older: None,
        paged: q.before.is_some(),
        export: address("/console/audit/export", &range, None),
    };
    let now = state.clock.now_ms();
    match page_of(&state, &me.principal.tenant_id, q).await {
        Ok(list) => {
            page.older = list
                .next_before
                .map(|before| address("/console/audit", &shown, Some(before)));
            let session_rows = |id: &str| {
                let q = AuditQuery {
                    target: Some(crate::audit::session_ref(id)),
                    ..AuditQuery::default()
                };
                Some(address("/console/audit", &q, None))
            };
            page.rows = list
                .events
                .into_iter()
                .map(|e| row(now, e, session_rows))
                .collect();
            Ok(render(StatusCode::OK, &page))
        }
        // A filter the trail refuses is shown beside the form, to be corrected.
        Err(e) if e.code.http_status() == 400 => {
            page.refused = Some((e.code.as_str(), e.message));
            Ok(render(StatusCode::BAD_REQUEST, &page))
        }
        Err(e) => Err(e.into()),
    }
}

/// The span of the export: the page's own time filters.
#[derive(serde::Deserialize)]
pub struct ExportRange {
    since: Option<String>,
    until: Option<String>,
}

/// Download the trail from `since` to `until`, as the API exports it (the
/// export is itself audited). Refused when a browser says another site asked
/// for it, so no page elsewhere can make an admin write export rows.
pub async fn export(
    State(state): State<AppState>,
    me: SignedIn,
    headers: HeaderMap,
    asked: Result<Query<ExportRange>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    super::signed_in::same_site(&headers)?;
    let Query(range) = asked.map_err(|e| ApiError::invalid(e.body_text()))?;
    let mut response = export_of(
        &state,
        &me.principal,
        given(range.since).as_deref(),
        given(range.until).as_deref(),
    )
    .await?;
    let name = format!(
        "attachment; filename=\"latchkey-audit-{}.jsonl\"",
        crate::clock::rfc3339(state.clock.now_ms())
            .get(..10)
            .unwrap_or("export")
    );
    if let Ok(value) = name.parse() {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_keeps_the_filters_and_leaves_out_blank_ones() {
        let q = normalised(AuditQuery {
            action: Some("session.*".into()),
            actor: Some("  ".into()),
            outcome: Some("".into()),
            since: Some("2h".into()),
            ..AuditQuery::default()
        });
        assert_eq!(
            address("/console/audit", &q, Some(41)),
            "/console/audit?action=session.*&since=2h&before=41"
        );
        assert_eq!(
            address("/console/audit", &AuditQuery::default(), None),
            "/console/audit"
        );
        let odd = AuditQuery {
            target: Some("device:a&b=c".into()),
            limit: Some(2),
            ..AuditQuery::default()
        };
        assert_eq!(
            address("/console/audit/export", &odd, None),
            "/console/audit/export?target=device%3Aa%26b%3Dc&limit=2"
        );
    }
}
