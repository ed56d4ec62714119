//! Frame contents never reach a log, at any level (docs/security.md, "What is
//! logged"). With `LATCHKEY_LOG=trace` an outside review found a `tool.fill`
//! password and `evaluate` expressions in the WebSocket library's trace lines. The
//! real binary at trace level relays a fill whose value is a secret, over the agent
//! socket and over HTTP, and the secret appears nowhere in its log, neither as text
//! nor as the hex the library prints frames in.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;

use latchkey_protocol::api::Role;
use latchkey_testkit::agent_socket::result_of;
use latchkey_testkit::{AgentSocket, Daemon, FakeAgent, FakeBrowser, FakeExtension};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_fill_value_is_not_logged_at_trace_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("latchkeyd.log");
    let mut command =
        Daemon::serve_command(Path::new(env!("CARGO_BIN_EXE_latchkeyd")), dir.path(), "")
            .expect("command");
    command.env("LATCHKEY_LOG", "trace");
    let daemon = Daemon::spawn(
        command,
        std::fs::File::create(&log).expect("log file").into(),
    )
    .await
    .expect("latchkeyd");
    let http = latchkey_testkit::http_client();
    let admin = daemon.admin(&http).expect("admin");
    let pairing = admin.create_pairing(None, None).await.expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("extension");
    ext.pair().await.expect("pair");
    let _browser = FakeBrowser::serve_default(ext.connect_online().await.expect("online"));
    let token = admin
        .create_token("filler", Role::Agent)
        .await
        .expect("token")
        .token;

    let secret = format!("hunter2-{}", rand_suffix());
    let mut socket = AgentSocket::connect(&daemon.http_base(), &token, None)
        .await
        .expect("socket");
    let session = socket.start_session("s").await.expect("session");
    let filled = socket
        .call(
            "f",
            "tool.fill",
            json!({"session_id": session, "ref": "e1", "value": secret}),
        )
        .await
        .expect("fill");
    // The fake browser echoes the params: the secret went all the way there and back.
    assert_eq!(result_of(&filled)["echo"]["value"], secret.as_str());
    let agent = FakeAgent::new(http.clone(), daemon.http_base(), token);
    let over_http = agent
        .call(&session, "tool.fill", json!({"ref": "e2", "value": secret}))
        .await
        .expect("fill over HTTP");
    assert!(over_http.is_ok(), "{}", over_http.body);

    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("DEBUG") && text.contains("request done"),
        "the daemon was not logging below info"
    );
    let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        !text.contains(&secret),
        "the fill value reached the log as text"
    );
    assert!(
        !text.contains(&hex),
        "the fill value reached the log as hex"
    );
}

fn rand_suffix() -> String {
    format!(
        "{:016x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}
