//! `browser_fill_form` (docs/mcp.md, "Filling a form"): playwright-mcp's tool for
//! setting several fields in one call, made of the catalogue's own methods so that
//! every field is one `tool.fill`, `tool.select` or `tool.click` through the call
//! pipeline, with its policy check, rate limit and audit row. Nothing here
//! reaches the browser by another way.
//!
//! Every field is judged before the first is sent: a form with one bad field
//! changes nothing. Fields are then set in order, and the first failure ends the
//! call, saying which fields were set and which were not attempted.
//!
//! Text fields, sliders and `<select>` comboboxes map onto the catalogue. Checkboxes
//! and radio buttons need Latchkey's `set_checked` addition: protocol 1.x reads a
//! box's state only through a snapshot, which would void the agent's refs, and a
//! blind click would uncheck a box already checked. They become a `tool.click`
//! with `latchkey_checked`, which our extension clicks only when the state is not
//! the one asked for; for a browser whose extension does not list the feature the
//! whole form is refused, pointing at `browser_click`.

use latchkey_protocol::additions::CLICK_CHECKED;
use latchkey_protocol::tools::tool_named;
use latchkey_protocol::{ErrorBody, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use super::answers;

/// The tool's MCP name.
pub const BROWSER_FILL_FORM: &str = "browser_fill_form";
/// At most this many fields in one call: a form, not a script.
pub const MAX_FIELDS: usize = 50;
/// A field's `name` is the agent's label for it, echoed in the answer; longer
/// names are refused rather than cut.
pub const MAX_NAME_CHARS: usize = 200;

/// The tool's input schema.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "fields": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_FIELDS,
                "description": "Fields to set, in order",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": MAX_NAME_CHARS, "description": "Human-readable field name, echoed in the answer"},
                        "type": {"type": "string", "enum": ["textbox", "slider", "combobox", "checkbox", "radio"], "description": "textbox and slider are typed into (browser_type); combobox is a <select> whose option is chosen by value or label (browser_select_option); checkbox and radio are left checked (\"true\") or unchecked (\"false\"), clicked only if they are not already"},
                        "ref": {"type": "string", "minLength": 1, "description": "The field's ref from the latest browser_snapshot"},
                        "value": {"type": "string", "description": "The text to type, the slider's value, the option's value or label, or for a checkbox or radio \"true\" or \"false\""}
                    },
                    "required": ["name", "type", "ref", "value"]
                }
            },
            "tab_id": {"type": "integer", "minimum": 0, "description": "the tab (default: the session's active tab)"}
        },
        "required": ["fields"]
    })
}

/// One field, as the catalogue call that sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The agent's name for the field.
    pub name: String,
    pub reference: String,
    /// `tool.fill`, `tool.select`, or `tool.click` for a checkbox or radio.
    pub method: &'static str,
    pub params: Map<String, Value>,
}

/// The calls that set `args`' fields, each judged by the catalogue as the
/// pipeline will judge it; or the first thing wrong, with the field's path.
pub fn plan(args: &Map<String, Value>) -> Result<Vec<Step>, ErrorBody> {
    let fields = match args.get("fields") {
        Some(Value::Array(fields)) => fields,
        _ => return Err(invalid("fields", "fields (an array of fields) is required")),
    };
    if fields.is_empty() || fields.len() > MAX_FIELDS {
        return Err(invalid(
            "fields",
            format!("fields holds 1..={MAX_FIELDS} fields, not {}", fields.len()),
        ));
    }
    let tab_id = args.get("tab_id").filter(|v| !v.is_null());
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| step(i, field, tab_id))
        .collect()
}

fn step(i: usize, field: &Value, tab_id: Option<&Value>) -> Result<Step, ErrorBody> {
    let at = |key: &str| format!("fields[{i}].{key}");
    let Some(field) = field.as_object() else {
        return Err(invalid(&format!("fields[{i}]"), "each field is an object"));
    };
    let string = |key: &str| match field.get(key) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(invalid(&at(key), format!("{} must be a string", at(key)))),
    };
    let name = string("name")?;
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(
            &at("name"),
            format!("a field's name is at most {MAX_NAME_CHARS} characters"),
        ));
    }
    let reference = string("ref")?;
    let value = string("value")?;
    let (method, key, given) = match string("type")? {
        "textbox" | "slider" => ("tool.fill", "value", json!(value)),
        "combobox" => ("tool.select", "values", json!([value])),
        kind @ ("checkbox" | "radio") => {
            let checked = match value {
                "true" => true,
                "false" if kind == "checkbox" => false,
                "false" => {
                    return Err(invalid(
                        &at("value"),
                        format!(
                            "field {name:?}: a radio button is unchecked only by checking \
                             another of its group"
                        ),
                    ));
                }
                _ => {
                    return Err(invalid(
                        &at("value"),
                        format!("field {name:?} is a {kind}: its value is \"true\" or \"false\""),
                    ));
                }
            };
            ("tool.click", CLICK_CHECKED, json!(checked))
        }
        other => {
            return Err(invalid(
                &at("type"),
                format!(
                    "{other:?} is not a field type: textbox, slider, combobox, checkbox or radio"
                ),
            ));
        }
    };
    let mut params = Map::new();
    params.insert("ref".into(), json!(reference));
    params.insert(key.into(), given);
    if let Some(tab_id) = tab_id {
        params.insert("tab_id".into(), tab_id.clone());
    }
    if let Some(tool) = tool_named(method) {
        tool.validate(&params).map_err(|e| {
            let path = if e.field == "values" || e.field == "value" {
                at("value")
            } else if e.field == "tab_id" {
                "tab_id".to_string()
            } else {
                at(&e.field)
            };
            invalid(&path, format!("{path}: {}", e.message))
        })?;
    }
    Ok(Step {
        name: name.to_string(),
        reference: reference.to_string(),
        method,
        params,
    })
}

