//! The `tool.*` methods of the extension protocol and the params each one takes
//! (docs/protocol.md, "Tools"). The gateway judges what it can see before a call is
//! forwarded: a missing required field, a value outside its range, an unknown enum
//! value or a rule across fields is answered `invalid_params` with the field's name,
//! instead of reaching the browser (which might ignore it and leave the agent waiting
//! for the whole deadline). Methods this table does not know pass through unchanged,
//! as the protocol lets newer extensions add methods.

pub mod catalogue;
pub mod params;
pub mod values;

use serde_json::{Map, Value};

pub use catalogue::{TOOLS, Tool, deadline_ms, tool_named};
pub use params::ParamError;

/// Check `params` (without the gateway's `session_id`) against what the protocol
/// defines for `method`. Unknown methods are not judged.
pub fn validate(method: &str, params: &Map<String, Value>) -> Result<(), ParamError> {
    tool_named(method).map_or(Ok(()), |t| t.validate(params))
}

/// The catalogue as one JSON document (`protocol/schema/tools.json`): every method
/// with what it does to the browser, its deadline, whether the gateway answers it
/// or lets it past a busy session, a one-line summary, and the JSON Schema of its
/// params. The remote MCP endpoint's tool list and the OpenAPI document are made
/// from the same table.
pub fn catalogue_document() -> Value {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|t| {
            serde_json::json!({
                "method": t.method,
                "summary": t.summary,
                "effect": t.effect.as_str(),
                "default_deadline_ms": t.default_deadline_ms,
                "waits_for_person": t.waits_for_person,
                "gateway_local": t.gateway_local,
                "busy_exempt": t.busy_exempt,
                "session_lifecycle": t.session_lifecycle,
                "params": t.params_schema(),
            })
        })
        .collect();
    serde_json::json!({
        "$comment": "Generated from latchkey-protocol's tool catalogue (protocol/src/tools/catalogue.rs); do not edit. Regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema.",
        "tools": tools,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn v(method: &str, params: Value) -> Result<(), (String, String)> {
        let Value::Object(map) = params else {
            return Err(("".into(), "not an object".into()));
        };
        validate(method, &map).map_err(|e| (e.field, e.message))
    }

    fn field(method: &str, params: Value) -> String {
        match v(method, params) {
            Ok(()) => "accepted".into(),
            Err((f, _)) => f,
        }
    }

    #[test]
    fn well_formed_calls_pass_and_unknown_keys_are_ignored() {
        assert_eq!(
            v(
                "tool.navigate",
                json!({"url": "https://example.com", "wait_until": "networkidle", "tab_id": 7, "extra": 1})
            ),
            Ok(())
        );
        assert_eq!(
            v(
                "tool.click",
                json!({"ref": "e4", "button": "right", "modifiers": ["ctrl", "shift"]})
            ),
            Ok(())
        );
        assert_eq!(v("tool.press", json!({"key": "Enter"})), Ok(()));
        assert_eq!(v("tool.snapshot", json!({})), Ok(()));
        assert_eq!(v("tool.emulate", json!({"off": true})), Ok(()));
        assert_eq!(
            v(
                "tool.emulate",
                json!({"overrides": {"width": 390, "height": 844, "mobile": true}})
            ),
            Ok(())
        );
        assert_eq!(v("tool.brand_new", json!({"anything": [1, 2]})), Ok(()));
    }

    #[test]
    fn each_refusal_names_its_field() {
        assert_eq!(
            field("tool.navigate", json!({"url": "x", "wait_until": "bogus"})),
            "wait_until"
        );
        assert_eq!(field("tool.navigate", json!({})), "url");
        assert_eq!(field("tool.navigate", json!({"url": ""})), "url");
        assert_eq!(field("tool.snapshot", json!({"tab_id": 0})), "tab_id");
        assert_eq!(
            field("tool.snapshot", json!({"tab_id": 9007199254740992_u64})),
            "tab_id"
        );
        assert_eq!(
            field("tool.click", json!({"ref": "e1", "timeout_ms": 0})),
            "timeout_ms"
        );
        assert_eq!(
            field("tool.click", json!({"ref": "e1", "selector": "#a"})),
            "ref"
        );
        assert_eq!(field("tool.click", json!({})), "ref");
        assert_eq!(
            field("tool.click", json!({"ref": "e1", "button": "back"})),
            "button"
        );
        assert_eq!(
            field("tool.click", json!({"ref": "e1", "modifiers": ["hyper"]})),
            "modifiers[0]"
        );
        assert_eq!(
            field("tool.window_resize", json!({"width": 99, "height": 500})),
            "width"
        );
        assert_eq!(field("tool.tab_close", json!({})), "tab_id");
        assert_eq!(field("tool.tab_list", json!({"scope": "mine"})), "scope");
        assert_eq!(field("tool.fill", json!({"ref": "e1"})), "value");
        assert_eq!(
            field("tool.select", json!({"ref": "e1", "values": "a"})),
            "values"
        );
        assert_eq!(
            field("tool.evaluate", json!({"expression": ""})),
            "expression"
        );
        assert_eq!(field("tool.console", json!({"limit": 0})), "limit");
        assert_eq!(
            field("tool.wait_ms", json!({"duration_ms": 300001})),
            "duration_ms"
        );
        assert_eq!(
            field("tool.record_await", json!({"timeout_ms": 0})),
            "timeout_ms"
        );
        assert_eq!(
            field("tool.emulate", json!({"overrides": {"width": 390}})),
            "overrides.width"
        );
        assert_eq!(
            field(
                "tool.emulate",
                json!({"overrides": {"accept_language": "fr"}})
            ),
            "overrides.accept_language"
        );
        assert_eq!(field("tool.emulate", json!({})), "overrides");
        assert_eq!(
            field(
                "tool.emulate",
                json!({"overrides": {"device_scale_factor": -1.0, "width": 1, "height": 1}})
            ),
            "overrides.device_scale_factor"
        );
        assert_eq!(
            field(
                "tool.request_help",
                json!({"prompt": "solve it", "completion_criteria": {"stable_for_ms": -1}})
            ),
            "completion_criteria.stable_for_ms"
        );
    }
}
