//! Traces: one relayed call's span tree continues the agent's `traceparent`, and no
//! span attribute carries a secret. Spans are collected with the SDK's in-memory
//! exporter through the same tracing layer latchkeyd installs.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use latchkey_testkit::tokio_tungstenite::tungstenite::Message;
use latchkey_testkit::tokio_tungstenite::tungstenite::client::IntoClientRequest;
use latchkey_testkit::{Backend, TestServer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SimpleSpanProcessor};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";
const SOCKET_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_call_continues_the_agents_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(SimpleSpanProcessor::new(exporter.clone()))
        .build();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
        .init();

    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, _browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let session = agent.start(None).await.expect("session");
    let url = format!("{}/v1/sessions/{}/calls", server.http_base(), session.id);
    let resp = server
        .http
        .post(url)
        .bearer_auth(&agent.token)
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_SPAN}-01"))
        .json(&json!({"method": "tool.snapshot", "params": {}}))
        .send()
        .await
        .expect("call");
    assert_eq!(resp.status().as_u16(), 200);
    // The same over the agent socket: a `traceparent` member in the params.
    let mut req = format!("ws://{}/v1/agent", server.addr())
        .into_client_request()
        .expect("request");
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {}", agent.token).parse().expect("header"),
    );
    let (mut ws, _) = latchkey_testkit::tokio_tungstenite::connect_async(req)
        .await
        .expect("agent socket");
    let frame = json!({"id": "t1", "method": "tool.snapshot", "params": {
        "session_id": session.id, "traceparent": format!("00-{SOCKET_TRACE_ID}-{PARENT_SPAN}-01")}});
    ws.send(Message::text(frame.to_string()))
        .await
        .expect("send");
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("answer")
            .expect("open")
            .expect("ok");
        if let Message::Text(t) = msg
            && t.as_str().contains("\"t1\"")
        {
            assert!(t.as_str().contains("result"), "{t}");
            assert!(
                !t.as_str().contains("traceparent"),
                "traceparent is not forwarded to the browser: {t}"
            );
            break;
        }
    }
    let _ = provider.force_flush();

    let spans = exporter.get_finished_spans().expect("spans");
    let socket_request = spans
        .iter()
        .find(|s| {
            s.name == "agent_request" && s.span_context.trace_id().to_string() == SOCKET_TRACE_ID
        })
        .expect("an agent_request span in the agent's trace");
    assert_eq!(socket_request.parent_span_id.to_string(), PARENT_SPAN);
    assert!(
        spans
            .iter()
            .any(|s| s.name == "call" && s.parent_span_id == socket_request.span_context.span_id()),
        "the socket call's span is under the agent's"
    );
    let http = spans
        .iter()
        .find(|s| s.name == "http" && s.span_context.trace_id().to_string() == TRACE_ID)
        .unwrap_or_else(|| {
            panic!(
                "no http span in the agent's trace: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    assert_eq!(
        http.parent_span_id.to_string(),
        PARENT_SPAN,
        "the agent's span is the parent"
    );
    let call = spans
        .iter()
        .find(|s| s.name == "call" && s.parent_span_id == http.span_context.span_id())
        .expect("a call span under the request span");
    let attrs: Vec<String> = call
        .attributes
        .iter()
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    assert!(
        attrs.iter().any(|a| a == "method=tool.snapshot"),
        "{attrs:?}"
    );
    assert!(attrs.iter().any(|a| a.starts_with("session=")), "{attrs:?}");

    // The other spans of the run: pairing, handshake, session start.
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let attr = |s: &opentelemetry_sdk::trace::SpanData, key: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert!(
        named("authorize")
            .iter()
            .any(|s| attr(s, "action").as_deref() == Some("pair")
                && attr(s, "outcome").as_deref() == Some("ok")),
        "an authorize span for the pairing"
    );
    assert!(!named("handshake").is_empty(), "a handshake span");
    assert!(
        named("session_start")
            .iter()
            .any(|s| attr(s, "session").as_deref() == Some(session.id.as_str()))
    );
    assert_eq!(attr(call, "outcome").as_deref(), Some("ok"));

    // No secret in any span of the run.
    let everything: String = spans
        .iter()
        .flat_map(|s| {
            s.attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .chain([s.name.to_string()])
        })
        .collect::<Vec<_>>()
        .join("\n");
    for secret in [server.admin_token.as_str(), agent.token.as_str()] {
        assert!(!everything.contains(secret), "a secret reached a span");
    }
    server.stop().await;
}
