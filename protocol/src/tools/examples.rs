//! One example of each method's params, shown in docs/tools.md as the call an
//! agent makes. A test judges every example with the catalogue's own validator, so
//! an example that the gateway would refuse cannot be published.

/// `(method, params as JSON)`, in catalogue order; the session lifecycle methods,
/// which only the gateway sends, have none.
pub static EXAMPLES: &[(&str, &str)] = &[
    ("tool.tab_list", r#"{"scope": "agent"}"#),
    (
        "tool.tab_create",
        r#"{"url": "https://example.com/", "active": true}"#,
    ),
    ("tool.tab_close", r#"{"tab_id": 412}"#),
    ("tool.tab_select", r#"{"tab_id": 412}"#),
    ("tool.tab_borrow", r#"{"tab_id": 97}"#),
    ("tool.tab_return", r#"{"tab_id": 97}"#),
    ("tool.window_resize", r#"{"width": 1280, "height": 800}"#),
    (
        "tool.emulate",
        r#"{"overrides": {"width": 390, "height": 844, "mobile": true, "touch": true}}"#,
    ),
    (
        "tool.navigate",
        r#"{"url": "https://example.com/login", "wait_until": "load"}"#,
    ),
    ("tool.navigate_back", r#"{}"#),
    ("tool.navigate_forward", r#"{}"#),
    ("tool.reload", r#"{"hard": true}"#),
    (
        "tool.wait_for_navigation",
        r#"{"wait_until": "networkidle", "timeout_ms": 10000}"#,
    ),
    ("tool.wait_ms", r#"{"duration_ms": 500}"#),
    ("tool.click", r#"{"ref": "e4"}"#),
    ("tool.hover", r#"{"ref": "e6"}"#),
    ("tool.fill", r#"{"ref": "e2", "value": "ann@example.com"}"#),
    ("tool.press", r#"{"key": "Enter", "ref": "e2"}"#),
    ("tool.select", r#"{"ref": "e5", "values": ["Large"]}"#),
    ("tool.snapshot", r#"{"max_tokens": 2000}"#),
    ("tool.observe", r#"{}"#),
    ("tool.get_html", r#"{"ref": "e9", "max_bytes": 20000}"#),
    ("tool.screenshot", r#"{}"#),
    ("tool.console", r#"{"since": 0, "limit": 50}"#),
    ("tool.network", r#"{"since": 0}"#),
    ("tool.evaluate", r#"{"expression": "document.title"}"#),
    (
        "tool.request_help",
        r#"{"prompt": "Please complete the sign-in check, then press Done", "title": "Sign-in check", "completion_criteria": {"any": [{"url_contains": "/dashboard"}]}}"#,
    ),
    (
        "tool.record_start",
        r#"{"purpose": "show me how you file an expense"}"#,
    ),
    ("tool.record_stop", r#"{}"#),
    ("tool.record_await", r#"{"timeout_ms": 120000}"#),
];

/// The example params of `method`.
pub fn example(method: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(m, _)| *m == method).map(|(_, e)| *e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{TOOLS, tool_named};

    #[test]
    fn every_method_has_one_example_the_gateway_accepts() {
        for tool in TOOLS.iter().filter(|t| !t.session_lifecycle) {
            assert_eq!(
                EXAMPLES.iter().filter(|(m, _)| *m == tool.method).count(),
                1,
                "{}",
                tool.method
            );
        }
        for (method, params) in EXAMPLES {
            let tool = tool_named(method).unwrap_or_else(|| panic!("{method} is not a method"));
            let value: serde_json::Value =
                serde_json::from_str(params).unwrap_or_else(|e| panic!("{method}: {e}"));
            let Some(map) = value.as_object() else {
                panic!("{method}: params are not an object");
            };
            if let Err(e) = tool.validate(map) {
                panic!("{method}: the example is refused: {e:?}");
            }
        }
    }
}
