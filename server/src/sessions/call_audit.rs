//! A tool call's row in the team's audit trail (docs/operations.md, "Audit"): the
//! method, where it acted (the host of the page, or of the URL it opened), how it
//! ended and how long it took. Metadata only: never a param value, a typed text,
//! page content or a screenshot.
//!
//! The gateway learns which tab shows which host from the small answers of the
//! calls that move tabs (navigations, `tab_create`, `tab_select`, `tab_list`),
//! never by reading a page's answer, so the row costs no parse of a large
//! result.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::audit::{Event, action};
use crate::core_error::CoreError;
use crate::sessions::table::Session;
use latchkey_protocol::tools::failures::FailureReason;

/// Tabs remembered per session; past this one is forgotten to make room (its
/// calls then have no host in their rows until a listing names it again).
const MAX_TABS: usize = 64;

/// Which host each of a session's tabs shows, as far as the gateway knows, and
/// which tab its page actions act on when they name none.
#[derive(Debug, Default)]
pub struct TabHosts {
    hosts: HashMap<i64, String>,
    current: Option<i64>,
}

/// The host of `url`, without a trailing dot; `None` when it has none.
pub fn host_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let host = host.strip_suffix('.').unwrap_or(host);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The parts of the answers that move tabs.
#[derive(Deserialize)]
struct Moved {
    tab_id: Option<i64>,
    url: Option<String>,
    final_url: Option<String>,
    tabs: Option<Vec<Listed>>,
}

#[derive(Deserialize)]
struct Listed {
    tab_id: i64,
    url: Option<String>,
}

impl TabHosts {
    /// Learn from a successful answer of `method` (the methods that move tabs
    /// only; every other answer is left unread).
    pub fn learn(&mut self, method: &str, result: &str) {
        let moves = matches!(
            method,
            "tool.navigate"
                | "tool.navigate_back"
                | "tool.navigate_forward"
                | "tool.reload"
                | "tool.tab_create"
                | "tool.tab_select"
                | "tool.tab_list"
                | "tool.tab_close"
        );
        if !moves {
            return;
        }
        let Ok(moved) = serde_json::from_str::<Moved>(result) else {
            return;
        };
        if let Some(tabs) = moved.tabs {
            for t in tabs {
                if let Some(h) = t.url.as_deref().and_then(host_of) {
                    self.set(t.tab_id, h);
                }
            }
            return;
        }
        let Some(tab) = moved.tab_id else { return };
        if method == "tool.tab_close" {
            self.hosts.remove(&tab);
            if self.current == Some(tab) {
                self.current = None;
            }
            return;
        }
        self.current = Some(tab);
        if let Some(h) = moved.final_url.or(moved.url).as_deref().and_then(host_of) {
            self.set(tab, h);
        }
    }

    fn set(&mut self, tab: i64, host: String) {
        if self.hosts.len() >= MAX_TABS
            && !self.hosts.contains_key(&tab)
            && let Some(&drop) = self.hosts.keys().next()
        {
            self.hosts.remove(&drop);
        }
        self.hosts.insert(tab, host);
    }

    /// The host a call acts on: the URL it opens, else its tab's (named, or the
    /// one the session last moved to).
    pub fn target(&self, method: &str, params: &Map<String, Value>) -> Option<String> {
        let opens = matches!(
            method,
            "tool.navigate" | "tool.tab_create" | "tool.record_start"
        );
        if opens && let Some(url) = params.get("url").and_then(Value::as_str) {
            return host_of(url);
        }
        let tab = params
            .get("tab_id")
            .and_then(Value::as_i64)
            .or(self.current)?;
        self.hosts.get(&tab).cloned()
    }
}

/// The stable reason of a failed call, for its row: the gateway's own, or one
/// the protocol lists for a browser's answer (a borrow the person denied or
/// let time out). A reason the protocol does not list is left out: the row
/// holds nothing a peer made up.
pub fn reason_of(e: &CoreError) -> Option<&'static str> {
    if let CoreError::Browser(body) = e {
        let said = body.data.as_ref()?.get("reason")?.as_str()?;
        return FailureReason::ALL
            .iter()
            .map(|r| r.as_str())
            .find(|r| *r == said);
    }
    e.reason()
}

/// How a person's part of a `tool.request_help` ended, from its answer:
/// `continued` (Done), `cancelled` (declined), `timed_out` or `completed` (the
/// criteria held). Only a value the protocol lists; `navigated`, from older
/// extensions, reads as `continued`.
pub fn help_outcome(method: &str, answer: &str) -> Option<&'static str> {
    use latchkey_protocol::tools::results::HelpOutcome;
    if method != "tool.request_help" {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        outcome: HelpOutcome,
    }
    let answer: Answer = serde_json::from_str(answer).ok()?;
    Some(match answer.outcome {
        HelpOutcome::Continued | HelpOutcome::Navigated => "continued",
        HelpOutcome::Cancelled => "cancelled",
        HelpOutcome::TimedOut => "timed_out",
        HelpOutcome::Completed => "completed",
    })
}

