//! Results of the session, tab and window methods (docs/protocol.md, "Sessions"
//! and "Tabs and window").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::agent::ReturnFailure;

/// `tool.session_start`: the Agent Window opened. The protocol marks the id
/// optional; extensions send it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct SessionStartResult {
    pub agent_window_id: Option<i64>,
}

/// `tool.session_stop`. With `return_failures` the session and its window stay
/// open, and the stop may be retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct SessionStopResult {
    pub returned_tab_ids: Option<Vec<i64>>,
    pub return_failures: Option<Vec<ReturnFailure>>,
}

/// `tool.tab_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabListResult {
    pub tabs: Vec<ListedTab>,
}

/// One tab of `tool.tab_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ListedTab {
    pub tab_id: i64,
    pub title: Option<String>,
    pub url: Option<String>,
    pub window_id: Option<i64>,
    pub active: Option<bool>,
    pub scope: Option<TabSide>,
}

/// Whose a listed tab is: the person's, or this session's Agent Window's (tabs of
/// other sessions' windows are never listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum TabSide {
    User,
    Agent,
}

/// `tool.tab_create`: always in the Agent Window. `url` may be empty while the tab
/// has only a pending URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabCreateResult {
    pub tab_id: i64,
    pub window_id: i64,
    pub url: String,
}

/// `tool.tab_close`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabCloseResult {
    pub tab_id: i64,
}

/// `tool.tab_select`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabSelectResult {
    pub tab_id: i64,
    pub window_id: i64,
}

/// `tool.tab_borrow`: the person allowed it, and the tab moved to the end of the
/// Agent Window; where it came from is kept for its return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabBorrowResult {
    pub tab_id: i64,
    pub original_window_id: i64,
    pub original_index: i32,
    pub agent_window_id: i64,
}

/// `tool.tab_return`. `fallback`: the original window was gone, so the tab went to
/// another of the person's windows (index −1) or a new one (index 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct TabReturnResult {
    pub tab_id: i64,
    pub returned_to_window_id: i64,
    pub returned_to_index: i32,
    /// Absent when false.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub fallback: bool,
}

/// `tool.window_resize`: the Agent Window's outer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct WindowResizeResult {
    pub window_id: i64,
    pub width: u32,
    pub height: u32,
}

/// `tool.emulate`. `applied` (the overrides now in force, in the params' shape) is
/// absent when they were cleared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct EmulateResult {
    pub tab_id: i64,
    pub cleared: bool,
    #[ts(optional, type = "Record<string, unknown>")]
    pub applied: Option<Map<String, Value>>,
    pub note: Option<String>,
}
