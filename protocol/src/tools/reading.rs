//! Reading JSON as the catalogue's types: params before a call is forwarded, and a
//! browser's result after. A problem names the field it is at, the way the
//! extension would ("ref: pass either ref or selector, not both").

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A params problem the gateway can see: which field, and why (a message that says
/// it in full, as the extension would: "pass either ref or selector, not both").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The field's path, e.g. `wait_until` or `overrides.width`; empty for the
    /// params as a whole.
    pub field: String,
    pub message: String,
}

impl ParamError {
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Rules across fields that serde cannot state, checked after a successful read.
pub(crate) trait Rules {
    fn rules(&self) -> Result<(), ParamError> {
        Ok(())
    }
}

/// The JSON Schema (draft 2020-12) of `T`'s params, as the catalogue publishes it.
/// Rules across fields (for example "ref or selector, not both") are the params'
/// descriptions' to state; the gateway checks them with [`check`].
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    serde_json::to_value(schema).unwrap_or(Value::Null)
}

/// Read `params` as `T` and check its rules.
pub(crate) fn check<T: for<'de> Deserialize<'de> + Rules>(
    params: &Map<String, Value>,
) -> Result<(), ParamError> {
    parse::<T, _>(params)?.rules()
}

/// Read a result as `T`; the problem names the field, as for params.
pub(crate) fn read<T: for<'de> Deserialize<'de>>(result: &Value) -> Result<(), ParamError> {
    parse::<T, _>(result).map(drop)
}

fn parse<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(input: D) -> Result<T, ParamError> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        // serde names a missing field in its message, at the parent's path.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(name)) => name.to_string(),
            (parent, Some(name)) => format!("{parent}.{name}"),
            (".", None) => String::new(),
            (path, None) => path.to_string(),
        };
        // serde's message names the value, not where it was: say where.
        let message = if field.is_empty() || missing.is_some() {
            message
        } else {
            format!("{field}: {message}")
        };
        ParamError { field, message }
    })
}
