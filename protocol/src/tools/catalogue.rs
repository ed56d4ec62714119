//! The tool catalogue: every `tool.*` method of the extension protocol, in one
//! table (docs/protocol.md, "Tools"). What each method does to the browser (its
//! effect class), how long the gateway waits for it, whether the gateway answers it
//! itself or lets it past a busy session, what it is for, how its params are judged
//! and what its result holds. The gateway's call pipeline, its metrics labels, the
//! CLI's commands, its wait for an answer and its reading of the answer, and the
//! `user_aborted` gate all read it from here, so that a method is described once.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use ts_rs::TS;

use super::capability::Capability;
use super::params::{self, ParamError};
use super::reading::{Rules, check, read, schema_of};
use super::results;
use crate::effect::{Effect, SESSION_START_TIMEOUT_MS, SESSION_STOP_TIMEOUT_MS};

/// One method of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub method: &'static str,
    pub effect: Effect,
    /// The class a person lends when they allow this method on their browser.
    pub capability: Capability,
    /// The browser times its wait itself from the params' `timeout_ms` (a person
    /// answers): the gateway waits [`PERSON_GRACE_MS`] longer, so the browser's own
    /// answer arrives first.
    pub waits_for_person: bool,
    /// Answered by the gateway; never sent to the browser.
    pub gateway_local: bool,
    /// May run while another call of its session is in flight.
    pub busy_exempt: bool,
    /// Opened and closed only by the gateway, through the session API.
    pub session_lifecycle: bool,
    /// The gateway's wait without a `timeout_ms`.
    pub default_deadline_ms: u64,
    /// What it is for, in one line.
    pub summary: &'static str,
    validate: fn(&Map<String, Value>) -> Result<(), ParamError>,
    params_schema: fn() -> Value,
    read_result: fn(&Value) -> Result<(), ParamError>,
    result_schema: fn() -> Value,
    params_ts: fn(&ts_rs::Config) -> String,
    result_ts: fn(&ts_rs::Config) -> String,
}

impl Tool {
    /// Judge `params` (without the gateway's `session_id`).
    pub fn validate(&self, params: &Map<String, Value>) -> Result<(), ParamError> {
        (self.validate)(params)
    }

    /// The JSON Schema of the params (without the gateway's `session_id`), from
    /// the same Rust type [`Self::validate`] reads.
    pub fn params_schema(&self) -> Value {
        (self.params_schema)()
    }

    /// Read a browser's result as the catalogue describes it: a key the protocol
    /// defines holding something else is named (unknown keys are fine).
    pub fn read_result(&self, result: &Value) -> Result<(), ParamError> {
        (self.read_result)(result)
    }

    /// The JSON Schema of the result, from the same Rust type
    /// [`Self::read_result`] reads.
    pub fn result_schema(&self) -> Value {
        (self.result_schema)()
    }

    /// The names of the params and result types in `protocol/bindings/tools/`.
    pub fn typescript_names(&self, cfg: &ts_rs::Config) -> (String, String) {
        ((self.params_ts)(cfg), (self.result_ts)(cfg))
    }
}

/// Default deadline of a tool call without `timeout_ms`.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// `tool.request_help` waits for a person: five minutes.
pub const PERSON_DEADLINE_MS: u64 = 300_000;
/// How much longer the gateway waits than a browser that times a person's answer.
pub const PERSON_GRACE_MS: u64 = 5_000;

/// A method with params `P` and result `R`, and every flag at its usual value.
const fn tool<P, R>(
    method: &'static str,
    effect: Effect,
    capability: Capability,
    summary: &'static str,
) -> Tool
where
    P: for<'de> Deserialize<'de> + Rules + JsonSchema + TS,
    R: for<'de> Deserialize<'de> + JsonSchema + TS,
{
    Tool {
        method,
        effect,
        capability,
        waits_for_person: false,
        gateway_local: false,
        busy_exempt: false,
        session_lifecycle: false,
        default_deadline_ms: DEFAULT_DEADLINE_MS,
        summary,
        validate: check::<P>,
        params_schema: schema_of::<P>,
        read_result: read::<R>,
        result_schema: schema_of::<R>,
        params_ts: <P as TS>::ident,
        result_ts: <R as TS>::ident,
    }
}

use Effect::{
    BrowserMutation as Mutation, ControlPlane as Control, PassiveRead as Read,
    TransientInput as Transient,
};

