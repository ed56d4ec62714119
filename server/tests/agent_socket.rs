//! The agent WebSocket `/v1/agent`: the extension envelope for agents, with
//! concurrent requests, cancel, pushed events and a per-token socket cap.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::Frame;
use latchkey_testkit::tokio_tungstenite::tungstenite::client::IntoClientRequest;
use latchkey_testkit::tokio_tungstenite::tungstenite::{self, Message};
use latchkey_testkit::tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};
use latchkey_testkit::{Backend, FakeBrowser, TestServer, wait_until};
use serde_json::{Value, json};
use tokio::net::TcpStream;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
const DEADLINE: Duration = Duration::from_secs(10);

async fn open(server: &TestServer, token: &str) -> Result<Ws, tungstenite::Error> {
    let url = format!("ws://{}/v1/agent", server.addr());
    let mut req = url.into_client_request().expect("request");
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    connect_async(req).await.map(|(ws, _)| ws)
}

/// A real server with one agent, one browser online (its `tool.hang` never
/// answers) and the agent's socket open.
struct Setup {
    server: TestServer,
    device: String,
    browser: FakeBrowser,
    ws: Ws,
}

async fn setup() -> Setup {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (device, browser) = server
        .new_browser(latchkey_testkit::browser::never_answers("tool.hang"))
        .await
        .expect("browser");
    let ws = open(&server, &agent.token).await.expect("socket");
    Setup {
        server,
        device,
        browser,
        ws,
    }
}

async fn send(ws: &mut Ws, value: Value) {
    ws.send(Message::text(value.to_string()))
        .await
        .expect("send");
}

/// The next frame that is not an event (events are collected into `events`).
async fn next(ws: &mut Ws, events: &mut Vec<Value>) -> Frame {
    loop {
        let msg = tokio::time::timeout(DEADLINE, ws.next())
            .await
            .expect("frame in time")
            .expect("open")
            .expect("ok");
        let Message::Text(t) = msg else { continue };
        let frame = Frame::parse(t.as_str()).expect("frame");
        if let Frame::Event(e) = &frame {
            events.push(serde_json::to_value(e).expect("json"));
            continue;
        }
        return frame;
    }
}

/// Read until an event frame arrives.
async fn next_event(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(DEADLINE, ws.next())
            .await
            .expect("event in time")
            .expect("open")
            .expect("ok");
        if let Message::Text(t) = msg
            && let Ok(Frame::Event(e)) = Frame::parse(t.as_str())
        {
            return serde_json::to_value(e).expect("json");
        }
    }
}

fn result(frame: Frame) -> Value {
    match frame {
        Frame::Success(s) => s.result,
        other => panic!("expected a result, got {other:?}"),
    }
}

