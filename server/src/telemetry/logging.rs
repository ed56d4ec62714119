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

/// Spans opened for every relayed call (`sessions::calls`, `agent::socket`).
const PER_CALL_SPANS: &[&str] = &["call", "agent_request"];

/// The most verbose level any dependency may log at, whatever `LATCHKEY_LOG` says.
/// At TRACE the WebSocket library logs every message it receives and every frame it
/// writes, payload included (a `tool.fill` value, an `evaluate` expression), and the
/// HTTP stack logs what it parses: frame contents must never reach a log
/// (docs/security.md). Latchkey's own code never logs a payload at any level.
const DEPENDENCY_MAX_LEVEL: tracing::Level = tracing::Level::DEBUG;

/// Whether `target` is Latchkey's own code (exempt from [`DEPENDENCY_MAX_LEVEL`]).
fn is_own_target(target: &str) -> bool {
    target.starts_with("latchkey")
}

/// Install the global subscriber. Safe to call once per process.
pub fn init_logging(format: LogFormat, traces: Option<&SdkTracerProvider>) -> Result<(), String> {
    let filter = EnvFilter::try_from_env("LATCHKEY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    subscriber(format, traces, filter)
        .try_init()
        .map_err(|e| e.to_string())
}

/// The subscriber [`init_logging`] installs.
fn subscriber(
    format: LogFormat,
    traces: Option<&SdkTracerProvider>,
    filter: EnvFilter,
) -> impl tracing::Subscriber + Send + Sync + 'static {
    // The most verbose level the filter lets through, computed before it is moved.
    let most_verbose = <EnvFilter as Layer<tracing_subscriber::Registry>>::max_level_hint(&filter);
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
    // The outermost gate does two things the layers below cannot.
    // - With no trace export nobody wants the per-call spans, so their callsites are
    //   switched off for good. A per-layer filter alone does not do that: an absent
    //   (`None`) layer counts as interested in everything, so the registry still
    //   opened, entered and closed two spans per relayed call (about 5 % of a call's
    //   CPU, `perf record` over `latchkey-load throughput`).
    // - It states the most verbose level anything is logged at. Without it the
    //   per-layer filter leaves the stack with no level hint, which means TRACE:
    //   every `trace!` in a dependency (tungstenite logs one per read) went through
    //   the `log` bridge and the dispatcher only to be dropped by the filter, 7 % of
    //   the server's CPU relaying 1 MiB results.
    let keep_call_spans = traces.is_some();
    let gate = filter_fn(move |meta| {
        most_verbose.is_none_or(|level| meta.level() <= &level)
            && (meta.level() <= &DEPENDENCY_MAX_LEVEL || is_own_target(meta.target()))
            && (keep_call_spans || not_per_call_span(meta))
    });
    let gate = match most_verbose {
        Some(level) => gate.with_max_level_hint(level),
        None => gate,
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .with(otel)
        .with(gate)
}

fn not_per_call_span(meta: &tracing::Metadata<'_>) -> bool {
    !(meta.is_span() && PER_CALL_SPANS.contains(&meta.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> EnvFilter {
        EnvFilter::new("info")
    }

    #[test]
    fn the_stack_states_the_filters_level() {
        use tracing::Subscriber;
        use tracing_subscriber::filter::LevelFilter;
        let provider = SdkTracerProvider::builder().build();
        for traces in [None, Some(&provider)] {
            let at_info = subscriber(LogFormat::Human, traces, info());
            assert_eq!(at_info.max_level_hint(), Some(LevelFilter::INFO));
            let at_debug = subscriber(LogFormat::Json, traces, EnvFilter::new("debug"));
            assert_eq!(at_debug.max_level_hint(), Some(LevelFilter::DEBUG));
        }
    }

    #[test]
    fn dependencies_never_log_below_debug() {
        let at_trace = subscriber(LogFormat::Human, None, EnvFilter::new("trace"));
        tracing::subscriber::with_default(at_trace, || {
            assert!(!tracing::enabled!(target: "tungstenite::protocol", tracing::Level::TRACE));
            assert!(!tracing::enabled!(target: "hyper::proto::h1::io", tracing::Level::TRACE));
            assert!(tracing::enabled!(target: "tungstenite::protocol", tracing::Level::DEBUG));
            assert!(tracing::enabled!(target: "latchkey_server::devices", tracing::Level::TRACE));
        });
    }

    #[test]
    fn per_call_spans_exist_only_when_traces_are_exported() {
        let without = subscriber(LogFormat::Human, None, info());
        tracing::subscriber::with_default(without, || {
            assert!(tracing::info_span!("call").is_disabled());
            assert!(tracing::info_span!("agent_request").is_disabled());
            // Connection spans still carry their fields into the log lines.
            assert!(!tracing::info_span!("agent_socket").is_disabled());
        });
        let provider = SdkTracerProvider::builder().build();
        let with = subscriber(LogFormat::Human, Some(&provider), info());
        tracing::subscriber::with_default(with, || {
            assert!(!tracing::info_span!("call").is_disabled());
            assert!(!tracing::info_span!("agent_request").is_disabled());
        });
    }
}
