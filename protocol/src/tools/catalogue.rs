//! The tool catalogue: every `tool.*` method of the extension protocol, in one
//! table (docs/protocol.md, "Tools"). What each method does to the browser (its
//! effect class), how long the gateway waits for it, whether the gateway answers it
//! itself or lets it past a busy session, what it is for, and how its params are
//! judged. The gateway's call pipeline, its metrics labels, the CLI's wait for an
//! answer and the `user_aborted` gate all read it from here, so that a method is
//! described once.

use serde_json::{Map, Value};

use super::params::{self, ParamError, check, schema_of};
use crate::effect::{Effect, SESSION_START_TIMEOUT_MS, SESSION_STOP_TIMEOUT_MS};

/// One method of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub method: &'static str,
    pub effect: Effect,
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
}

/// Default deadline of a tool call without `timeout_ms`.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// `tool.request_help` waits for a person: five minutes.
pub const PERSON_DEADLINE_MS: u64 = 300_000;
/// How much longer the gateway waits than a browser that times a person's answer.
pub const PERSON_GRACE_MS: u64 = 5_000;

const fn tool(
    method: &'static str,
    effect: Effect,
    summary: &'static str,
    validate: fn(&Map<String, Value>) -> Result<(), ParamError>,
    params_schema: fn() -> Value,
) -> Tool {
    Tool {
        method,
        effect,
        waits_for_person: false,
        gateway_local: false,
        busy_exempt: false,
        session_lifecycle: false,
        default_deadline_ms: DEFAULT_DEADLINE_MS,
        summary,
        validate,
        params_schema,
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
        ..tool(
            "tool.session_start",
            Control,
            "open an Agent Window",
            check::<params::Nothing>,
            schema_of::<params::Nothing>,
        )
    },
    Tool {
        session_lifecycle: true,
        default_deadline_ms: SESSION_STOP_TIMEOUT_MS,
        ..tool(
            "tool.session_stop",
            Control,
            "close the Agent Window, returning borrowed tabs",
            check::<params::Nothing>,
            schema_of::<params::Nothing>,
        )
    },
    tool(
        "tool.tab_list",
        Read,
        "list the person's tabs and the window's",
        check::<params::TabList>,
        schema_of::<params::TabList>,
    ),
    tool(
        "tool.tab_create",
        Mutation,
        "open a tab in the Agent Window",
        check::<params::TabCreate>,
        schema_of::<params::TabCreate>,
    ),
    tool(
        "tool.tab_close",
        Mutation,
        "close a tab of the Agent Window",
        check::<params::TabRequired>,
        schema_of::<params::TabRequired>,
    ),
    tool(
        "tool.tab_select",
        Mutation,
        "make a tab of the Agent Window active",
        check::<params::TabRequired>,
        schema_of::<params::TabRequired>,
    ),
    tool(
        "tool.tab_borrow",
        Mutation,
        "ask the person to lend one of their tabs",
        check::<params::TabBorrow>,
        schema_of::<params::TabBorrow>,
    ),
    tool(
        "tool.tab_return",
        Mutation,
        "give a borrowed tab back",
        check::<params::TabRequired>,
        schema_of::<params::TabRequired>,
    ),
    tool(
        "tool.window_resize",
        Mutation,
        "resize the Agent Window",
        check::<params::WindowResize>,
        schema_of::<params::WindowResize>,
    ),
    tool(
        "tool.emulate",
        Mutation,
        "emulate a viewport, user agent or touch",
        check::<params::Emulate>,
        schema_of::<params::Emulate>,
    ),
    tool(
        "tool.navigate",
        Mutation,
        "load a URL",
        check::<params::Navigate>,
        schema_of::<params::Navigate>,
    ),
    tool(
        "tool.navigate_back",
        Mutation,
        "go back in history",
        check::<params::History>,
        schema_of::<params::History>,
    ),
    tool(
        "tool.navigate_forward",
        Mutation,
        "go forward in history",
        check::<params::History>,
        schema_of::<params::History>,
    ),
    tool(
        "tool.reload",
        Mutation,
        "reload the page",
        check::<params::Reload>,
        schema_of::<params::Reload>,
    ),
    tool(
        "tool.wait_for_navigation",
        Read,
        "wait for a load phase",
        check::<params::History>,
        schema_of::<params::History>,
    ),
    Tool {
        gateway_local: true,
        ..tool(
            "tool.wait_ms",
            Read,
            "wait, on the gateway",
            check::<params::WaitMs>,
            schema_of::<params::WaitMs>,
        )
    },
    tool(
        "tool.click",
        Mutation,
        "click an element",
        check::<params::Click>,
        schema_of::<params::Click>,
    ),
    tool(
        "tool.hover",
        Transient,
        "move the pointer over an element",
        check::<params::Hover>,
        schema_of::<params::Hover>,
    ),
    tool(
        "tool.fill",
        Mutation,
        "type a value into a field",
        check::<params::Fill>,
        schema_of::<params::Fill>,
    ),
    tool(
        "tool.press",
        Mutation,
        "press a key or chord",
        check::<params::Press>,
        schema_of::<params::Press>,
    ),
    tool(
        "tool.select",
        Mutation,
        "choose options of a select",
        check::<params::Select>,
        schema_of::<params::Select>,
    ),
    tool(
        "tool.snapshot",
        Read,
        "the page as text with element refs",
        check::<params::Snapshot>,
        schema_of::<params::Snapshot>,
    ),
    tool(
        "tool.observe",
        Transient,
        "a snapshot with hover probes",
        check::<params::Observe>,
        schema_of::<params::Observe>,
    ),
    tool(
        "tool.get_html",
        Read,
        "the page's or an element's HTML",
        check::<params::GetHtml>,
        schema_of::<params::GetHtml>,
    ),
    tool(
        "tool.screenshot",
        Read,
        "a PNG of the tab or of an element",
        check::<params::Screenshot>,
        schema_of::<params::Screenshot>,
    ),
    tool(
        "tool.console",
        Read,
        "console messages since a cursor",
        check::<params::LogRead>,
        schema_of::<params::LogRead>,
    ),
    tool(
        "tool.network",
        Read,
        "network requests since a cursor",
        check::<params::LogRead>,
        schema_of::<params::LogRead>,
    ),
    tool(
        "tool.evaluate",
        Mutation,
        "run JavaScript in the page (if the person allows it)",
        check::<params::Evaluate>,
        schema_of::<params::Evaluate>,
    ),
    Tool {
        waits_for_person: true,
        default_deadline_ms: PERSON_DEADLINE_MS,
        ..tool(
            "tool.request_help",
            Read,
            "hand the page to the person and wait",
            check::<params::RequestHelp>,
            schema_of::<params::RequestHelp>,
        )
    },
    tool(
        "tool.record_start",
        Mutation,
        "record what the person does",
        check::<params::RecordStart>,
        schema_of::<params::RecordStart>,
    ),
    Tool {
        busy_exempt: true,
        ..tool(
            "tool.record_stop",
            Read,
            "stop a recording",
            check::<params::Nothing>,
            schema_of::<params::Nothing>,
        )
    },
    tool(
        "tool.record_await",
        Read,
        "wait for the person to finish a recording",
        check::<params::RecordAwait>,
        schema_of::<params::RecordAwait>,
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
        assert_eq!(flagged(|t| t.waits_for_person), ["tool.request_help"]);
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
