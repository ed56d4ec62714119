//! `latchkey token delegate|delegations|revoke` against the real server
//! (docs/delegation.md): an agent mints a read-only delegation for one browser,
//! a sub-agent uses it as its token (a session starts; a script is refused),
//! and revoking it ends it.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::latchkey;
use latchkey_protocol::api::Role;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::{Backend, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_delegates_a_narrower_token() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let (device, browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let token = server
        .admin()
        .create_token("main", Role::Agent)
        .await
        .expect("token");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let agent = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", token.token.as_str()),
    ];

    let args = [
        "--json",
        "token",
        "delegate",
        "--ttl",
        "15m",
        "--browser",
        &device,
        "--cap",
        "read,navigate",
        "--site",
        "*.shop.test",
        "--name",
        "researcher",
    ];
    let r = latchkey(cfg, &agent, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let minted = r.json();
    let id = minted["id"].as_str().expect("id").to_string();
    let jwt = minted["token"].as_str().expect("token").to_string();
    assert_eq!(
        minted["scope"]["capabilities"],
        serde_json::json!(["read", "navigate"])
    );

    let sub = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", jwt.as_str()),
    ];
    let r = latchkey(cfg, &sub, &["session", "start"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let session = r.stdout.trim().to_string();
    let r = latchkey(cfg, &sub, &["--session", &session, "evaluate", "1"]).await;
    assert_eq!(r.code, i32::from(exit::AUTH), "{}", r.stderr);
    assert!(r.stderr.contains("script"), "{}", r.stderr);
    assert_eq!(browser.count("tool.evaluate"), 0);

    let r = latchkey(cfg, &agent, &["token", "delegations"]).await;
    assert!(
        r.stdout.contains(&id[..12]) && r.stdout.contains("researcher"),
        "{}",
        r.stdout
    );
    // A unique prefix names it.
    let r = latchkey(cfg, &agent, &["token", "revoke", &id[..9]]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = latchkey(cfg, &sub, &["session", "list"]).await;
    assert_eq!(r.code, i32::from(exit::AUTH), "{}", r.stderr);
    assert!(r.stderr.contains("unauthorized"), "{}", r.stderr);
}