/// Every method, in the order of docs/protocol.md.
pub static TOOLS: &[Tool] = &[
    Tool {
        session_lifecycle: true,
        default_deadline_ms: SESSION_START_TIMEOUT_MS,
        ..tool::<params::Nothing, results::SessionStartResult>(
            "tool.session_start",
            Control,
            Capability::Session,
            "open an Agent Window",
        )
    },
    Tool {
        session_lifecycle: true,
        default_deadline_ms: SESSION_STOP_TIMEOUT_MS,
        ..tool::<params::Nothing, results::SessionStopResult>(
            "tool.session_stop",
            Control,
            Capability::Session,
            "close the Agent Window, returning borrowed tabs",
        )
    },
    tool::<params::TabList, results::TabListResult>(
        "tool.tab_list",
        Read,
        Capability::Read,
        "list the person's tabs and the window's",
    ),
    tool::<params::TabCreate, results::TabCreateResult>(
        "tool.tab_create",
        Mutation,
        Capability::Navigate,
        "open a tab in the Agent Window",
    ),
    tool::<params::TabRequired, results::TabCloseResult>(
        "tool.tab_close",
        Mutation,
        Capability::Navigate,
        "close a tab of the Agent Window",
    ),
    tool::<params::TabRequired, results::TabSelectResult>(
        "tool.tab_select",
        Mutation,
        Capability::Navigate,
        "make a tab of the Agent Window active",
    ),
    Tool {
        // The browser times the person's answer itself (60 s by default in
        // our extension, which the person can change up to this deadline).
        waits_for_person: true,
        default_deadline_ms: PERSON_DEADLINE_MS,
        ..tool::<params::TabBorrow, results::TabBorrowResult>(
            "tool.tab_borrow",
            Mutation,
            Capability::Borrow,
            "ask the person to lend one of their tabs",
        )
    },
    tool::<params::TabRequired, results::TabReturnResult>(
        "tool.tab_return",
        Mutation,
        Capability::Borrow,
        "give a borrowed tab back",
    ),
    tool::<params::WindowResize, results::WindowResizeResult>(
        "tool.window_resize",
        Mutation,
        Capability::Navigate,
        "resize the Agent Window",
    ),
    tool::<params::Emulate, results::EmulateResult>(
        "tool.emulate",
        Mutation,
        Capability::Navigate,
        "emulate a viewport, user agent or touch",
    ),
    tool::<params::Navigate, results::NavigateResult>(
        "tool.navigate",
        Mutation,
        Capability::Navigate,
        "load a URL",
    ),
    tool::<params::History, results::HistoryResult>(
        "tool.navigate_back",
        Mutation,
        Capability::Navigate,
        "go back in history",
    ),
    tool::<params::History, results::HistoryResult>(
        "tool.navigate_forward",
        Mutation,
        Capability::Navigate,
        "go forward in history",
    ),
    tool::<params::Reload, results::HistoryResult>(
        "tool.reload",
        Mutation,
        Capability::Navigate,
        "reload the page",
    ),
    tool::<params::History, results::WaitForNavigationResult>(
        "tool.wait_for_navigation",
        Read,
        Capability::Read,
        "wait for a load phase",
    ),
    Tool {
        gateway_local: true,
        ..tool::<params::WaitMs, results::WaitMsResult>(
            "tool.wait_ms",
            Read,
            Capability::Session,
            "wait, on the gateway",
        )
    },
    tool::<params::Click, results::PointerResult>(
        "tool.click",
        Mutation,
        Capability::Input,
        "click an element",
    ),
    tool::<params::Hover, results::PointerResult>(
        "tool.hover",
        Transient,
        Capability::Input,
        "move the pointer over an element",
    ),
    tool::<params::Fill, results::FillResult>(
        "tool.fill",
        Mutation,
        Capability::Input,
        "type a value into a field",
    ),
    tool::<params::Press, results::PressResult>(
        "tool.press",
        Mutation,
        Capability::Input,
        "press a key or chord",
    ),
    tool::<params::Select, results::SelectResult>(
        "tool.select",
        Mutation,
        Capability::Input,
        "choose options of a select",
    ),
    tool::<params::Snapshot, results::SnapshotResult>(
        "tool.snapshot",
        Read,
        Capability::Read,
        "the page as text with element refs",
    ),
    tool::<params::Observe, results::ObserveResult>(
        "tool.observe",
        Transient,
        Capability::Input,
        "a snapshot with hover probes",
    ),
    tool::<params::GetHtml, results::GetHtmlResult>(
        "tool.get_html",
        Read,
        Capability::Read,
        "the page's or an element's HTML",
    ),
    tool::<params::Screenshot, results::ScreenshotResult>(
        "tool.screenshot",
        Read,
        Capability::Read,
        "a PNG of the tab or of an element",
    ),
    tool::<params::LogRead, results::ConsoleResult>(
        "tool.console",
        Read,
        Capability::Read,
        "console messages since a cursor",
    ),
    tool::<params::LogRead, results::NetworkResult>(
        "tool.network",
        Read,
        Capability::Read,
        "network requests since a cursor",
    ),
    tool::<params::Evaluate, results::EvaluateResult>(
        "tool.evaluate",
        Mutation,
        Capability::Script,
        "run JavaScript in the page (if the person allows it)",
    ),
    Tool {
        waits_for_person: true,
        default_deadline_ms: PERSON_DEADLINE_MS,
        ..tool::<params::RequestHelp, results::RequestHelpResult>(
            "tool.request_help",
            Read,
            Capability::Read,
            "hand the page to the person and wait",
        )
    },
    tool::<params::RecordStart, results::RecordStartResult>(
        "tool.record_start",
        Mutation,
        Capability::Navigate,
        "record what the person does",
    ),
    Tool {
        busy_exempt: true,
        ..tool::<params::Nothing, results::RecordResult>(
            "tool.record_stop",
            Read,
            Capability::Read,
            "stop a recording",
        )
    },
    tool::<params::RecordAwait, results::RecordResult>(
        "tool.record_await",
        Read,
        Capability::Read,
        "wait for the person to finish a recording",
    ),
];

