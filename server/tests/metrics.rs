//! Prometheus metrics after a scripted workload, scraped from the real `/metrics`
//! listener and checked metric by metric. (One test in this binary: the recorder
//! is process-wide, so counts are exact.)

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::agent::CallRequest;
use latchkey_testkit::extension::new_token;
use latchkey_testkit::{Action, Backend, TestServer, wait_until};
use serde_json::json;

async fn scrape(server: &TestServer) -> HashMap<String, f64> {
    server.metrics().await.expect("scrape")
}

fn value(m: &HashMap<String, f64>, key: &str) -> f64 {
    *m.get(key).unwrap_or_else(|| {
        panic!(
            "missing {key}; have: {:?}",
            m.keys()
                .filter(|k| k.starts_with(key.split('{').next().unwrap_or("")))
                .collect::<Vec<_>>()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_workload() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let script = Arc::new(
        |r: &latchkey_protocol::RequestFrame| match r.method.as_str() {
            "tool.hang" => Some(Action::Never),
            "tool.nope" => Some(Action::Error(latchkey_protocol::ErrorBody::new(
                latchkey_protocol::ErrorCode::UnknownMethod,
                "tool.nope not implemented in extension",
            ))),
            _ => None,
        },
    );
    let (device, _browser) = server.new_browser(script).await.expect("browser");

    // A refused authorize (wrong pairing secret).
    let ext = server.new_extension().await.expect("ext");
    let mut wrong = ext.clone();
    wrong.pairing_secret = new_token();
    assert_eq!(
        wrong
            .pair_with(&new_token())
            .await
            .expect("req")
            .expect_err("refused")
            .status,
        401
    );

    let s = agent.start(None).await.expect("session");
    for _ in 0..3 {
        assert!(
            agent
                .call(&s.id, "tool.snapshot", json!({}))
                .await
                .expect("call")
                .is_ok()
        );
    }
    assert_eq!(
        agent
            .call(&s.id, "tool.nope", json!({}))
            .await
            .expect("call")
            .code(),
        "unknown_method"
    );
    assert_eq!(
        agent
            .call(&s.id, "tool.made-up-by-an-agent", json!({}))
            .await
            .expect("call")
            .status,
        200
    );
    let timeout = CallRequest {
        method: "tool.hang".into(),
        params: Some(json!({})),
        timeout_ms: Some(100),
    };
    assert_eq!(
        agent.call_with(&s.id, &timeout).await.expect("call").code(),
        "timeout"
    );

    let m = scrape(&server).await;
    assert_eq!(value(&m, "latchkey_build_info{version=\"0.1.0\"}"), 1.0);
    assert_eq!(value(&m, "latchkey_devices_connected"), 1.0);
    assert_eq!(value(&m, "latchkey_sessions_open"), 1.0);
    assert_eq!(
        value(
            &m,
            "latchkey_calls_total{method=\"tool.snapshot\",outcome=\"ok\"}"
        ),
        3.0
    );
    assert_eq!(
        value(
            &m,
            "latchkey_calls_total{method=\"other\",outcome=\"unknown_method\"}"
        ),
        1.0
    );
    assert_eq!(
        value(&m, "latchkey_calls_total{method=\"other\",outcome=\"ok\"}"),
        1.0,
        "unknown methods share one label"
    );
    assert_eq!(
        value(
            &m,
            "latchkey_calls_total{method=\"other\",outcome=\"timeout\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &m,
            "latchkey_call_duration_seconds_count{method=\"tool.snapshot\"}"
        ),
        3.0
    );
    assert!(
        value(
            &m,
            "latchkey_call_duration_seconds_bucket{method=\"tool.snapshot\",le=\"1\"}"
        ) >= 3.0
    );
    assert_eq!(
        value(
            &m,
            "latchkey_authorize_total{outcome=\"invalid_authorization\"}"
        ),
        1.0
    );
    assert_eq!(
        value(&m, "latchkey_authorize_total{outcome=\"ok\"}"),
        1.0,
        "one pairing succeeded"
    );
    assert!(
        value(
            &m,
            "latchkey_frames_total{direction=\"in\",peer=\"device\"}"
        ) >= 7.0
    );
    assert!(
        value(
            &m,
            "latchkey_bytes_total{direction=\"out\",peer=\"device\"}"
        ) > 0.0
    );
    assert!(
        !m.keys().any(|k| k.contains("made-up")),
        "agent-chosen strings never become labels"
    );

    // Revocation: counted, and the device is gone from the gauge.
    server.admin().revoke(&device).await.expect("revoke");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            let m = scrape(&server).await;
            m.get("latchkey_devices_connected") == Some(&0.0)
                && m.get("latchkey_sessions_open") == Some(&0.0)
        })
        .await
    );
    let m = scrape(&server).await;
    assert_eq!(value(&m, "latchkey_revocations_total"), 1.0);
    assert_eq!(
        value(&m, "latchkey_revoke_close_seconds_count"),
        1.0,
        "revoke → close latency observed"
    );
    assert!(
        value(
            &m,
            "latchkey_store_query_seconds_count{op=\"revoke_device\"}"
        ) >= 1.0
    );
    assert!(
        value(
            &m,
            "latchkey_store_query_seconds_count{op=\"redeem_pairing\"}"
        ) >= 1.0
    );
    assert!(
        value(&m, "latchkey_frames_dropped_total{reason=\"unknown_id\"}") >= 1.0,
        "the cancel ack has no waiter"
    );
    assert_eq!(
        value(&m, "latchkey_outbox_frames"),
        0.0,
        "nothing left queued"
    );
    assert_eq!(
        value(
            &m,
            "latchkey_device_disconnects_total{reason=\"closed by server\"}"
        ),
        1.0
    );
    server.stop().await;
}
