//! The params of every `tool.*` method the extension protocol defines, as Rust types
//! (docs/protocol.md, "Tools"). Unknown keys are ignored, as the protocol asks of
//! every receiver; what a key the protocol defines may hold is checked.
//! `session_id` is the gateway's to fill in and is not part of these types.

use schemars::JsonSchema;
use serde::Deserialize;
use ts_rs::TS;

pub use super::reading::ParamError;
use super::reading::Rules;
use super::values::{
    Button, Count, Cursor, Index, Modifier, NonEmpty, Positive, PositiveFinite, TabId, TabScope,
    Text, TimeoutMs, WaitDuration, WaitUntil, WindowDimension,
};

/// `ref` or `selector` of a page input: exactly one, non-empty, or (for `press`)
/// at most one (docs/protocol.md, "Tools").
fn target(
    reference: &Option<NonEmpty>,
    selector: &Option<NonEmpty>,
    required: bool,
) -> Result<(), ParamError> {
    match (reference, selector) {
        (Some(_), Some(_)) => Err(ParamError::new(
            "ref",
            "pass either ref or selector, not both",
        )),
        (None, None) if required => Err(ParamError::new("ref", "requires a ref or a selector")),
        _ => Ok(()),
    }
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "TabListParams", optional_fields)]
pub struct TabList {
    pub scope: Option<TabScope>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "TabCreateParams", optional_fields)]
pub struct TabCreate {
    pub url: Option<Text>,
    pub active: Option<bool>,
    pub index: Option<Index>,
}

/// `tab_close`, `tab_select`, `tab_return`.
#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "TabRequiredParams", optional_fields)]
pub struct TabRequired {
    pub tab_id: TabId,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "TabBorrowParams", optional_fields)]
pub struct TabBorrow {
    pub tab_id: TabId,
    pub confirm: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "WindowResizeParams", optional_fields)]
pub struct WindowResize {
    pub width: WindowDimension,
    pub height: WindowDimension,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "EmulateParams", optional_fields)]
pub struct Emulate {
    pub tab_id: Option<TabId>,
    pub off: Option<bool>,
    pub overrides: Option<EmulateOverrides>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "UaBrandParams", optional_fields)]
pub struct UaBrand {
    pub brand: Text,
    pub version: Text,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "UaMetadataParams", optional_fields)]
pub struct UaMetadata {
    pub brands: Option<Vec<UaBrand>>,
    pub full_version: Option<Text>,
    pub platform: Option<Text>,
    pub platform_version: Option<Text>,
    pub architecture: Option<Text>,
    pub model: Option<Text>,
    pub mobile: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(
    export_to = "tools/",
    rename = "EmulateOverridesParams",
    optional_fields
)]
pub struct EmulateOverrides {
    pub width: Option<Positive>,
    pub height: Option<Positive>,
    pub device_scale_factor: Option<PositiveFinite>,
    pub mobile: Option<bool>,
    pub user_agent: Option<Text>,
    pub accept_language: Option<Text>,
    pub user_agent_metadata: Option<UaMetadata>,
    pub touch: Option<bool>,
    pub max_touch_points: Option<Positive>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "NavigateParams", optional_fields)]
pub struct Navigate {
    pub url: NonEmpty,
    pub tab_id: Option<TabId>,
    pub wait_until: Option<WaitUntil>,
    pub timeout_ms: Option<TimeoutMs>,
}

/// `navigate_back`, `navigate_forward`, `wait_for_navigation`.
#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "HistoryParams", optional_fields)]
pub struct History {
    pub tab_id: Option<TabId>,
    pub wait_until: Option<WaitUntil>,
    pub timeout_ms: Option<TimeoutMs>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "ReloadParams", optional_fields)]
pub struct Reload {
    pub tab_id: Option<TabId>,
    pub wait_until: Option<WaitUntil>,
    pub timeout_ms: Option<TimeoutMs>,
    pub hard: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "WaitMsParams", optional_fields)]
pub struct WaitMs {
    pub duration_ms: WaitDuration,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "ClickParams", optional_fields)]
pub struct Click {
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub selector: Option<NonEmpty>,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
    pub button: Option<Button>,
    pub click_count: Option<Positive>,
    pub modifiers: Option<Vec<Modifier>>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "HoverParams", optional_fields)]
pub struct Hover {
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub selector: Option<NonEmpty>,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
    pub modifiers: Option<Vec<Modifier>>,
    pub settle_ms: Option<Count>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "FillParams", optional_fields)]
pub struct Fill {
    pub value: Text,
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub selector: Option<NonEmpty>,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
    pub clear_before: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "PressParams", optional_fields)]
pub struct Press {
    pub key: NonEmpty,
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub selector: Option<NonEmpty>,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
    pub modifiers: Option<Vec<Modifier>>,
    pub hold_ms: Option<Count>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "SelectParams", optional_fields)]
pub struct Select {
    pub values: Vec<Text>,
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub selector: Option<NonEmpty>,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "SnapshotParams", optional_fields)]
pub struct Snapshot {
    pub tab_id: Option<TabId>,
    pub max_depth: Option<Count>,
    pub max_tokens: Option<Count>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "ObserveParams", optional_fields)]
pub struct Observe {
    pub tab_id: Option<TabId>,
    pub max_depth: Option<Count>,
    pub max_tokens: Option<Count>,
    pub debug_surfaces: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "GetHtmlParams", optional_fields)]
pub struct GetHtml {
    pub tab_id: Option<TabId>,
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
    pub max_bytes: Option<Count>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "ScreenshotParams", optional_fields)]
