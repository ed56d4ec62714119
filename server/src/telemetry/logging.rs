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
    subscriber(format, traces)
        .try_init()
        .map_err(|e| e.to_string())
}

/// The subscriber [`init_logging`] installs.
fn subscriber(
    format: LogFormat,
    traces: Option<&SdkTracerProvider>,
) -> impl tracing::Subscriber + Send + Sync + 'static {
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
    // gets them.
    let lines = lines.with_filter(filter_fn(not_per_call_span));
    let otel = traces.map(super::otel::layer);
    // With no trace export nobody wants them, so their callsites are switched off
    // for good. A per-layer filter alone does not do that: an absent (`None`) layer
    // counts as interested in everything, so the registry still opened, entered and
    // closed two spans per relayed call (about 5 % of a call's CPU, measured with
    // `perf record` over `latchkey-load throughput`).
    let no_call_spans = traces.is_none().then(|| filter_fn(not_per_call_span));
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(otel)
        .with(no_call_spans)
}

fn not_per_call_span(meta: &tracing::Metadata<'_>) -> bool {
    !(meta.is_span() && PER_CALL_SPANS.contains(&meta.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_call_spans_exist_only_when_traces_are_exported() {
        let without = subscriber(LogFormat::Human, None);
        tracing::subscriber::with_default(without, || {
            assert!(tracing::info_span!("call").is_disabled());
            assert!(tracing::info_span!("agent_request").is_disabled());
            // Connection spans still carry their fields into the log lines.
            assert!(!tracing::info_span!("agent_socket").is_disabled());
        });
        let provider = SdkTracerProvider::builder().build();
        let with = subscriber(LogFormat::Human, Some(&provider));
        tracing::subscriber::with_default(with, || {
            assert!(!tracing::info_span!("call").is_disabled());
            assert!(!tracing::info_span!("agent_request").is_disabled());
        });
    }
}
