//! OpenTelemetry traces over OTLP/HTTP (protobuf or JSON), off by default.
//!
//! Spans come from `tracing` through tracing-opentelemetry. Export is batched on
//! the Tokio runtime with an async HTTP client, so it never blocks request handling;
//! when the collector is unreachable, spans are dropped and counted in
//! `latchkey_spans_dropped_total`, and requests carry on. A W3C `traceparent` sent by
//! an agent continues its trace through the gateway.

use std::collections::BTreeMap;
use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, Sampler, SdkTracerProvider, SpanData, SpanExporter,
};
use serde::{Deserialize, Serialize};

use super::metrics::SPANS_DROPPED;

/// `[tracing]` in the TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracingConfig {
    /// OTLP/HTTP traces endpoint, e.g. `http://collector:4318/v1/traces`; absent = off.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (default) or `http/json`. gRPC is not built in.
    pub otlp_protocol: String,
    /// Fraction of new traces sampled (a sampled parent is always followed).
    pub sample_ratio: f64,
    pub service_name: String,
    /// Extra resource attributes, e.g. `deployment.environment = "prod"`.
    pub resource_attributes: BTreeMap<String, String>,
    /// How often batches are sent.
    pub export_interval_ms: u64,
}

impl Default for TracingConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            otlp_protocol: "http/protobuf".to_string(),
            sample_ratio: 1.0,
            service_name: "latchkeyd".to_string(),
            resource_attributes: BTreeMap::new(),
            export_interval_ms: 5_000,
        }
    }
}

impl TracingConfig {
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !matches!(self.otlp_protocol.as_str(), "http/protobuf" | "http/json") {
            out.push(format!(
                "tracing.otlp_protocol must be \"http/protobuf\" or \"http/json\", not {:?}",
                self.otlp_protocol
            ));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            out.push("tracing.sample_ratio must be within 0..=1".to_string());
        }
        if let Some(e) = &self.otlp_endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            out.push(format!(
                "tracing.otlp_endpoint must be an http(s) URL, not {e:?}"
            ));
        }
        out
    }
}

#[derive(Debug, thiserror::Error)]
#[error("OTLP exporter: {0}")]
pub struct OtelError(String);

/// Counts spans whose export failed, then reports the failure as usual.
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_err() {
            metrics::counter!(SPANS_DROPPED).increment(n);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The tracer provider for `cfg` (call inside the Tokio runtime). `None` when off.
pub fn provider(cfg: &TracingConfig) -> Result<Option<SdkTracerProvider>, OtelError> {
    let Some(endpoint) = &cfg.otlp_endpoint else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(if cfg.otlp_protocol == "http/json" {
            opentelemetry_otlp::Protocol::HttpJson
        } else {
            opentelemetry_otlp::Protocol::HttpBinary
        })
        .with_endpoint(endpoint.clone())
        .with_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| OtelError(e.to_string()))?;
    let processor = BatchSpanProcessor::builder(
        CountingExporter { inner: exporter },
        opentelemetry_sdk::runtime::Tokio,
    )
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_scheduled_delay(Duration::from_millis(cfg.export_interval_ms))
            .build(),
    )
    .build();
    let mut resource = Resource::builder().with_service_name(cfg.service_name.clone());
    for (k, v) in &cfg.resource_attributes {
        resource = resource.with_attribute(opentelemetry::KeyValue::new(k.clone(), v.clone()));
    }
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_ratio,
        ))))
        .with_resource(resource.build())
        .build();
    Ok(Some(provider))
}

/// The tracing layer exporting to `provider`.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    tracing_opentelemetry::layer().with_tracer(provider.tracer("latchkeyd"))
}

struct HeaderExtractor<'a>(&'a axum::http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Continue the caller's trace when a `traceparent` header is present.
pub fn adopt_parent(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let _ = span.set_parent(cx);
}

struct MapExtractor<'a>(&'a str);

impl Extractor for MapExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent").then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// Continue a trace named by a `traceparent` value (agent socket requests).
pub fn adopt_traceparent(span: &tracing::Span, traceparent: &str) {
    let cx = TraceContextPropagator::new().extract(&MapExtractor(traceparent));
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let _ = span.set_parent(cx);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_problems() {
        assert!(TracingConfig::default().problems().is_empty());
        let json = TracingConfig {
            otlp_protocol: "http/json".into(),
            ..TracingConfig::default()
        };
        assert!(json.problems().is_empty());
        let bad = TracingConfig {
            otlp_protocol: "grpc".into(),
            sample_ratio: 2.0,
            otlp_endpoint: Some("collector:4317".into()),
            ..TracingConfig::default()
        };
        assert_eq!(bad.problems().len(), 3);
    }
}
