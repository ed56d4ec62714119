//! `latchkey admin members …` and `latchkey me …` against the real server: a member
//! added, a link made for them, their own token, and what they see and revoke with
//! it; human and `--json` output.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::latchkey;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, FakeExtension, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_and_their_own_browsers() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let admin = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];

    let args = [
        "--json",
        "admin",
        "members",
        "add",
        "--name",
        "Alice",
        "--email",
        "Alice@Example.com",
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let alice = r.json()["id"].as_str().expect("id").to_string();
    assert_eq!(r.json()["email"], "alice@example.com");
    let r = latchkey(cfg, &admin, &["admin", "members", "list"]).await;
    assert!(
        r.stdout.contains("alice@example.com") && r.stdout.contains(&alice[..12]),
        "{}",
        r.stdout
    );
    let r = latchkey(
        cfg,
        &admin,
        &["admin", "members", "add", "--name", "A", "--email", "nope"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::INVALID), "{}", r.stderr);

    // Her role, by a prefix of her id; a role that is not one is refused.
    let r = latchkey(
        cfg,
        &admin,
        &["admin", "members", "set-role", &alice[..12], "admin"],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("is now admin"), "{}", r.stdout);
    let r = latchkey(
        cfg,
        &admin,
        &["--json", "admin", "members", "set-role", &alice, "member"],
    )
    .await;
    assert_eq!(r.json()["role"], "member");
    let r = latchkey(
        cfg,
        &admin,
        &["admin", "members", "set-role", &alice, "king"],
    )
    .await;
    assert_eq!(r.code, 2, "a usage error: {}", r.stderr);

    // Her own token, and a browser of hers paired with it.
    let args = [
        "--json", "admin", "tokens", "create", "--name", "alice", "--role", "member", "--member",
        &alice,
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let own = r.json()["token"].as_str().expect("token").to_string();
    let me = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", own.as_str()),
    ];
    let r = latchkey(cfg, &me, &["me", "show"]).await;
    assert!(
        r.stdout.contains("Alice <alice@example.com>"),
        "{}",
        r.stdout
    );
    let r = latchkey(cfg, &me, &["--json", "me", "pair", "--label", "laptop"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let link = r.json()["link"].as_str().expect("link").to_string();
    let mut ext = FakeExtension::from_link(&link, server.http.clone(), None).expect("link");
    let device = ext.pair().await.expect("pair").device_id;
    let mut socket = ext.connect_online().await.expect("online");

    // The admin's list shows whose it is; hers shows only hers.
    let r = latchkey(cfg, &admin, &["admin", "devices"]).await;
    assert!(
        r.stdout.contains("Alice <alice@example.com>"),
        "{}",
        r.stdout
    );
    let r = latchkey(cfg, &me, &["--json", "me", "devices"]).await;
    assert_eq!(r.json()["devices"][0]["id"], device.as_str());
    let r = latchkey(cfg, &me, &["--json", "admin", "devices"]).await;
    assert_eq!(r.code, i32::from(exit::AUTH));
    assert_eq!(r.json()["error"]["code"], "permission_denied");

    let r = latchkey(cfg, &me, &["me", "revoke", &device]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        socket.ended(Duration::from_secs(10)).await.expect("end"),
        Ended::Closed(4001)
    );

    // Removing her ends her token too.
    let r = latchkey(
        cfg,
        &admin,
        &["--json", "admin", "members", "remove", &alice],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["revoked_tokens"].as_array().expect("tokens").len(),
        1
    );
    let r = latchkey(cfg, &me, &["--json", "me", "show"]).await;
    assert_eq!(r.code, i32::from(exit::AUTH));
    assert!(!r.stdout.contains(&own) && !r.stderr.contains(&own));
    server.stop().await;
}

/// `latchkey me sessions` and `latchkey me end`: the person sees the agent
/// sessions on their browsers by label, and ends one by a prefix of its id; the
/// agent is told `user_stopped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_ends_an_agents_session_on_their_browser() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let admin = server.admin();
    let (alice, _bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (ext, device) = server.paired_for(&alice.id).await.expect("paired");
    let _browser = latchkey_testkit::FakeBrowser::serve(
        ext.connect_online().await.expect("online"),
        std::sync::Arc::new(|_| None),
    );
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(Some(&device)).await.expect("session").id;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.http_base();
    let own = admin.member_token(&alice.id).await.expect("token");
    let me = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", own.as_str()),
    ];
    let label = admin.device(&device).await.expect("device").label;

    let r = latchkey(dir.path(), &me, &["me", "sessions"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&session[..8]) && r.stdout.contains(&label),
        "{}",
        r.stdout
    );
    let r = latchkey(dir.path(), &me, &["--json", "me", "sessions"]).await;
    assert_eq!(r.json()["sessions"][0]["id"], session.as_str());

    let r = latchkey(dir.path(), &me, &["me", "end", &session[..8]]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("told user_stopped"), "{}", r.stdout);
    let after = agent
        .call(&session, "tool.snapshot", serde_json::json!({}))
        .await
        .expect("call");
    assert_eq!(after.body["error"]["data"]["reason"], "user_stopped");
    let r = latchkey(dir.path(), &me, &["--json", "me", "end", &session]).await;
    assert_eq!(r.code, i32::from(exit::NOT_FOUND), "{}", r.stdout);
    assert_eq!(r.json()["error"]["code"], "not_found");

    // Her browser's trail, and the ended session's own rows by its whole id.
    let r = latchkey(dir.path(), &me, &["me", "audit"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("session.start") && r.stdout.contains("device.pair"),
        "{}",
        r.stdout
    );
    let r = latchkey(dir.path(), &me, &["--json", "me", "audit", &session]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed = r.json();
    let actions: Vec<&str> = listed["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"session.end") && actions.contains(&"session.start"),
        "{actions:?}"
    );
    server.stop().await;
}
