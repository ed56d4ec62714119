//! Results of the page methods: input, observation, logs, script, the person, and
//! recording (docs/protocol.md, "Tools").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use super::Dialog;
use crate::tools::values::Modifier;

/// `tool.click` and `tool.hover`: where the pointer went, in viewport CSS pixels.
/// `used_ref` or `used_selector` echoes the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct PointerResult {
    pub tab_id: i64,
    pub used_ref: Option<String>,
    pub used_selector: Option<String>,
    pub x: f64,
    pub y: f64,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.fill`. `value_length` is in UTF-16 code units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct FillResult {
    pub tab_id: i64,
    pub used_ref: Option<String>,
    pub used_selector: Option<String>,
    pub value_length: u32,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.press`: the key as dispatched, and every modifier held (always present).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct PressResult {
    pub tab_id: i64,
    pub key: String,
    pub code: String,
    pub modifiers: Vec<Modifier>,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.select`: the selection now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct SelectResult {
    pub tab_id: i64,
    pub used_ref: Option<String>,
    pub used_selector: Option<String>,
    pub multiple: bool,
    pub selected_values: Vec<String>,
    pub selected_labels: Vec<String>,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.snapshot`: the page as text, its elements numbered `@e1`, `@e2`, … Every
/// snapshot replaces the session's refs; `ref_count` is how many there are now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct SnapshotResult {
    pub text: String,
    pub ref_count: u32,
    pub tab_id: i64,
    /// Absent when false.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub truncated: bool,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.observe`: the snapshot, and with `debug_surfaces` what hover probes found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ObserveResult {
    pub text: String,
    pub ref_count: u32,
    pub tab_id: i64,
    /// Absent when false.
    #[serde(default)]
    #[ts(as = "Option<bool>", optional)]
    pub truncated: bool,
    #[ts(optional, type = "Record<string, unknown>")]
    pub debug: Option<Map<String, Value>>,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.get_html`. `byte_size` is the UTF-8 size before truncation, which stops
/// at a character boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct GetHtmlResult {
    pub html: String,
    pub truncated: bool,
    pub byte_size: u64,
    pub tab_id: i64,
    pub dialogs: Option<Vec<Dialog>>,
}

/// `tool.screenshot`: a PNG in base64 without a `data:` prefix; its size from the
/// PNG header (0 when it could not be read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ScreenshotResult {
    pub image_base64: String,
    pub width: u32,
    pub height: u32,
    pub format: ImageFormat,
    pub tab_id: i64,
    pub dialogs: Option<Vec<Dialog>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum ImageFormat {
    Png,
}

/// `tool.console`: entries after the `since` cursor, and the cursor to pass next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ConsoleResult {
    pub tab_id: i64,
    pub entries: Option<Vec<ConsoleEntry>>,
    pub next_since: u64,
    pub truncated: bool,
}

/// `tool.network`: as `tool.console`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct NetworkResult {
    pub tab_id: i64,
    pub entries: Option<Vec<NetworkEntry>>,
    pub next_since: u64,
    pub truncated: bool,
}

/// One entry of `tool.console`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ConsoleEntry {
    pub sequence: u64,
    pub kind: ConsoleKind,
    pub level: String,
    pub text: String,
    pub url: Option<String>,
    pub line: Option<i64>,
    pub column: Option<i64>,
    pub timestamp: Option<f64>,
    pub stack_trace: Option<Vec<StackFrame>>,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum ConsoleKind {
    Console,
    Exception,
    Log,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct StackFrame {
    pub function_name: Option<String>,
    pub url: Option<String>,
    pub line: Option<i64>,
    pub column: Option<i64>,
}

/// One entry of `tool.network`: a response, or a request that failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct NetworkEntry {
    pub sequence: u64,
    pub kind: NetworkKind,
    pub method: Option<String>,
    pub url: Option<String>,
    pub status: Option<u32>,
    pub status_text: Option<String>,
    pub mime_type: Option<String>,
    pub resource_type: Option<String>,
    pub error_text: Option<String>,
    pub timestamp: Option<f64>,
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "lowercase")]
#[ts(export_to = "tools/")]
pub enum NetworkKind {
    Response,
    Failure,
}

/// `tool.evaluate`. A thrown exception is `ok: false` with `error`, not a failed
/// call. `value` is any JSON value (`undefined` is `null`; `NaN`, `Infinity` and
/// BigInt are text; what cannot be returned by value is described by its type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct EvaluateResult {
    pub ok: bool,
    pub tab_id: i64,
    #[ts(optional, type = "unknown")]
    pub value: Option<Value>,
    pub error: Option<EvaluateError>,
    pub dialogs: Option<Vec<Dialog>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct EvaluateError {
    pub text: String,
    pub line: Option<i64>,
    pub column: Option<i64>,
}

/// `tool.request_help`: how the person's part ended. `cancelled` (the person
/// declined) is a result, not an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct RequestHelpResult {
    pub outcome: HelpOutcome,
    /// `system` when the completion criteria held.
    pub completed_by: Option<String>,
    pub note: Option<String>,
    pub tab_id: i64,
    pub resolved_targets: Option<Vec<ResolvedTarget>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export_to = "tools/")]
pub enum HelpOutcome {
    /// The person pressed Done.
    Continued,
    /// The person declined.
    Cancelled,
    TimedOut,
    /// The completion criteria held long enough.
    Completed,
    /// Sent by older extensions; read as `continued`.
    Navigated,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct ResolvedTarget {
    pub matched: bool,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub selector: Option<String>,
}

/// `tool.record_start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct RecordStartResult {
    pub tab_id: i64,
    pub recording: bool,
}

/// `tool.record_stop` and `tool.record_await`: what the person did, step by step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/")]
pub struct RecordResult {
    pub trace: Trace,
}

/// A recording. Each step has an `id`, the `page` it happened on, its `op`
/// (`navigate`, `click`, `hover`, `fill`, `select`, `press`) and that op's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", optional_fields)]
pub struct Trace {
    /// RFC 3339.
    pub recorded_at: String,
    #[ts(type = "{ start_url: string }")]
    pub entry: Map<String, Value>,
    #[ts(type = "Array<Record<string, unknown>>")]
    pub pages: Vec<Map<String, Value>>,
    #[ts(type = "Array<Record<string, unknown>>")]
    pub steps: Vec<Map<String, Value>>,
    pub started_at: Option<String>,
    pub purpose: Option<String>,
}
