//! Params the protocol defines are judged by the gateway before a call is forwarded
//! (docs/protocol.md, "Tools"): a bad enum value, a value out of range, a missing
//! required field or a rule across fields is answered `invalid_params` naming the
//! field, at once, and the browser never sees the call. An outside review waited the
//! whole 30 s deadline on `navigate --wait-until bogus`. Methods the gateway does not
//! know still pass through.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::agent_socket::code_of;
use latchkey_testkit::{AgentSocket, Backend, TestServer};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_params_are_refused_before_the_browser_sees_them() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    // Every forwarded call would hang: only a refusal by the gateway answers.
    let (_device, browser) = server
        .new_browser(std::sync::Arc::new(
            |r: &latchkey_protocol::RequestFrame| {
                (!r.method.starts_with("tool.session_")).then_some(latchkey_testkit::Action::Never)
            },
        ))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("session").id;
    let cases: [(&str, Value, &str); 8] = [
        (
            "tool.navigate",
            json!({"url": "http://127.0.0.1/", "wait_until": "bogus"}),
            "wait_until",
        ),
        ("tool.navigate", json!({}), "url"),
        ("tool.snapshot", json!({"tab_id": 0}), "tab_id"),
        ("tool.click", json!({"ref": "e1", "selector": "#a"}), "ref"),
        (
            "tool.click",
            json!({"ref": "e1", "timeout_ms": 0}),
            "timeout_ms",
        ),
        (
            "tool.window_resize",
            json!({"width": 50, "height": 500}),
            "width",
        ),
        (
            "tool.emulate",
            json!({"overrides": {"width": 390}}),
            "overrides.width",
        ),
        ("tool.tab_list", json!({"scope": "mine"}), "scope"),
    ];
    for (method, params, field) in cases {
        let outcome = agent
            .call(&session, method, params.clone())
            .await
            .expect("answer");
        assert_eq!(
            (
                outcome.status,
                outcome.code(),
                outcome.body["error"]["data"]["field"].as_str()
            ),
            (400, "invalid_params", Some(field)),
            "{method} {params}: {}",
            outcome.body
        );
    }
    // The same on the agent socket.
    let mut socket = AgentSocket::open(&server, &agent.token)
        .await
        .expect("socket");
    let refused = socket
        .call(
            "n",
            "tool.navigate",
            json!({"session_id": session, "url": "http://127.0.0.1/", "wait_until": "bogus"}),
        )
        .await
        .expect("answer");
    assert_eq!(code_of(&refused), "invalid_params");
    let forwarded: Vec<String> = browser
        .received_methods()
        .into_iter()
        .filter(|m| !m.starts_with("tool.session_"))
        .collect();
    assert!(forwarded.is_empty(), "the browser saw {forwarded:?}");

    // A method name is bounded before anything else.
    let long = format!("tool.{}", "x".repeat(100));
    let refused = agent
        .call(&session, &long, json!({}))
        .await
        .expect("answer");
    assert_eq!((refused.status, refused.code()), (400, "unknown_method"));

    // A method the gateway does not know is the browser's to judge.
    let unknown = agent.spawn_call(&session, "tool.brand_new", json!({"anything": [1]}));
    assert!(
        latchkey_testkit::wait_until(std::time::Duration::from_secs(10), || async {
            browser.first("tool.brand_new").is_some()
        })
        .await
    );
    unknown.abort();
    server.stop().await;
}
