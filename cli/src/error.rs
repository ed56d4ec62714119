//! CLI errors and their exit codes (from the protocol crate's one table).

use latchkey_protocol::ErrorCode;
use latchkey_protocol::error_code::CliCode;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server refused with a stable code (and the browser's detail, such as
    /// `data.reason`, which agents branch on).
    #[error("{code}: {message}")]
    Api {
        code: ErrorCode,
        message: String,
        data: Option<serde_json::Value>,
    },
    /// The server could not be reached, or answered something unreadable.
    #[error("cannot reach latchkeyd at {0}")]
    Connection(String),
    /// Local configuration: missing URL or token, unreadable profile file.
    #[error("{0}")]
    Config(String),
    /// An id prefix that more than one id starts with (the message lists them).
    #[error("{0}")]
    AmbiguousId(String),
    /// An audit export that does not verify (the message says where).
    #[error("{0}")]
    AuditBroken(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Api { code, .. } => code.exit_code(),
            CliError::Connection(_) => CliCode::ConnectionFailed.exit_code(),
            CliError::Config(_) => CliCode::Config.exit_code(),
            CliError::AmbiguousId(_) => CliCode::AmbiguousId.exit_code(),
            CliError::AuditBroken(_) => CliCode::AuditBroken.exit_code(),
        }
    }

    /// The stable code shown to scripts.
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Api { code, .. } => code.as_str(),
            CliError::Connection(_) => CliCode::ConnectionFailed.as_str(),
            CliError::Config(_) => CliCode::Config.as_str(),
            CliError::AmbiguousId(_) => CliCode::AmbiguousId.as_str(),
            CliError::AuditBroken(_) => CliCode::AuditBroken.as_str(),
        }
    }

    /// The error's detail object, if the server sent one.
    pub fn data(&self) -> Option<&serde_json::Value> {
        match self {
            CliError::Api { data, .. } => data.as_ref(),
            _ => None,
        }
    }

    /// The JSON document printed with `--json`: `{"error": {code, message, data?}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut error = serde_json::json!({"code": self.code(), "message": self.message()});
        if let (Some(data), Some(obj)) = (self.data(), error.as_object_mut()) {
            obj.insert("data".into(), data.clone());
        }
        serde_json::json!({ "error": error })
    }

    pub fn message(&self) -> String {
        match self {
            CliError::Api { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}
