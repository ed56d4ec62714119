//! `latchkey tools`: the tool catalogue as the gateway knows it (the same table the
//! gateway judges params with), and the local check of a call's params before it is
//! sent, so a mistake is answered at once with the gateway's own code and field.

use latchkey_protocol::ErrorCode;
use latchkey_protocol::tools::{TOOLS, catalogue_document};
use serde_json::{Map, Value, json};

use crate::error::CliError;
use crate::output::{json as print_json, table};

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
}