fn invalid(field: &str, message: impl Into<String>) -> ErrorBody {
    let mut body = ErrorBody::new(ErrorCode::InvalidParams, message);
    body.data = Some(json!({ "field": field }));
    body
}

/// The answer once every step ran, or the first failed: what each set field
/// holds now, or which failed and what was and was not done.
pub fn answer(steps: &[Step], done: Vec<Value>, failed: Option<ErrorBody>) -> CallToolResult {
    let set: Vec<Value> = steps
        .iter()
        .zip(&done)
        .map(|(s, result)| json!({"name": s.name, "ref": s.reference, "result": result}))
        .collect();
    let mut lines: Vec<String> = steps
        .iter()
        .zip(&done)
        .map(|(s, result)| format!("- {:?} [ref={}]: {}", s.name, s.reference, what(s, result)))
        .collect();
    let dialogs: Vec<&Value> = done
        .iter()
        .filter_map(|r| r.get("dialogs").and_then(Value::as_array))
        .flatten()
        .collect();
    if !dialogs.is_empty() {
        lines.push(format!("Dialogs: {}", json!(dialogs)));
    }
    let Some(error) = failed else {
        let head = format!("Set {} of {} fields:", done.len(), steps.len());
        let mut answer = CallToolResult::success(vec![ContentBlock::text(
            std::iter::once(head)
                .chain(lines)
                .collect::<Vec<_>>()
                .join("\n"),
        )]);
        answer.structured_content = Some(json!({ "fields": set }));
        return answer;
    };
    let failed_step = steps.get(done.len());
    let untried: Vec<&str> = steps
        .iter()
        .skip(done.len() + 1)
        .map(|s| s.name.as_str())
        .collect();
    let mut text = match failed_step {
        Some(s) => format!(
            "Field {} of {}, {:?} [ref={}], was not set:\n",
            done.len() + 1,
            steps.len(),
            s.name,
            s.reference
        ),
        None => String::new(),
    };
    text.push_str(&answers::failure_text(&error));
    if !lines.is_empty() {
        text.push_str("\nSet before it:\n");
        text.push_str(&lines.join("\n"));
    }
    if !untried.is_empty() {
        text.push_str(&format!("\nNot attempted: {untried:?}"));
    }
    let mut answer = CallToolResult::error(vec![ContentBlock::text(text)]);
    answer.structured_content = Some(json!({
        "error": error,
        "set": set,
        "failed": failed_step.map(|s| json!({"name": s.name, "ref": s.reference})),
        "not_attempted": untried,
    }));
    answer
}

/// Whether any field is a checkbox or radio, which only a browser whose
/// extension lists `set_checked` can set.
pub fn needs_set_checked(steps: &[Step]) -> bool {
    steps.iter().any(|s| s.params.contains_key(CLICK_CHECKED))
}

/// The form refused whole: its first checkbox or radio, for a browser that
/// cannot set one to a state.
pub fn cannot_set_checked(steps: &[Step]) -> ErrorBody {
    let (i, step) = steps
        .iter()
        .enumerate()
        .find(|(_, s)| s.params.contains_key(CLICK_CHECKED))
        .map_or((0, None), |(i, s)| (i, Some(s)));
    let name = step.map_or("", |s| s.name.as_str());
    invalid(
        &format!("fields[{i}].type"),
        format!(
            "field {name:?}: this browser's extension cannot set a checkbox or radio button \
             to a state (it does not list set_checked): leave it out and click it with \
             browser_click (the snapshot marks those that are [checked])"
        ),
    )
}

/// What a set field holds, in a few words.
fn what(step: &Step, result: &Value) -> String {
    match step.method {
        "tool.click" => match result.get(CLICK_CHECKED).and_then(Value::as_bool) {
            Some(true) => "checked".to_string(),
            Some(false) => "unchecked".to_string(),
            None => "clicked".to_string(),
        },
        "tool.select" => match result.get("selected_labels") {
            Some(labels) => format!("selected {labels}"),
            None => "selected".to_string(),
        },
        _ => match result.get("value_length").and_then(Value::as_u64) {
            Some(n) => format!("typed {n} characters"),
            None => "typed".to_string(),
        },
    }
}

#[cfg(test)]
#[path = "fill_form_tests.rs"]
mod tests;
