//! The result of every `tool.*` method, as Rust types (docs/protocol.md, "Tools").
//! They are the catalogue's word on what a browser answers: the JSON Schema in
//! `protocol/schema/tools.json` and the TypeScript in `protocol/bindings/tools/` are
//! generated from them, and the CLI reads every answer with them to tell a person
//! when a browser answers something else (an extension of another version, say).
//!
//! Reading is lenient where the protocol asks receivers to be: keys it does not
//! define are ignored, an absent optional or array is absent, and a missing flag
//! is its default. What a defined key holds is checked.

mod page;
mod tabs;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub use page::*;
pub use tabs::*;

/// A JavaScript dialog that appeared during a call and was answered at once (the
/// `dialogs` of results marked +D in docs/protocol.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct Dialog {
    pub tab_id: i64,
    #[serde(rename = "type")]
    pub kind: DialogKind,
    pub message: String,
    pub url: Option<String>,
    /// `prompt` dialogs only.
    pub default_prompt: Option<String>,
    pub has_browser_handler: Option<bool>,
    pub handled: DialogAnswer,
    /// Per tab, increasing.
    pub sequence: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum DialogKind {
    Alert,
    Confirm,
    Prompt,
    Beforeunload,
}

/// How a dialog was answered: `alert` and `beforeunload` accepted, `confirm` and
/// `prompt` dismissed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum DialogAnswer {
    Accepted,
    Dismissed,
}

/// The lifecycle phase a navigation or wait reached: the one asked for, or
/// `timeout` (a success that carries `error_text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum Reached {
    Load,
    Domcontentloaded,
    Networkidle,
    Commit,
    Timeout,
}

/// `tool.wait_ms`, answered by the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct WaitMsResult {
    pub waited_ms: u64,
}

