//! `latchkey tools`: the tool catalogue as the gateway knows it (the same table the
//! gateway judges params with), the local check of a call's params before it is
//! sent, so a mistake is answered at once with the gateway's own code and field, and
//! the reading of each answer against the result the catalogue describes.

use latchkey_protocol::ErrorCode;
use latchkey_protocol::tools::{TOOLS, catalogue_document};
use serde_json::{Map, Value, json};

use crate::error::CliError;
use crate::output::{json as print_json, lines, note, table};

/// Longest a warning quotes of what the browser answered.
const MAX_WARNING_CHARS: usize = 300;

/// Print every method: what it does to the browser, its default deadline, and what
/// it is for; with `--json`, the whole catalogue with each method's params schema.
pub fn list(json: bool) -> Result<(), CliError> {
    if json {
        print_json(&catalogue_document());
        return Ok(());
    }
    let rows: Vec<Vec<String>> = TOOLS
        .iter()
        .map(|t| {
            vec![
                t.method.to_string(),
                t.effect.as_str().to_string(),
                format!("{} s", t.default_deadline_ms / 1000),
                t.summary.to_string(),
            ]
        })
        .collect();
    table(&["METHOD", "EFFECT", "DEADLINE", "SUMMARY"], &rows);
    Ok(())
}

/// Judge `params` as the gateway will: `invalid_params` naming the field.
pub fn check(method: &str, params: &Map<String, Value>) -> Result<(), CliError> {
    latchkey_protocol::tools::validate(method, params).map_err(|e| CliError::Api {
        code: ErrorCode::InvalidParams,
        data: (!e.field.is_empty()).then(|| json!({ "field": e.field })),
        message: e.message,
    })
}

/// Why `result` is not the result the catalogue describes for `method`, if it is
/// not. Methods the catalogue does not know are not judged.
pub fn result_mismatch(method: &str, result: &Value) -> Option<String> {
    let tool = latchkey_protocol::tools::tool_named(method)?;
    let problem = tool.read_result(result).err()?;
    let message = latchkey_protocol::text::truncate(&problem.message, MAX_WARNING_CHARS);
    Some(format!(
        "the browser's answer to {method} does not match the tool catalogue ({}); the extension may be of another version than this CLI",
        lines(&message)
    ))
}

/// Say on stderr when `result` is not what the catalogue describes. The answer is
/// printed all the same: it is the browser's, and newer extensions may add to it.
pub fn warn_on_mismatch(method: &str, result: &Value) {
    if let Some(warning) = result_mismatch(method, result) {
        note!("latchkey: warning: {warning}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_param_is_refused_locally_with_the_gateways_code_and_field() {
        let mut params = Map::new();
        params.insert("wait_until".into(), json!("soon"));
        params.insert("url".into(), json!("https://example.com/"));
        let refused = check("tool.navigate", &params).expect_err("refused");
        assert_eq!(refused.code(), "invalid_params");
        assert_eq!(refused.data(), Some(&json!({ "field": "wait_until" })));
        params.insert("wait_until".into(), json!("load"));
        assert!(check("tool.navigate", &params).is_ok());
        // Methods the catalogue does not know pass, as they do at the gateway.
        assert!(check("tool.future_method", &Map::new()).is_ok());
    }

    #[test]
    fn an_answer_unlike_the_catalogue_is_named_and_a_matching_one_passes() {
        let good = json!({"tab_id": 3, "used_ref": "e2", "x": 10.5, "y": 4, "extra": true});
        assert_eq!(result_mismatch("tool.click", &good), None);
        let warning = result_mismatch("tool.click", &json!({"tab_id": "three", "x": 1, "y": 2}))
            .expect("a mismatch");
        assert!(warning.contains("tab_id"), "{warning}");
        let missing = result_mismatch("tool.snapshot", &json!({"tab_id": 1})).expect("missing");
        assert!(missing.contains("text"), "{missing}");
        // A hostile value is quoted safely and briefly.
        let long = "\u{1b}]0;pwned\u{7}".repeat(200);
        let hostile = result_mismatch("tool.click", &json!({"tab_id": long, "x": 1, "y": 2}))
            .expect("mismatch");
        assert!(
            !hostile.contains('\u{1b}') && hostile.chars().count() < 500,
            "{hostile}"
        );
        assert_eq!(result_mismatch("tool.future_method", &json!(1)), None);
    }
}
