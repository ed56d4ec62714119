//! `latchkey admin sessions` and `latchkey admin pairings` against the real server,
//! and the human output rules they share with every listing (docs/cli.md, "Output"
//! and "Ids"): times relative to now (exact in `--json`), ids by their shortest
//! unique prefix and taken back by any unique prefix, tables within 100 columns.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::latchkey;
use latchkey_protocol::error_code::exit;
use latchkey_server::store::ApiTokenRecord;
use latchkey_testkit::{Backend, TestServer};

/// Every line of a human listing fits 100 columns.
fn fits(stdout: &str) {
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_sees_and_ends_what_runs_and_what_is_outstanding() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member(
            "Alice Example-With-A-Rather-Long-Name",
            "alice.with.a.long.address@example.com",
        )
        .await
        .expect("alice");
    let (device, _browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(Some(&device)).await.expect("session");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];

    // The team's sessions: which browser (by label), which agent, how long.
    let r = latchkey(cfg, &env, &["admin", "sessions"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    fits(&r.stdout);
    let header = r.stdout.lines().next().expect("a header");
    for column in ["ID", "BROWSER", "AGENT", "STATE", "STARTED", "LAST ACTION"] {
        assert!(header.contains(column), "{header}");
    }
    let row = r.stdout.lines().nth(1).expect("a row");
    let agent_name = agent_name(&server).await;
    assert!(row.starts_with(&session.id[..8]), "{row}");
    assert!(!row.contains(&session.id), "ids are shortened: {row}");
    assert!(row.contains("Chrome") && row.contains(&agent_name), "{row}");
    assert!(row.contains("idle") && row.contains("just now"), "{row}");
    let r = latchkey(cfg, &env, &["--json", "admin", "sessions", "list"]).await;
    let listed = r.json();
    assert_eq!(listed["sessions"][0]["id"], session.id.as_str());
    assert_eq!(
        listed["sessions"][0]["agent"],
        format!("token:{agent_name}")
    );
    assert!(
        listed["sessions"][0]["created_at"]
            .as_str()
            .expect("time")
            .ends_with('Z')
    );

    // Stopped by a prefix: the agent learns why.
    let r = latchkey(cfg, &env, &["admin", "sessions", "stop", &session.id[..6]]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("stopped"), "{}", r.stdout);
    let after = agent
        .call(&session.id, "tool.tab_list", serde_json::json!({}))
        .await
        .expect("an answer");
    assert_eq!(
        after.body["error"]["data"]["reason"], "stopped_by_admin",
        "{}",
        after.body
    );
    let r = latchkey(cfg, &env, &["admin", "sessions"]).await;
    assert!(r.stdout.contains("no sessions"), "{}", r.stdout);

    // Pending links: whose, made by whom, when they expire; never a secret.
    let mut links = Vec::new();
    for _ in 0..3 {
        links.push(admin.create_pairing_for(&alice.id).await.expect("link"));
    }
    let r = latchkey(cfg, &env, &["admin", "pairings"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    fits(&r.stdout);
    assert_eq!(r.stdout.lines().count(), 4, "{}", r.stdout);
    assert!(r.stdout.contains("in 4 min"), "{}", r.stdout);
    assert!(r.stdout.contains("Alice Example"), "{}", r.stdout);
    for link in &links {
        let secret = link.link.rsplit('#').next().expect("fragment");
        assert!(!r.stdout.contains(secret));
    }
    // Void one by a prefix; one that several links start with is refused, naming them.
    let r = latchkey(
        cfg,
        &env,
        &["admin", "pairings", "void", &links[0].id[..12]],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("voided"), "{}", r.stdout);
    let r = latchkey(cfg, &env, &["--json", "admin", "pairings"]).await;
    let left: Vec<String> = r.json()["pairings"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&links[0].id), "{left:?}");
    let r = latchkey(cfg, &env, &["admin", "pairings", "void", "pair_"]).await;
    assert_ne!(r.code, 0, "an empty prefix names nothing: {}", r.stdout);
    let r = latchkey(
        cfg,
        &env,
        &["--json", "admin", "pairings", "void", "pair_0"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::USAGE), "{}", r.stdout);
    assert!(r.stdout.contains("too short"), "{}", r.stdout);
    let r = latchkey(cfg, &env, &["--json", "admin", "pairings", "void", "ffff"]).await;
    assert!(
        r.json()["error"]["code"] == "not_found" || r.json()["error"]["code"] == "ambiguous_id",
        "{}",
        r.stdout
    );
    let r = latchkey(
        cfg,
        &env,
        &["--json", "admin", "pairings", "void", &links[0].id],
    )
    .await;
    assert_eq!(
        r.json()["error"]["code"],
        "not_found",
        "a voided link is gone"
    );

    // Every listing fits, with times people read.
    let r = latchkey(cfg, &env, &["admin", "devices"]).await;
    fits(&r.stdout);
    assert!(
        r.stdout.contains("in 89 days") && r.stdout.contains("just now"),
        "{}",
        r.stdout
    );
    for args in [
        &["admin", "tokens", "list"][..],
        &["admin", "members", "list"],
        &["admin", "audit"],
        &["browsers"],
    ] {
        let r = latchkey(cfg, &env, args).await;
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        fits(&r.stdout);
        assert!(
            r.stdout.contains(" ago") || r.stdout.contains("just now"),
            "{args:?}: {}",
            r.stdout
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_that_names_several_ids_is_refused_with_them() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    // Two tokens whose ids share their first six digits: written to the store
    // directly, since random ids would not.
    let store = &server.state().store;
    let tenant = server.default_tenant_id().await.expect("default tenant");
    for (id, hash) in [("tok_abcdef0000000001", "a"), ("tok_abcdef0000000002", "b")] {
        store
            .insert_api_token(&ApiTokenRecord {
                id: id.into(),
                tenant_id: tenant.clone(),
                name: id.into(),
                role: "agent".into(),
                token_hash: hash.repeat(64),
                created_at: server.clock().now_ms(),
                expires_at: None,
                revoked_at: None,
                last_used_at: None,
                member_id: None,
            })
            .await
            .expect("insert");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.http_base();
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];
    // The table tells them apart with one digit more than they share.
    let r = latchkey(dir.path(), &env, &["admin", "tokens", "list"]).await;
    assert!(
        r.stdout.contains("tok_abcdef0000000001") && r.stdout.contains("tok_abcdef0000000002"),
        "{}",
        r.stdout
    );
    for given in ["abcdef", "tok_abcd"] {
        let r = latchkey(
            dir.path(),
            &env,
            &["--json", "admin", "tokens", "revoke", given],
        )
        .await;
        assert_eq!(r.code, i32::from(exit::USAGE), "{}", r.stdout);
        let error = &r.json()["error"];
        assert_eq!(error["code"], "ambiguous_id");
        let message = error["message"].as_str().expect("message");
        assert!(
            message.contains("tok_abcdef0000000001") && message.contains("tok_abcdef0000000002"),
            "{message}"
        );
    }
    // Neither was touched; one more digit names one.
    let r = latchkey(
        dir.path(),
        &env,
        &["--json", "admin", "tokens", "revoke", "abcdef0000000002"],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["id"], "tok_abcdef0000000002");
    let r = latchkey(dir.path(), &env, &["--json", "admin", "tokens", "list"]).await;
    let listed = r.json();
    let revoked: Vec<&str> = listed["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter(|t| t["revoked_at"].is_string())
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(revoked, ["tok_abcdef0000000002"]);
    server.stop().await;
}

/// The name the testkit gave the agent's token, as the team's token list shows it.
async fn agent_name(server: &TestServer) -> String {
    let list = server
        .admin()
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/tokens",
            None,
        )
        .await
        .expect("tokens")
        .1;
    list["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| n.starts_with("agent-"))
        .expect("the agent's token")
        .to_string()
}
