//! Logging through `tracing`: human or JSON lines, filtered by `LATCHKEY_LOG`
//! (`RUST_LOG` syntax; default `info`), plus the OpenTelemetry layer when OTLP export
//! is configured. Nothing here or anywhere else records headers, subprotocol values
//! or bodies: spans carry method, path and ids only.

use std::io::IsTerminal;

use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

use crate::config::LogFormat;

/// Spans opened for every relayed call (`router::calls`, `agent::socket`).
const PER_CALL_SPANS: &[&str] = &["call", "agent_request"];

/// Install the global subscriber. Safe to call once per process.
pub fn init_logging(format: LogFormat, traces: Option<&SdkTracerProvider>) -> Result<(), String> {
    let filter = EnvFilter::try_from_env("LATCHKEY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let base = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let lines = match format {
        LogFormat::Human => base.boxed(),
        LogFormat::Json => base
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .boxed(),
    };
    // Per-call spans stay out of the log lines (events inside a call still print,
    // with their connection's span): formatting them for the log layer cost about a
    // quarter of a relayed call's CPU (docs/benchmarks.md). The trace layer still
    // gets them; with no trace export they are never created at all.
    let lines = lines.with_filter(filter_fn(|meta| {
        !(meta.is_span() && PER_CALL_SPANS.contains(&meta.name()))
    }));
    let otel = traces.map(super::otel::layer);
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(otel)
        .try_init()
        .map_err(|e| e.to_string())
}
