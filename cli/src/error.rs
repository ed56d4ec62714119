//! CLI errors and their exit codes (from the protocol crate's one table).

use latchkey_protocol::ErrorCode;
use latchkey_protocol::error_code::exit;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server refused with a stable code.
    #[error("{code}: {message}")]
    Api { code: ErrorCode, message: String },
    /// The server could not be reached, or answered something unreadable.
    #[error("cannot reach the server: {0}")]
    Connection(String),
    /// Local configuration: missing URL or token, unreadable profile file.
    #[error("{0}")]
    Config(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Api { code, .. } => code.exit_code(),
            CliError::Connection(_) => exit::CONNECTION,
            CliError::Config(_) => exit::USAGE,
        }
    }

    /// The stable code shown to scripts.
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Api { code, .. } => code.as_str(),
            CliError::Connection(_) => "connection_failed",
            CliError::Config(_) => "config",
        }
    }

    pub fn message(&self) -> String {
        match self {
            CliError::Api { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}
