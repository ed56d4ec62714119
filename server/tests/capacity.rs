//! Capacity limits: online devices per node (503 + `Retry-After: 5`, a device at
//! capacity may still replace its own connection and renew), the race between the
//! upgrade and the handshake (1013), and agent sockets per node.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::{CloseCode, Frame, RequestFrame, methods};
use latchkey_testkit::extension::{Ended, ExtensionSocket, FakeExtension, handshake_params};
use latchkey_testkit::tokio_tungstenite::tungstenite;
use latchkey_testkit::tokio_tungstenite::tungstenite::client::IntoClientRequest;
use latchkey_testkit::tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};
use latchkey_testkit::{Backend, TestServer, wait_until};
use tokio::net::TcpStream;

async fn paired(server: &TestServer, n: usize) -> Vec<FakeExtension> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut ext = server.new_extension().await.expect("extension");
        ext.pair().await.expect("pair");
        out.push(ext);
    }
    out
}

fn assert_at_capacity(
    case: &str,
    answer: Result<ExtensionSocket, latchkey_testkit::extension::HttpAnswer>,
) {
    let refusal = match answer {
        Ok(_) => panic!("{case}: upgraded past capacity"),
        Err(a) => a,
    };
    assert_eq!(refusal.status, 503, "{case}: {}", refusal.body);
    assert_eq!(
        refusal.json(),
        serde_json::json!({"error": "connection_capacity_reached"}),
        "{case}"
    );
    assert_eq!(
        refusal
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5"),
        "{case}"
    );
}

async fn capacity(cap: usize) {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.max_online_devices = cap;
            l.authorize_per_minute = 1000;
        })
        .start()
        .await
        .expect("server");
    let mut exts = paired(&server, cap + 1).await;
    let mut sockets = Vec::new();
    for ext in &exts[..cap] {
        sockets.push(ext.connect_online().await.expect("online below capacity"));
    }
    assert_eq!(server.state().registry.slots_taken(), cap);

    // A new device is refused, exactly, and nothing about it changes.
    let newcomer = exts[cap].clone();
    let newcomer_id = newcomer.device_id.clone().expect("id");
    assert_at_capacity(
        &format!("cap {cap}"),
        newcomer.connect().await.expect("answer"),
    );
    assert!(server.state().registry.status(&newcomer_id).is_none());
    assert_eq!(server.state().registry.slots_taken(), cap);

    // A device already online replaces its own connection and renews at capacity.
    let mut old = sockets.remove(0);
    let replacement = exts[0]
        .connect_online()
        .await
        .expect("replacement at capacity");
    assert_eq!(
        old.ended(Duration::from_secs(10)).await.expect("old ends"),
        Ended::Closed(CloseCode::Replaced.code())
    );
    exts[0].renew().await.expect("renewal at capacity");
    assert_eq!(server.state().registry.slots_taken(), cap);

    // A freed slot admits the newcomer.
    drop(replacement);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            server.state().registry.slots_taken() < cap
        })
        .await,
        "slot freed after the device left"
    );
    let _socket = newcomer
        .connect_online()
        .await
        .expect("admitted after a slot freed");
    assert_eq!(server.state().registry.slots_taken(), cap);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_one() {
    capacity(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_sixty_four() {
    capacity(64).await;
}

/// An upgraded socket that has not handshaken holds no slot; if the node fills
/// before it handshakes, it is closed with 1013 and may retry later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slot_is_taken_at_the_handshake() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_online_devices = 1)
        .start()
        .await
        .expect("server");
    let exts = paired(&server, 2).await;
    let mut waiting = exts[0]
        .connect()
        .await
        .expect("answer")
        .expect("upgrade below capacity");
    assert_eq!(server.state().registry.slots_taken(), 0);
    let _online = exts[1]
        .connect_online()
        .await
        .expect("second device online");
    let handshake = RequestFrame::new(
        "hs-capacity",
        methods::SYSTEM_HANDSHAKE,
        Some(serde_json::to_value(handshake_params()).expect("params")),
    );
    waiting
        .send_frame(&Frame::Request(handshake))
        .await
        .expect("send handshake");
    assert_eq!(
        waiting.ended(Duration::from_secs(10)).await.expect("ends"),
        Ended::Closed(CloseCode::TryAgainLater.code())
    );
    assert_eq!(server.state().registry.slots_taken(), 1);
    server.stop().await;
}

/// Open an agent WebSocket: the socket, or the refusal's status, Retry-After and body.
async fn agent_socket(
    server: &TestServer,
    token: &str,
) -> Result<WebSocketStream<MaybeTlsStream<TcpStream>>, (u16, Option<String>, String)> {
    let mut request = format!("ws://{}/v1/agent", server.addr())
        .into_client_request()
        .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    match connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(r)) => Err((
            r.status().as_u16(),
            r.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).into_owned(),
        )),
        Err(e) => panic!("agent socket: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_sockets_per_node() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_agent_sockets = 2)
        .start()
        .await
        .expect("server");
    let a = server.new_agent().await.expect("agent a");
    let b = server.new_agent().await.expect("agent b");
    let one = agent_socket(&server, &a.token).await.expect("socket 1");
    let _two = agent_socket(&server, &b.token).await.expect("socket 2");
    let Err((status, retry_after, body)) = agent_socket(&server, &a.token).await else {
        panic!("a third socket on a node capped at two");
    };
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("5"));
    let body: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(body["error"]["code"], "capacity_reached");
    drop(one);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            agent_socket(&server, &b.token).await.is_ok()
        })
        .await,
        "a closed socket frees its place"
    );
    server.stop().await;
}