/// The `session.help_requested` row: the browser and the host of the page the
/// person is asked about; never the agent's prompt.
pub fn help_requested<'a>(session: &'a Session, host: Option<&str>) -> Event<'a> {
    let mut detail = format!("device:{}", session.device_id);
    if let Some(h) = host {
        detail.push_str(" host:");
        detail.push_str(h);
    }
    Event {
        tenant_id: &session.tenant_id,
        actor: session.actor.clone(),
        action: action::SESSION_HELP_REQUESTED,
        target: crate::audit::session_ref(&session.id),
        outcome: "ok",
        detail: Some(detail),
    }
}

/// What a call's row says beyond its method and host.
#[derive(Debug, Clone, Copy, Default)]
pub struct Notes<'a> {
    /// A failed call's stable reason ([`reason_of`]).
    pub reason: Option<&'a str>,
    /// A help request's outcome ([`help_outcome`]).
    pub help: Option<&'a str>,
}

/// The `session.call` row of a call on `session`.
pub fn row<'a>(
    session: &'a Session,
    method: &str,
    host: Option<&str>,
    outcome: &'a str,
    notes: Notes<'_>,
    took: Duration,
) -> Event<'a> {
    use std::fmt::Write as _;
    let mut detail = String::with_capacity(64);
    detail.push_str(method);
    if let Some(h) = host {
        detail.push_str(" host:");
        detail.push_str(h);
    }
    if let Some(r) = notes.reason {
        detail.push_str(" reason:");
        detail.push_str(r);
    }
    if let Some(h) = notes.help {
        detail.push_str(" help:");
        detail.push_str(h);
    }
    // Writing into a String cannot fail.
    let _ = write!(detail, " {}ms", took.as_millis());
    Event {
        tenant_id: &session.tenant_id,
        actor: session.actor.clone(),
        action: action::SESSION_CALL,
        target: crate::audit::session_ref(&session.id),
        outcome,
        detail: Some(detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_help_request_says_how_it_ended_and_nothing_made_up() {
        let answer = |o: &str| format!(r#"{{"outcome": "{o}", "tab_id": 3}}"#);
        for (said, row) in [
            ("continued", "continued"),
            ("navigated", "continued"),
            ("cancelled", "cancelled"),
            ("timed_out", "timed_out"),
            ("completed", "completed"),
        ] {
            assert_eq!(
                help_outcome("tool.request_help", &answer(said)),
                Some(row),
                "{said}"
            );
        }
        assert_eq!(help_outcome("tool.request_help", &answer("hacked")), None);
        assert_eq!(help_outcome("tool.request_help", "not json"), None);
        assert_eq!(help_outcome("tool.click", &answer("continued")), None);
    }

    #[test]
    fn the_host_follows_the_tabs_the_answers_move() {
        let mut tabs = TabHosts::default();
        assert_eq!(tabs.target("tool.click", &params(json!({}))), None);
        assert_eq!(
            tabs.target(
                "tool.navigate",
                &params(json!({"url": "https://Shop.example./x"}))
            ),
            Some("shop.example".into())
        );
        tabs.learn(
            "tool.navigate",
            r#"{"tab_id": 4, "url": "https://a.test/", "final_url": "https://b.test/x", "reached": "load"}"#,
        );
        assert_eq!(
            tabs.target("tool.click", &params(json!({}))),
            Some("b.test".into())
        );
        tabs.learn(
            "tool.tab_create",
            r#"{"tab_id": 5, "url": "https://c.test/"}"#,
        );
        assert_eq!(
            tabs.target("tool.fill", &params(json!({}))),
            Some("c.test".into())
        );
        assert_eq!(
            tabs.target("tool.fill", &params(json!({"tab_id": 4}))),
            Some("b.test".into())
        );
        tabs.learn("tool.tab_select", r#"{"tab_id": 4}"#);
        assert_eq!(
            tabs.target("tool.snapshot", &params(json!({}))),
            Some("b.test".into())
        );
        tabs.learn(
            "tool.tab_list",
            r#"{"tabs": [{"tab_id": 4, "url": "https://d.test/"}, {"tab_id": 9, "url": "about:blank"}]}"#,
        );
        assert_eq!(
            tabs.target("tool.snapshot", &params(json!({}))),
            Some("d.test".into())
        );
        tabs.learn("tool.tab_close", r#"{"tab_id": 4}"#);
        assert_eq!(tabs.target("tool.snapshot", &params(json!({}))), None);
        // A page's answer is never read.
        tabs.learn(
            "tool.get_html",
            r#"{"tab_id": 5, "html": "<a href='https://e.test'>"}"#,
        );
        assert_eq!(tabs.target("tool.snapshot", &params(json!({}))), None);
    }

    #[test]
    fn knowledge_is_bounded() {
        let mut tabs = TabHosts::default();
        for id in 0..200 {
            tabs.learn(
                "tool.tab_create",
                &format!(r#"{{"tab_id": {id}, "url": "https://t{id}.test/"}}"#),
            );
        }
        assert!(tabs.hosts.len() <= MAX_TABS);
        assert_eq!(
            tabs.target("tool.click", &params(json!({}))),
            Some("t199.test".into())
        );
    }
}