fn error_code(frame: &Frame) -> String {
    match frame {
        Frame::Error(e) => e.error.code.to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_socket_end_to_end() {
    let Setup {
        server,
        device,
        browser,
        mut ws,
    } = setup().await;
    let mut events = Vec::new();

    send(&mut ws, json!({"id": "1", "method": "browser.list"})).await;
    let list = result(next(&mut ws, &mut events).await);
    assert_eq!(list["browsers"][0]["id"], device.as_str());

    send(
        &mut ws,
        json!({"id": "2", "method": "session.start", "params": {}}),
    )
    .await;
    let session = result(next(&mut ws, &mut events).await);
    let sid = session["id"].as_str().expect("id").to_string();

    send(&mut ws, json!({"id": "3", "method": "tool.navigate", "params": {"session_id": sid, "url": "http://127.0.0.1/"}})).await;
    let nav = result(next(&mut ws, &mut events).await);
    assert_eq!(nav["echo"]["url"], "http://127.0.0.1/");

    // Junk gets an error frame; the socket stays usable.
    ws.send(Message::text("{not json")).await.expect("send");
    let junk = next(&mut ws, &mut events).await;
    assert_eq!(error_code(&junk), "invalid_request");
    send(&mut ws, json!({"id": "4", "method": "tool.snapshot"})).await;
    assert_eq!(
        error_code(&next(&mut ws, &mut events).await),
        "invalid_params",
        "tool calls need session_id"
    );
    send(
        &mut ws,
        json!({"id": "5", "method": "tool.snapshot", "params": {"session_id": "nope"}}),
    )
    .await;
    assert_eq!(error_code(&next(&mut ws, &mut events).await), "not_found");
    // Params that do not decode are the request's fault, as a REST body's are; a
    // value that decodes but breaks a rule is a param's (docs/error-codes.md).
    send(
        &mut ws,
        json!({"id": "5a", "method": "session.start", "params": {"nope": 1}}),
    )
    .await;
    assert_eq!(
        error_code(&next(&mut ws, &mut events).await),
        "invalid_request"
    );
    send(
        &mut ws,
        json!({"id": "5b", "method": "session.start", "params": {"width": 5, "height": 5}}),
    )
    .await;
    assert_eq!(
        error_code(&next(&mut ws, &mut events).await),
        "invalid_params"
    );
    send(&mut ws, json!({"id": "6", "method": "system.status"})).await;
    assert_eq!(
        error_code(&next(&mut ws, &mut events).await),
        "unknown_method"
    );

    // A gateway-local wait, cancelled: nothing reaches the extension.
    send(&mut ws, json!({"id": "w", "method": "tool.wait_ms", "params": {"session_id": sid, "duration_ms": 60000}})).await;
    send(
        &mut ws,
        json!({"id": "c1", "method": "cancel", "params": {"rpc_id": "w"}}),
    )
    .await;
    let mut answers = [
        next(&mut ws, &mut events).await,
        next(&mut ws, &mut events).await,
    ];
    answers.sort_by_key(|f| f.id().map(str::to_string));
    assert_eq!(result(answers[0].clone())["cancelled"], true);
    assert_eq!(error_code(&answers[1]), "cancelled");
    assert_eq!(
        browser.count("cancel"),
        0,
        "a call never forwarded sends no cancel"
    );

    // A forwarded call, cancelled: the extension gets `cancel` for it.
    send(
        &mut ws,
        json!({"id": "h", "method": "tool.hang", "params": {"session_id": sid}}),
    )
    .await;
    assert!(wait_until(DEADLINE, || async { browser.count("tool.hang") == 1 }).await);
    send(
        &mut ws,
        json!({"id": "c2", "method": "cancel", "params": {"rpc_id": "h"}}),
    )
    .await;
    let mut answers = [
        next(&mut ws, &mut events).await,
        next(&mut ws, &mut events).await,
    ];
    answers.sort_by_key(|f| f.id().map(str::to_string));
    assert_eq!(result(answers[0].clone())["cancelled"], true);
    assert_eq!(error_code(&answers[1]), "cancelled");
    assert!(wait_until(DEADLINE, || async { browser.count("cancel") == 1 }).await);

    // Events of the session are pushed.
    browser.event("session.user_interrupt", json!({"session_id": sid}));
    let event = next_event(&mut ws).await;
    assert_eq!(event["event"], "session.user_interrupt");
    assert_eq!(event["payload"]["session_id"], sid.as_str());
    // The interrupt armed the gate: the next mutation is refused, once.
    send(
        &mut ws,
        json!({"id": "g", "method": "tool.click", "params": {"session_id": sid, "ref": "e1"}}),
    )
    .await;
    assert_eq!(
        error_code(&next(&mut ws, &mut events).await),
        "user_aborted"
    );

    // Closing the socket cancels what it has in flight.
    send(
        &mut ws,
        json!({"id": "h2", "method": "tool.hang", "params": {"session_id": sid}}),
    )
    .await;
    assert!(wait_until(DEADLINE, || async { browser.count("tool.hang") == 2 }).await);
    drop(ws);
    assert!(
        wait_until(DEADLINE, || async { browser.count("cancel") == 2 }).await,
        "closing the socket cancels"
    );
    server.stop().await;
}

/// Frames up to and including the answer to `last`, events left out.
async fn answers_until(ws: &mut Ws, last: &str) -> Vec<Frame> {
    let mut events = Vec::new();
    let mut frames = Vec::new();
    loop {
        let frame = next(ws, &mut events).await;
        let done = frame.id() == Some(last);
        frames.push(frame);
        if done {
            return frames;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_answered_exactly_once() {
    let Setup {
        server,
        browser: _browser,
        mut ws,
        ..
    } = setup().await;
    let mut events = Vec::new();
    send(
        &mut ws,
        json!({"id": "s", "method": "session.start", "params": {}}),
    )
    .await;
    let session = result(next(&mut ws, &mut events).await);
    let sid = session["id"].as_str().expect("id").to_string();
    let wait = |id: &str, ms: u64| json!({"id": id, "method": "tool.wait_ms", "params": {"session_id": sid, "duration_ms": ms}});

    // An id still running is refused; the running request is untouched.
    send(&mut ws, wait("x", 60_000)).await;
    send(&mut ws, wait("x", 1)).await;
    let refused = next(&mut ws, &mut events).await;
    assert_eq!(refused.id(), Some("x"));
    assert_eq!(error_code(&refused), "invalid_request");
    // Cancelling an unknown id cancels nothing.
    send(
        &mut ws,
        json!({"id": "c0", "method": "cancel", "params": {"rpc_id": "nobody"}}),
    )
    .await;
    assert_eq!(result(next(&mut ws, &mut events).await)["cancelled"], false);
    // Cancelled: answered once, by the cancel; the id is free again at once, and
    // the cancelled request never answers the new one's id.
    send(
        &mut ws,
        json!({"id": "c1", "method": "cancel", "params": {"rpc_id": "x"}}),
    )
    .await;
    send(&mut ws, wait("x", 1)).await;
    let mut frames = Vec::new();
    while !frames
        .iter()
        .any(|f| matches!(f, Frame::Success(s) if s.id == "x"))
    {
        frames.push(next(&mut ws, &mut events).await);
    }
    send(&mut ws, json!({"id": "end", "method": "session.list"})).await;
    frames.extend(answers_until(&mut ws, "end").await);
    let for_x: Vec<&Frame> = frames.iter().filter(|f| f.id() == Some("x")).collect();
    assert_eq!(for_x.len(), 2, "{frames:?}");
    assert_eq!(error_code(for_x[0]), "cancelled");
    assert_eq!(result(for_x[1].clone())["waited_ms"], 1);
    let cancel = frames.iter().find(|f| f.id() == Some("c1")).expect("c1");
    assert_eq!(result(cancel.clone())["cancelled"], true);

    // Many at once, finishing together: each answered once, none lost.
    for n in 0..64 {
        send(&mut ws, wait(&format!("m{n}"), 5)).await;
    }
    let mut seen = std::collections::HashMap::new();
    while seen.len() < 64 {
        let frame = next(&mut ws, &mut events).await;
        let id = frame.id().expect("an id").to_string();
        assert_eq!(result(frame)["waited_ms"], 5);
        *seen.entry(id).or_insert(0) += 1;
    }
    send(&mut ws, json!({"id": "end2", "method": "session.list"})).await;
    let rest = answers_until(&mut ws, "end2").await;
    assert_eq!(rest.len(), 1, "no second answer to any of them: {rest:?}");
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_per_token_are_capped() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_agent_sockets_per_token = 2)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let a = open(&server, &agent.token).await.expect("a");
    let _b = open(&server, &agent.token).await.expect("b");
    match open(&server, &agent.token).await {
        Err(tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status().as_u16(), 503);
            assert_eq!(
                resp.headers().get("retry-after").map(|v| v.as_bytes()),
                Some(&b"5"[..])
            );
        }
        other => panic!("third socket must be refused, got {:?}", other.map(|_| ())),
    }
    let other = server.new_agent().await.expect("other agent");
    open(&server, &other.token)
        .await
        .expect("another token has its own budget");
    drop(a);
    assert!(
        wait_until(DEADLINE, || async {
            open(&server, &agent.token).await.is_ok()
        })
        .await,
        "a closed socket frees its slot"
    );
    match open(&server, "lk_wrong").await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status().as_u16(), 401),
        other => panic!("expected 401, got {:?}", other.map(|_| ())),
    }
    server.stop().await;
}
