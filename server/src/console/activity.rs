//! The Activity page (docs/console.md, "Activity"): what the audit trail says
//! about the signed-in person's own browsers, and, a click further, everything
//! one session did on them. Read through `GET /v1/me/audit`'s own function, so
//! the page and the API never disagree.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use latchkey_protocol::ErrorCode;

use super::audit::{AuditRow, row};
use super::page::{ConsoleError, Frame, render};
use super::signed_in::SignedIn;
use crate::admin::me_audit::{MeAuditQuery, page_for_member};
use crate::api_error::ApiError;
use crate::app::AppState;

/// Rows on a page.
const PAGE_ROWS: i64 = 50;

#[derive(Template)]
#[template(path = "console/activity.html")]
struct ActivityPage {
    frame: Option<Frame>,
    /// The one session shown, if any.
    session: Option<String>,
    rows: Vec<AuditRow>,
    older: Option<String>,
    paged: bool,
}

fn address(session: Option<&str>, before: Option<i64>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    if let Some(s) = session {
        query.append_pair("session", s);
    }
    if let Some(b) = before {
        query.append_pair("before", &b.to_string());
    }
    let query = query.finish();
    if query.is_empty() {
        "/console/activity".to_owned()
    } else {
        format!("/console/activity?{query}")
    }
}

type Asked = Result<Query<MeAuditQuery>, axum::extract::rejection::QueryRejection>;

pub async fn list(
    State(state): State<AppState>,
    me: SignedIn,
    asked: Asked,
) -> Result<Response, ConsoleError> {
    let Query(q) = asked.map_err(|e| ApiError::invalid(e.body_text()))?;
    let member_id = me.principal.member_id.clone().ok_or_else(|| {
        ApiError::new(
            ErrorCode::PermissionDenied,
            "Activity shows a person's own browsers; this token has no person behind it (see Audit)",
        )
    })?;
    let session = q.session.clone().filter(|s| !s.is_empty());
    let asked = MeAuditQuery {
        before: q.before,
        limit: Some(q.limit.unwrap_or(PAGE_ROWS)),
        session: session.clone(),
    };
    let list = page_for_member(&state, &me.principal.tenant_id, &member_id, asked).await?;
    let now = state.clock.now_ms();
    // In the list, a session leads to its own rows; on its own page, nowhere.
    let listing = session.is_none();
    let rows = list
        .events
        .into_iter()
        .map(|e| row(now, e, |id| listing.then(|| address(Some(id), None))))
        .collect();
    Ok(render(
        StatusCode::OK,
        &ActivityPage {
            frame: Some(me.frame()),
            older: list
                .next_before
                .map(|b| address(session.as_deref(), Some(b))),
            paged: q.before.is_some(),
            session,
            rows,
        },
    ))
}
