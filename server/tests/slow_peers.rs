//! Peers that stop reading: a device whose receive buffer fills is dropped after the
//! write stall timeout, its callers are answered, and the gateway stays healthy; an
//! agent socket that stops reading is dropped the same way.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_testkit::browser::Action;
use latchkey_testkit::tokio_tungstenite::connect_async;
use latchkey_testkit::tokio_tungstenite::tungstenite::Message;
use latchkey_testkit::tokio_tungstenite::tungstenite::client::IntoClientRequest;
use latchkey_testkit::{Backend, TestServer, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

/// About 1.5 MiB of parameters: under the REST body limit, and a dozen of them are
/// more than loopback's socket buffers hold.
fn bulky() -> serde_json::Value {
    json!({ "ref": "e1", "value": "x".repeat(1_500_000) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_stops_reading_is_dropped_and_its_callers_answered() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.write_stall_timeout_ms = 500;
            l.max_calls_in_flight_per_device = 32;
            l.max_sessions_per_device = 16;
        })
        .start()
        .await
        .expect("server");
    let script = Arc::new(|r: &latchkey_protocol::RequestFrame| {
        (r.method == "tool.wait_for_navigation").then_some(Action::StopReading)
    });
    let (device, browser) = server.new_browser(script).await.expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let mut sessions = Vec::new();
    for _ in 0..13 {
        sessions.push(agent.start(Some(&device)).await.expect("session").id);
    }
    // The device stops reading; then a dozen bulky calls are written towards it.
    let stall = agent.spawn_call(&sessions[0], "tool.wait_for_navigation", json!({}));
    assert!(
        wait_until(DEADLINE, || async {
            browser.first("tool.wait_for_navigation").is_some()
        })
        .await
    );
    let calls: Vec<_> = sessions[1..]
        .iter()
        .map(|s| agent.spawn_call(s, "tool.fill", bulky()))
        .collect();
    let stalled = stall.await.expect("stalled call");
    assert_eq!(stalled.code(), "browser_disconnected", "{:?}", stalled.body);
    // Every caller is answered: in flight when the device was dropped →
    // `browser_disconnected`; arrived after the drop (a slow upload of its 1.5 MiB body) → the
    // session has ended, and says why: `session_ended`, reason `browser_disconnected`
    // (docs/sessions.md, "How a session ends"). The calls whose writes filled the socket
    // were in flight, so at least one is the former.
    let mut disconnected = 0;
    for c in calls {
        let o = c.await.expect("call");
        match o.code() {
            "browser_disconnected" => disconnected += 1,
            "session_ended" => assert_eq!(o.reason(), "browser_disconnected", "{:?}", o.body),
            other => panic!("unexpected {other}: {:?}", o.body),
        }
    }
    assert!(disconnected >= 1, "no call was in flight at the drop");
    // The fake browser, not reading, cannot see the drop itself; the gateway has
    // let go of the device.
    assert!(
        wait_until(DEADLINE, || async {
            server.state().registry.status(&device).is_none()
        })
        .await
    );
    drop(browser);
    // Healthy after: a new device and a call work.
    let (device2, _b2) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser 2");
    let session = agent.start(Some(&device2)).await.expect("session");
    assert!(
        agent
            .call(&session.id, "tool.tab_list", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_socket_that_stops_reading_is_dropped() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.write_stall_timeout_ms = 500)
        .start()
        .await
        .expect("server");
    let (device, _browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let mut request = format!("ws://{}/v1/agent", server.addr())
        .into_client_request()
        .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", agent.token).parse().expect("header"),
    );
    let (mut ws, _) = connect_async(request).await.expect("agent socket");
    ws.send(Message::text(
        json!({"id": "s", "method": "session.start", "params": {"browser_id": device}}).to_string(),
    ))
    .await
    .expect("start");
    let session_id = loop {
        let Some(Ok(Message::Text(text))) = ws.next().await else {
            panic!("agent socket ended before the session started");
        };
        let frame: serde_json::Value = serde_json::from_str(text.as_str()).expect("json");
        if frame["id"] == "s" {
            break frame["result"]["id"]
                .as_str()
                .expect("session id")
                .to_string();
        }
    };
    // Never read again, and keep asking for bulky answers (the fake browser echoes
    // the params back), until the gateway gives up on this socket.
    let mut sent = 0usize;
    let dropped = tokio::time::timeout(DEADLINE, async {
        loop {
            let frame = json!({
                "id": format!("c{sent}"),
                "method": "tool.fill",
                "params": {"session_id": session_id, "ref": "e1", "value": "x".repeat(1_000_000)},
            });
            if ws.send(Message::text(frame.to_string())).await.is_err() {
                return;
            }
            sent += 1;
        }
    })
    .await;
    assert!(
        dropped.is_ok(),
        "socket still accepted writes after {sent} bulky requests"
    );
    server.stop().await;
}
