//! Telemetry never hurts the request path: with the OTLP endpoint on a closed port,
//! every call still succeeds, and the spans that could not be delivered are counted.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_server::telemetry::otel::{self, TracingConfig};
use latchkey_testkit::{Backend, TestServer, wait_until};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_drops_and_counts_spans() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let cfg = TracingConfig {
        otlp_endpoint: Some(format!("http://127.0.0.1:{port}/v1/traces")),
        export_interval_ms: 100,
        ..TracingConfig::default()
    };
    let provider = otel::provider(&cfg).expect("provider").expect("enabled");
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(otel::layer(&provider))
        .init();

    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, _browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let session = agent.start(None).await.expect("session");
    for n in 0..20 {
        let r = agent
            .call(&session.id, "tool.snapshot", json!({"n": n}))
            .await
            .expect("call");
        assert!(
            r.is_ok(),
            "a call failed while the collector is down: {:?}",
            r.body
        );
    }
    let dropped = || async {
        let m = server.metrics().await.expect("scrape");
        m.get("latchkey_spans_dropped_total")
            .copied()
            .unwrap_or(0.0)
    };
    assert!(
        wait_until(Duration::from_secs(20), || async { dropped().await > 0.0 }).await,
        "dropped spans are counted"
    );
    server.stop().await;
}
