//! The tools `/mcp` lists: the catalogue's methods under their MCP names, with the
//! catalogue's params schema and summary and hints from its effect class; the
//! endpoint's own three for choosing a browser; and `browser_fill_form`, made of
//! the catalogue's `tool.fill`, `tool.select` and `tool.click` (docs/mcp.md, "Tools").

use std::sync::Arc;

use latchkey_protocol::tools::mcp::{self, MCP_TOOLS};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use super::fill_form::{self, BROWSER_FILL_FORM};

/// The endpoint's own tools.
pub const BROWSER_LIST: &str = "browser_list";
pub const BROWSER_SELECT: &str = "browser_select";
pub const BROWSER_CLOSE: &str = "browser_close";

/// What the server tells a client on connecting.
pub const INSTRUCTIONS: &str = "Latchkey lends you a person's real browser. \
Call browser_list to see your team's browsers; with one online, browser tools use it, \
otherwise call browser_select with the id of the one to use. The first browser tool \
call opens an Agent Window on it (its person may be asked first); browser_close ends it. \
Read pages with browser_snapshot and act on elements by their [ref=eN]; after the page \
changes, snapshot again. When a page needs the person (a login, a captcha), call \
request_help. The person can stop you at any time; then ask before going on.";

/// Every tool, in the order listed.
pub fn tools() -> Vec<Tool> {
    let mut out = vec![
        own(
            BROWSER_LIST,
            "List your team's browsers: id, label, online, sessions open.",
            json!({"type": "object", "properties": {}}),
            ToolAnnotations::new().read_only(true).idempotent(true),
        ),
        own(
            BROWSER_SELECT,
            "Use this browser for the browser tools from now on: ends the session on the \
             browser used before and opens one on this (its person may be asked).",
            json!({
                "type": "object",
                "properties": {
                    "browser_id": {"type": "string", "minLength": 1, "description": "an id from browser_list"},
                    "purpose": {"type": "string", "maxLength": 200, "description": "why you need the browser, shown to its person if they are asked"}
                },
                "required": ["browser_id"]
            }),
            ToolAnnotations::new().read_only(false).destructive(false),
        ),
        own(
            BROWSER_CLOSE,
            "End the session: close the Agent Window and give borrowed tabs back.",
            json!({"type": "object", "properties": {}}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true),
        ),
        own(
            BROWSER_FILL_FORM,
            "Fill several form fields in one call: text fields and sliders are typed \
             into, <select> options chosen, checkboxes and radio buttons left checked \
             or unchecked (clicked only if they are not already); each field is its \
             own call, and a bad field is refused before any is touched.",
            fill_form::input_schema(),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .open_world(true),
        ),
    ];
    for named in MCP_TOOLS {
        let Some(tool) = named.tool() else { continue };
        let annotations = ToolAnnotations::new()
            .read_only(mcp::read_only(tool))
            .destructive(mcp::destructive(tool))
            .open_world(true);
        out.push(Tool::new(
            named.name,
            format!(
                "{} (Latchkey `{}`; see docs/tools.md).",
                capitalised(tool.summary),
                tool.method
            ),
            schema(tool.params_schema()),
        ));
        if let Some(last) = out.last_mut() {
            last.annotations = Some(annotations);
        }
    }
    out
}

fn own(
    name: &'static str,
    description: &'static str,
    schema_value: Value,
    a: ToolAnnotations,
) -> Tool {
    let mut tool = Tool::new(name, description, schema(schema_value));
    tool.annotations = Some(a);
    tool
}

/// A JSON Schema object as the SDK holds it; `$schema` and `title` are dropped
/// (MCP input schemas default to draft 2020-12, which the catalogue writes).
fn schema(value: Value) -> Arc<Map<String, Value>> {
    let mut map = match value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.remove("$schema");
    map.remove("title");
    map.entry("type").or_insert_with(|| json!("object"));
    Arc::new(map)
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_tool_has_an_object_schema_and_a_unique_name() {
        let tools = tools();
        assert_eq!(tools.len(), MCP_TOOLS.len() + 4);
        let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
            assert!(!t.input_schema.contains_key("$schema"));
        }
        let click = tools.iter().find(|t| t.name == "browser_click");
        let click = click
            .and_then(|t| t.annotations.clone())
            .unwrap_or_default();
        assert_eq!(click.destructive_hint, Some(true));
    }
}
