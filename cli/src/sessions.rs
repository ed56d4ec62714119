//! Agent commands around the tools: the team's browsers, and starting, stopping
//! and listing sessions (Agent Windows). An admin's view of the team's sessions
//! (`latchkey admin sessions`) prints through [`sessions_table`] too.

use std::time::Duration;

use latchkey_protocol::agent::{
    BrowserList, SessionList, SessionView, StartSessionRequest, StopSessionResult,
};
use reqwest::Method;

use crate::args::SessionCommand;
use crate::client::{ApiClient, NO_BODY};
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, note, opt, out, table};
use crate::tools::segment;
use crate::when;

fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    crate::output::json(value);
    Ok(())
}

pub async fn browsers(client: &ApiClient, json: bool) -> Result<(), CliError> {
    let list: BrowserList = client.call(Method::GET, "/v1/browsers", NO_BODY).await?;
    if json {
        return print_json(&list);
    }
    if list.browsers.is_empty() {
        out!("no browsers; an admin pairs one with `latchkey admin pair`");
    }
    let now = when::now();
    let shown = ids::shorten_each(&list.browsers, |b| &b.id);
    let rows: Vec<Vec<String>> = list
        .browsers
        .iter()
        .zip(shown)
        .map(|(b, id)| {
            vec![
                id,
                b.label.clone(),
                if b.online {
                    "online".into()
                } else {
                    "offline".into()
                },
                opt(&b.browser_name),
                b.sessions.to_string(),
                when::relative_opt(b.last_seen_at.as_deref(), now),
                when::relative(&b.expires_at, now),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "LABEL",
            "STATE",
            "BROWSER",
            "SESSIONS",
            "LAST SEEN",
            "EXPIRES",
        ],
        &rows,
    );
    Ok(())
}

pub async fn session(client: &ApiClient, cmd: SessionCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        SessionCommand::Start {
            browser,
            width,
            height,
            focus,
            background: _,
            wait_for_browser,
            purpose,
        } => {
            let browser_id = match browser {
                Some(b) => Some(resolve(client, IdKind::Browser, &b).await?),
                None => None,
            };
            let body = StartSessionRequest {
                browser_id,
                width,
                height,
                focused: focus.then_some(true),
                wait_for_browser_ms: wait_for_browser.map(|s| s.saturating_mul(1000)),
                purpose,
            };
            // The gateway may wait for a browser, then for its person's
            // answer (docs/policy.md, "Consent"), then for the window.
            let limit = Duration::from_millis(
                body.wait_for_browser_ms.unwrap_or(0)
                    + latchkey_protocol::additions::CONSENT_TIMEOUT_MS
                    + 25_000,
            );
            let s: SessionView = client
                .call_within(Method::POST, "/v1/sessions", Some(&body), Some(limit))
                .await?;
            if json {
                return print_json(&s);
            }
            out!("{}", cell(&s.id));
            note!(
                "session started on browser {}; use --session {} (or LATCHKEY_SESSION)",
                cell(&s.browser_id),
                cell(&s.id)
            );
            Ok(())
        }
        SessionCommand::Stop { id } => {
            let id = resolve(client, IdKind::Session, &id).await?;
            let r: StopSessionResult = client
                .call(
                    Method::DELETE,
                    &format!("/v1/sessions/{}", segment(&id)),
                    NO_BODY,
                )
                .await?;
            if json {
                return print_json(&r);
            }
            if r.stopped {
                out!("session {} stopped", cell(&id));
            } else {
                out!(
                    "session {} is still open: some borrowed tabs could not be returned:",
                    cell(&id)
                );
                for f in &r.return_failures {
                    out!(
                        "  tab {}: {} ({})",
                        f.tab_id,
                        cell(&f.message),
                        cell(&f.code)
                    );
                }
                out!("retry `latchkey session stop {}`", cell(&id));
            }
            Ok(())
        }
        SessionCommand::List => {
            let list: SessionList = client.call(Method::GET, "/v1/sessions", NO_BODY).await?;
            if json {
                return print_json(&list);
            }
            sessions_table(&list.sessions, None);
            Ok(())
        }
    }
}

/// Sessions as a table; with `labels`, each browser by its label (an admin's view
/// of the team's sessions) and who runs it.
/// What a stop of session `id` by someone other than its agent did, the agent
/// having been told `told`; as JSON with `--json`.
pub fn say_stopped(id: &str, r: &StopSessionResult, told: &str, json: bool) {
    if json {
        crate::output::json(r);
    } else if r.stopped {
        out!("session {} stopped; its agent was told {told}", cell(id));
    } else {
        out!(
            "session {} is still open: {} borrowed tab(s) could not be returned; retry",
            cell(id),
            r.return_failures.len()
        );
    }
}

pub fn sessions_table(
    sessions: &[SessionView],
    labels: Option<&std::collections::HashMap<String, String>>,
) {
    if sessions.is_empty() {
        out!("no sessions");
        return;
    }
    let now = when::now();
    let shown = ids::shorten_each(sessions, |s| &s.id);
    let browsers = ids::shorten_each(sessions, |s| &s.browser_id);
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .zip(shown.into_iter().zip(browsers))
        .map(|(s, (id, browser))| {
            let browser = match labels.and_then(|l| l.get(&s.browser_id)) {
                Some(label) => format!("{label} ({browser})"),
                None => browser,
            };
            let mut row = vec![id, browser];
            if labels.is_some() {
                row.push(
                    s.agent
                        .strip_prefix("token:")
                        .unwrap_or(&s.agent)
                        .to_string(),
                );
            }
            row.extend([
                phase(s),
                when::relative(&s.created_at, now),
                when::relative(&s.last_activity_at, now),
            ]);
            row
        })
        .collect();
    let mut headers = vec!["ID", "BROWSER"];
    if labels.is_some() {
        headers.push("AGENT");
    }
    headers.extend(["STATE", "STARTED", "LAST ACTION"]);
    table(&headers, &rows);
}

/// Where a session is, in a word: busy while a call runs.
fn phase(s: &SessionView) -> String {
    use latchkey_protocol::agent::SessionPhase;
    match s.phase {
        SessionPhase::Open if s.asking_for_help => "person helping",
        SessionPhase::Open if s.busy => "busy",
        SessionPhase::Open => "idle",
        SessionPhase::Starting => "starting",
        SessionPhase::ConsentPending => "asking person",
        SessionPhase::Stopping => "stopping",
    }
    .to_string()
}