/// `tool.navigate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct NavigateResult {
    pub tab_id: i64,
    /// As requested.
    pub url: String,
    pub final_url: Option<String>,
    pub reached: Reached,
    pub error_text: Option<String>,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.navigate_back`, `tool.navigate_forward`, `tool.reload`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct HistoryResult {
    pub tab_id: i64,
    pub previous_url: Option<String>,
    pub final_url: Option<String>,
    pub reached: Reached,
    pub error_text: Option<String>,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.wait_for_navigation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct WaitForNavigationResult {
    pub tab_id: i64,
    pub reached: Reached,
    pub error_text: Option<String>,
    pub dialogs: Option<Vec<Dialog>>,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::tools::TOOLS;

    /// One answer per method as docs/protocol.md shows it (the browser end-to-end
    /// tests read the real extension's answers the same way, through the CLI).
    fn example(method: &str) -> Value {
        let dialog = json!({"tab_id": 4, "type": "confirm", "message": "Sure?", "handled": "dismissed", "sequence": 1});
        match method {
            "tool.session_start" => json!({"agent_window_id": 9}),
            "tool.session_stop" => {
                json!({"return_failures": [{"tab_id": 4, "code": "cdp_failed", "message": "gone"}]})
            }
            "tool.tab_list" => {
                json!({"tabs": [{"tab_id": 4, "title": "A", "url": "https://a/", "window_id": 9, "active": true, "scope": "agent"}]})
            }
            "tool.tab_create" => json!({"tab_id": 4, "window_id": 9, "url": ""}),
            "tool.tab_close" => json!({"tab_id": 4}),
            "tool.tab_select" => json!({"tab_id": 4, "window_id": 9}),
            "tool.tab_borrow" => {
                json!({"tab_id": 4, "original_window_id": 1, "original_index": 2, "agent_window_id": 9})
            }
            "tool.tab_return" => {
                json!({"tab_id": 4, "returned_to_window_id": 1, "returned_to_index": -1, "fallback": true})
            }
            "tool.window_resize" => json!({"window_id": 9, "width": 800, "height": 600}),
            "tool.emulate" => {
                json!({"tab_id": 4, "cleared": false, "applied": {"width": 390, "height": 844}})
            }
            "tool.navigate" => {
                json!({"tab_id": 4, "url": "https://a/", "final_url": "https://a/b", "reached": "load", "dialogs": [dialog]})
            }
            "tool.navigate_back" | "tool.navigate_forward" | "tool.reload" => {
                json!({"tab_id": 4, "previous_url": "https://a/", "reached": "timeout", "error_text": "slow"})
            }
            "tool.wait_for_navigation" => json!({"tab_id": 4, "reached": "networkidle"}),
            "tool.wait_ms" => json!({"waited_ms": 0}),
            "tool.click" | "tool.hover" => {
                json!({"tab_id": 4, "used_ref": "e3", "x": 10.5, "y": 20})
            }
            "tool.fill" => json!({"tab_id": 4, "used_selector": "#q", "value_length": 5}),
            "tool.press" => {
                json!({"tab_id": 4, "key": "a", "code": "KeyA", "modifiers": ["ctrl"]})
            }
            "tool.select" => {
                json!({"tab_id": 4, "used_ref": "e2", "multiple": false, "selected_values": ["x"], "selected_labels": ["X"]})
            }
            "tool.snapshot" => json!({"text": "- document", "ref_count": 0, "tab_id": 4}),
            "tool.observe" => {
                json!({"text": "- document", "ref_count": 0, "tab_id": 4, "truncated": false, "debug": {"surface_probes": []}})
            }
            "tool.get_html" => {
                json!({"html": "<p>", "truncated": true, "byte_size": 9, "tab_id": 4})
            }
            "tool.screenshot" => {
                json!({"image_base64": "iVBOR", "width": 0, "height": 0, "format": "png", "tab_id": 4})
            }
            "tool.console" => {
                json!({"tab_id": 4, "entries": [{"sequence": 1, "kind": "exception", "level": "error", "text": "x", "stack_trace": [{"line": 3}], "truncated": false}], "next_since": 1, "truncated": false})
            }
            "tool.network" => {
                json!({"tab_id": 4, "entries": [{"sequence": 2, "kind": "response", "status": 200, "truncated": false}], "next_since": 2, "truncated": true})
            }
            "tool.evaluate" => {
                json!({"ok": false, "tab_id": 4, "error": {"text": "ReferenceError", "line": 0}})
            }
            "tool.request_help" => {
                json!({"outcome": "completed", "completed_by": "system", "tab_id": 4, "resolved_targets": [{"matched": true, "ref": "e1"}]})
            }
            "tool.record_start" => json!({"tab_id": 4, "recording": true}),
            "tool.record_stop" | "tool.record_await" => {
                json!({"trace": {"recorded_at": "2026-12-03T10:00:00Z", "entry": {"start_url": "https://a/"}, "pages": [{"id": "p1", "url": "https://a/"}], "steps": [{"id": 1, "page": "p1", "op": "click", "target": "e1"}]}})
            }
            other => panic!("no example for {other}"),
        }
    }

    #[test]
    fn every_method_reads_its_documented_answer() {
        for tool in TOOLS {
            let answer = example(tool.method);
            assert_eq!(tool.read_result(&answer), Ok(()), "{}", tool.method);
        }
    }

    #[test]
    fn a_defined_key_holding_something_else_is_named() {
        let refuse = |method: &str, answer: Value| {
            let tool = crate::tools::tool_named(method).expect("in the catalogue");
            tool.read_result(&answer).expect_err(method).field
        };
        assert_eq!(
            refuse("tool.snapshot", json!({"ref_count": 0, "tab_id": 4})),
            "text"
        );
        assert_eq!(
            refuse(
                "tool.navigate",
                json!({"tab_id": 4, "url": "u", "reached": "later"})
            ),
            "reached"
        );
        assert_eq!(
            refuse(
                "tool.click",
                json!({"tab_id": 4, "x": 1, "y": 2, "dialogs": [{"tab_id": 4}]})
            ),
            "dialogs[0].type"
        );
        assert_eq!(
            refuse(
                "tool.screenshot",
                json!({"image_base64": "", "width": 1, "height": 1, "format": "jpeg", "tab_id": 4})
            ),
            "format"
        );
    }
}