/// The catalogue's entry for `method`, if it has one.
pub fn tool_named(method: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.method == method)
}

/// How long the gateway waits for a call of `method` (docs/protocol.md,
/// "Sessions"): the call's own `timeout_ms`, else its params' `timeout_ms` (plus
/// [`PERSON_GRACE_MS`] where the browser times a person's answer itself), else the
/// method's default. Ranges are the caller's to check.
pub fn deadline_ms(
    method: &str,
    call_timeout_ms: Option<u64>,
    params_timeout_ms: Option<u64>,
) -> u64 {
    let entry = tool_named(method);
    let person = entry.is_some_and(|t| t.waits_for_person);
    match (call_timeout_ms, params_timeout_ms) {
        (Some(ms), _) => ms,
        (None, Some(ms)) if person => ms.saturating_add(PERSON_GRACE_MS),
        (None, Some(ms)) => ms,
        (None, None) => {
            let default = entry.map_or(DEFAULT_DEADLINE_MS, |t| t.default_deadline_ms);
            if person {
                default.saturating_add(PERSON_GRACE_MS)
            } else {
                default
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_once_and_every_flag_where_the_protocol_puts_it() {
        let mut seen = std::collections::HashSet::new();
        for t in TOOLS {
            assert!(seen.insert(t.method), "{} twice", t.method);
            assert!(t.method.starts_with("tool."));
        }
        assert_eq!(TOOLS.len(), 32, "the protocol's 32 tool methods");
        let flagged = |f: fn(&Tool) -> bool| -> Vec<&str> {
            TOOLS.iter().filter(|t| f(t)).map(|t| t.method).collect()
        };
        assert_eq!(flagged(|t| t.gateway_local), ["tool.wait_ms"]);
        assert_eq!(flagged(|t| t.busy_exempt), ["tool.record_stop"]);
        assert_eq!(
            flagged(|t| t.waits_for_person),
            ["tool.tab_borrow", "tool.request_help"]
        );
        assert_eq!(
            flagged(|t| t.session_lifecycle),
            ["tool.session_start", "tool.session_stop"]
        );
        assert_eq!(
            flagged(|t| t.effect == Effect::TransientInput),
            ["tool.hover", "tool.observe"]
        );
    }

    #[test]
    fn one_deadline_rule() {
        assert_eq!(deadline_ms("tool.click", None, None), 30_000);
        assert_eq!(deadline_ms("tool.click", None, Some(1_000)), 1_000);
        assert_eq!(deadline_ms("tool.click", Some(2_000), Some(1_000)), 2_000);
        assert_eq!(deadline_ms("tool.request_help", None, None), 305_000);
        assert_eq!(
            deadline_ms("tool.request_help", None, Some(120_000)),
            125_000
        );
        assert_eq!(
            deadline_ms("tool.request_help", Some(60_000), Some(120_000)),
            60_000
        );
        assert_eq!(deadline_ms("tool.brand_new", None, None), 30_000);
    }
}
