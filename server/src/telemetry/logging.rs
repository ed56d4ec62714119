//! Logging through `tracing`: human or JSON lines, filtered by `LATCHKEY_LOG`
//! (`RUST_LOG` syntax; default `info`). Nothing here or anywhere else records
//! headers, subprotocol values or bodies: spans carry method, path and ids only.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt;

use crate::config::LogFormat;

/// Install the global subscriber. Safe to call once per process.
pub fn init_logging(format: LogFormat) -> Result<(), String> {
    let filter = EnvFilter::try_from_env("LATCHKEY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let result = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}
