//! The tool reference, docs/tools.md, rendered from the catalogue: for every
//! method what it does, its params and result (from the same JSON Schema the
//! gateway and the CLI read with) and the failures particular to it. A test keeps
//! the committed file equal to this rendering.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::{TOOLS, Tool, failures};

/// The whole of docs/tools.md.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Tool reference\n\n\
         <!-- Generated from latchkey-protocol's tool catalogue (protocol/src/tools/); do not edit.\n     \
         Regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema. -->\n\n\
         Every `tool.*` method an agent can call, in the order of [protocol.md](protocol.md#tools),\n\
         which explains the rules they share (targets, the Agent Window, `dialogs`, deadlines).\n\
         The same facts are published as JSON Schema in `protocol/schema/tools.json` and as\n\
         TypeScript in `protocol/bindings/tools/`. Params do not include `session_id`: the\n\
         gateway fills it in. An optional field may also be `null`, which means the same as\n\
         leaving it out.\n\n\
         Each method is in one capability class, what a person lends an agent when\n\
         they allow that class on their browser: `session` (the Agent Window's\n\
         lifecycle and the gateway's own wait), `read`, `input`, `navigate`, `script`\n\
         and `borrow` (the person's own tabs).\n\n\
         Any call can also fail in the ways every call can ([error-codes.md](error-codes.md)):\n\
         `invalid_params` with `data.field` for params the gateway refuses, `timeout` at the\n\
         deadline (`data.reason` `session_busy` while another call of the session runs),\n\
         `browser_disconnected`, `cancelled`, `user_aborted` after the person pressed Stop\n\
         (for methods that change the browser), and `unknown_method` from a browser that\n\
         does not serve the method.\n\n\
         Through the remote MCP endpoint ([mcp.md](mcp.md)) each method is a tool of\n\
         the name given beside it, taking the same params.\n\n\
         Each method's example is the request an agent sends on the agent WebSocket or in\n\
         `POST /v1/sessions/{id}/calls`; through MCP, the `params` object is the tool's\n\
         arguments. Every example passes the gateway's own check of the params.\n\n",
    );
    for tool in TOOLS {
        section(&mut out, tool);
    }
    out
}

fn section(out: &mut String, tool: &Tool) {
    let _ = writeln!(out, "## `{}`\n", tool.method);
    let mut facts = vec![
        format!("Effect `{}`", tool.effect.as_str()),
        format!("capability `{}`", tool.capability.as_str()),
        format!("deadline {} s", tool.default_deadline_ms / 1000),
    ];
    if tool.gateway_local {
        facts.push("answered by the gateway".into());
    }
    if tool.busy_exempt {
        facts.push("runs beside a busy call".into());
    }
    if tool.waits_for_person {
        facts.push("the browser times the person's answer".into());
    }
    if tool.session_lifecycle {
        facts.push("sent by the gateway only, through the session API".into());
    }
    if let Some(name) = super::mcp::mcp_name(tool.method) {
        facts.push(format!("MCP tool `{name}`"));
    }
    let _ = writeln!(
        out,
        "{}. {}.\n",
        capitalised(tool.summary),
        facts.join(" · ")
    );
    if let Some(params) = super::examples::example(tool.method) {
        let _ = writeln!(
            out,
            "```json\n{{\"method\": \"{}\", \"params\": {params}}}\n```\n",
            tool.method
        );
    }
    fields(out, "param", &tool.params_schema());
    fields(out, "result field", &tool.result_schema());
    let failures = failures::of(tool.method);
    if !failures.is_empty() {
        out.push_str("| fails with | reason | when |\n| --- | --- | --- |\n");
        for f in failures {
            let reason = f
                .reason
                .map_or("-".to_string(), |r| format!("`{}`", r.as_str()));
            let _ = writeln!(
                out,
                "| `{}` | {reason} | {} |",
                f.code.as_str(),
                cell(f.when)
            );
        }
        out.push('\n');
    }
}

/// A table of an object schema's properties, then one for each object type it
/// refers to.
fn fields(out: &mut String, what: &str, schema: &Value) {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut referred = Vec::new();
    object_table(out, what, schema, &defs, &mut referred);
    let mut shown = std::collections::BTreeSet::new();
    while let Some(name) = referred.pop() {
        if !shown.insert(name.clone()) {
            continue;
        }
        if let Some(def) = defs.get(&name).filter(|d| d.get("properties").is_some()) {
            let _ = writeln!(out, "`{name}`:\n");
            object_table(out, "field", def, &defs, &mut referred);
        }
    }
}

fn object_table(
    out: &mut String,
    what: &str,
    schema: &Value,
    defs: &Map<String, Value>,
    referred: &mut Vec<String>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        let _ = writeln!(out, "No {what}s.\n");
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(out, "| {what} | type | required |\n| --- | --- | --- |");
    for (name, property) in properties {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} |",
            type_of(property, defs, referred),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                ""
            }
        );
    }
    out.push('\n');
}

/// A property's type in a few words: `integer 1..=4294967295`, `"load" \| …`,
/// `array of Condition`.
fn type_of(schema: &Value, defs: &Map<String, Value>, referred: &mut Vec<String>) -> String {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference
            .rsplit('/')
            .next()
            .unwrap_or(reference)
            .to_string();
        return match defs.get(&name) {
            Some(def) if def.get("enum").is_some() => type_of(def, defs, referred),
            _ => {
                referred.push(name.clone());
                format!("`{name}`")
            }
        };
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let kinds: Vec<String> = any
            .iter()
            .filter(|s| s.get("type") != Some(&Value::from("null")))
            .map(|s| type_of(s, defs, referred))
            .collect();
        return kinds.join(" or ");
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return names.join(" \\| ");
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("any")
            .to_string(),
        Some(Value::String(k)) => k.clone(),
        _ => "any JSON value".into(),
    };
    match kind.as_str() {
        "array" => match schema.get("items") {
            Some(items) => format!("array of {}", type_of(items, defs, referred)),
            None => "array".into(),
        },
        "integer" | "number" => {
            let min = schema.get("minimum").or(schema.get("exclusiveMinimum"));
            let open = schema.get("exclusiveMinimum").is_some();
            match (min, schema.get("maximum")) {
                (Some(lo), Some(hi)) => format!("{kind} {lo}..={hi}"),
                (Some(lo), None) if open => format!("{kind} > {lo}"),
                (Some(lo), None) if lo != &Value::from(0) => format!("{kind} ≥ {lo}"),
                _ => kind,
            }
        }
        "string" if schema.get("minLength").is_some() => "string, not empty".into(),
        _ => kind,
    }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// Table cells may not hold a pipe or a line break.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
