//! The Sessions page (docs/console.md, "Sessions"): the agent sessions open now,
//! on every replica: which agent, on which browser and whose, since when, its
//! last action and whether it is working. An admin sees the team's and may end
//! any; a member sees those on their own browsers and may end them.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::agent::{SessionPhase, SessionView};

use super::devices::visible;
use super::human::{When, person};
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted};
use super::signed_in::SignedIn;
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::core_error::CoreError;
use crate::sessions::routed::{self, Scope};

/// One open session.
pub struct SessionRow {
    pub id: String,
    /// The agent's token name.
    pub agent: String,
    /// The browser's label, and its owner if it has one.
    pub browser: String,
    pub owner: Option<String>,
    pub started: When,
    pub last_action: When,
    /// "Working", "Idle", "Starting", "Asking the person", "Waiting for the
    /// person's help", "Stopping".
    pub state: &'static str,
    /// Why the agent wanted the browser, as it said.
    pub purpose: Option<String>,
    /// The agent handed the page to the person and waits for them.
    pub help_waiting: bool,
}

#[derive(Template)]
#[template(path = "console/sessions.html")]
struct SessionsPage {
    frame: Option<Frame>,
    admin: bool,
    rows: Vec<SessionRow>,
}

/// The sessions `me` may see, as the page and its live updates show them: the
/// team's for an admin, those on their own browsers for a member.
pub async fn session_rows(state: &AppState, me: &SignedIn) -> Result<Vec<SessionRow>, ApiError> {
    let tenant = &me.principal.tenant_id;
    let devices = visible(state, me).await?;
    let owners = crate::admin::devices::owners(state, tenant, &devices).await?;
    let browsers: HashMap<&str, (&str, Option<String>)> = devices
        .iter()
        .map(|d| {
            let owner = d
                .owner_id
                .as_ref()
                .and_then(|id| owners.get(id))
                .map(|o| person(&o.display_name, &o.email));
            (d.id.as_str(), (d.label.as_str(), owner))
        })
        .collect();
    let now = state.clock.now_ms();
    let all = routed::list(state, Scope::Admin { tenant_id: tenant }).await;
    Ok(all
        .sessions
        .into_iter()
        .filter_map(|s| {
            let (label, owner) = browsers.get(s.browser_id.as_str())?;
            Some(row(now, s, label, owner.clone()))
        })
        .collect())
}

fn row(now: i64, s: SessionView, label: &str, owner: Option<String>) -> SessionRow {
    let at = |text: &str| crate::clock::parse_rfc3339(text).unwrap_or(now);
    SessionRow {
        agent: s
            .agent
            .strip_prefix("token:")
            .unwrap_or(&s.agent)
            .to_owned(),
        browser: label.to_owned(),
        owner,
        started: When::of(now, at(&s.created_at)),
        last_action: When::of(now, at(&s.last_activity_at)),
        state: match s.phase {
            SessionPhase::Starting => "Starting",
            SessionPhase::ConsentPending => "Asking the person",
            SessionPhase::Stopping => "Stopping",
            _ if s.asking_for_help => "Waiting for the person's help",
            _ if s.busy => "Working",
            _ => "Idle",
        },
        purpose: s.purpose,
        help_waiting: s.asking_for_help,
        id: s.id,
    }
}

pub async fn list(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    let rows = session_rows(&state, &me).await?;
    Ok(render(
        StatusCode::OK,
        &SessionsPage {
            frame: Some(me.frame()),
            admin: me.is_admin(),
            rows,
        },
    ))
}

/// End a session: an admin any of the team's, as `DELETE /v1/admin/sessions/{id}`
/// (`stopped_by_admin`); a member one on their own browser, as the person's Stop
/// in the browser (`user_stopped`). Any other answers as an unknown session.
pub async fn end(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    let tenant_id = &me.principal.tenant_id;
    let ended = match (me.is_admin(), me.principal.member_id.as_deref()) {
        (true, _) => routed::stop(&state, Scope::Admin { tenant_id }, &id).await,
        (false, Some(member_id)) => routed::stop_for_owner(&state, tenant_id, member_id, &id).await,
        (false, None) => Err(CoreError::SessionNotFound),
    };
    ended.map_err(ApiError::from)?;
    Ok(Redirect::to("/console/sessions").into_response())
}