pub struct Screenshot {
    pub tab_id: Option<TabId>,
    #[serde(rename = "ref")]
    pub reference: Option<NonEmpty>,
}

/// `tool.console` and `tool.network`.
#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "LogReadParams", optional_fields)]
pub struct LogRead {
    pub tab_id: Option<TabId>,
    pub since: Option<Cursor>,
    pub limit: Option<Positive>,
    pub max_text_chars: Option<Positive>,
    pub include_stack: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "EvaluateParams", optional_fields)]
pub struct Evaluate {
    pub expression: NonEmpty,
    pub tab_id: Option<TabId>,
    pub timeout_ms: Option<TimeoutMs>,
    pub await_promise: Option<bool>,
    pub return_by_value: Option<bool>,
}

/// One condition of `request_help`'s `completion_criteria`.
#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "ConditionParams", optional_fields)]
pub struct Condition {
    pub url_contains: Option<Text>,
    pub url_matches: Option<Text>,
    pub selector_exists: Option<Text>,
    pub selector_missing: Option<Text>,
    pub text_exists: Option<Text>,
    pub text_missing: Option<Text>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(
    export_to = "tools/",
    rename = "CompletionCriteriaParams",
    optional_fields
)]
pub struct CompletionCriteria {
    pub any: Option<Vec<Condition>>,
    pub all: Option<Vec<Condition>>,
    pub stable_for_ms: Option<Count>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "HelpTargetParams", optional_fields)]
pub struct HelpTarget {
    #[serde(rename = "ref")]
    pub reference: Option<Text>,
    pub selector: Option<Text>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "RequestHelpParams", optional_fields)]
pub struct RequestHelp {
    pub prompt: NonEmpty,
    pub tab_id: Option<TabId>,
    pub title: Option<Text>,
    pub targets: Option<Vec<HelpTarget>>,
    pub completion_criteria: Option<CompletionCriteria>,
    pub timeout_ms: Option<TimeoutMs>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "RecordStartParams", optional_fields)]
pub struct RecordStart {
    pub tab_id: Option<TabId>,
    pub url: Option<Text>,
    pub purpose: Option<Text>,
}

#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "RecordAwaitParams", optional_fields)]
pub struct RecordAwait {
    pub timeout_ms: Option<TimeoutMs>,
}

/// A method with no params of its own.
#[derive(Debug, Deserialize, JsonSchema, TS)]
#[ts(export_to = "tools/", rename = "NoParams", optional_fields)]
pub struct Nothing {}

impl Rules for TabList {}
impl Rules for TabCreate {}
impl Rules for TabRequired {}
impl Rules for TabBorrow {}
impl Rules for WindowResize {}
impl Rules for Navigate {}
impl Rules for History {}
impl Rules for Reload {}
impl Rules for WaitMs {}
impl Rules for Fill {
    fn rules(&self) -> Result<(), ParamError> {
        target(&self.reference, &self.selector, true)
    }
}
impl Rules for Click {
    fn rules(&self) -> Result<(), ParamError> {
        target(&self.reference, &self.selector, true)
    }
}
impl Rules for Hover {
    fn rules(&self) -> Result<(), ParamError> {
        target(&self.reference, &self.selector, true)
    }
}
impl Rules for Select {
    fn rules(&self) -> Result<(), ParamError> {
        target(&self.reference, &self.selector, true)
    }
}
impl Rules for Press {
    fn rules(&self) -> Result<(), ParamError> {
        target(&self.reference, &self.selector, false)
    }
}
impl Rules for Snapshot {}
impl Rules for Observe {}
impl Rules for GetHtml {}
impl Rules for Screenshot {}
impl Rules for LogRead {}
impl Rules for Evaluate {}
impl Rules for RequestHelp {}
impl Rules for RecordStart {}
impl Rules for RecordAwait {}
impl Rules for Nothing {}

impl Rules for Emulate {
    /// `off` clears every override and excludes `overrides`; otherwise `overrides`
    /// is required and must set something.
    fn rules(&self) -> Result<(), ParamError> {
        match (self.off, &self.overrides) {
            (Some(true), Some(_)) => Err(ParamError::new(
                "overrides",
                "pass either off or overrides, not both",
            )),
            (Some(true), None) => Ok(()),
            (_, None) => Err(ParamError::new("overrides", "required unless off is true")),
            (_, Some(o)) => o.rules(),
        }
    }
}

impl EmulateOverrides {
    fn rules(&self) -> Result<(), ParamError> {
        let viewport = match (&self.width, &self.height) {
            (Some(_), Some(_)) => true,
            (None, None) => false,
            _ => {
                return Err(ParamError::new(
                    "overrides.width",
                    "set width and height together",
                ));
            }
        };
        if !viewport && self.device_scale_factor.is_some() {
            return Err(ParamError::new(
                "overrides.device_scale_factor",
                "needs width and height",
            ));
        }
        if !viewport && self.mobile.is_some() {
            return Err(ParamError::new(
                "overrides.mobile",
                "needs width and height",
            ));
        }
        if self.user_agent.is_none() {
            if self.accept_language.is_some() {
                return Err(ParamError::new(
                    "overrides.accept_language",
                    "needs user_agent",
                ));
            }
            if self.user_agent_metadata.is_some() {
                return Err(ParamError::new(
                    "overrides.user_agent_metadata",
                    "needs user_agent",
                ));
            }
        }
        let sets_something = viewport
            || self.user_agent.is_some()
            || self.touch.is_some()
            || self.max_touch_points.is_some();
        if !sets_something {
            return Err(ParamError::new(
                "overrides",
                "set a viewport, user_agent, touch or max_touch_points",
            ));
        }
        Ok(())
    }
}
