//! `latchkey admin webhooks` against the real server and a local receiver
//! (docs/webhooks.md): add (the secret printed once), list, the delivery log,
//! a redelivery, remove; ids by unique prefix.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::latchkey;
use latchkey_protocol::api::Role;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::receiver::Receiver;
use latchkey_testkit::{Backend, TestServer, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_adds_watches_and_removes_a_webhook() {
    let server = TestServer::builder(Backend::Sqlite)
        .config(|c| {
            c.webhooks.allow_private_destinations = true;
            c.webhooks.poll_interval_ms = 20;
        })
        .start()
        .await
        .expect("server");
    let receiver = Receiver::start().await.expect("receiver");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];

    let events = latchkey(cfg, &env, &["admin", "webhooks", "events"]).await;
    assert!(
        events.stdout.lines().any(|l| l == "device.revoke"),
        "{}",
        events.stdout
    );
    let added = latchkey(
        cfg,
        &env,
        &[
            "admin",
            "webhooks",
            "add",
            &receiver.url,
            "--events",
            "token.create,token.revoke",
            "--description",
            "ops",
        ],
    )
    .await;
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(added.stdout.contains("whsec_"), "{}", added.stdout);
    let id = added
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("the id")
        .to_string();
    let list = latchkey(cfg, &env, &["admin", "webhooks", "list"]).await;
    assert!(
        list.stdout.contains("active") && !list.stdout.contains("whsec_"),
        "{}",
        list.stdout
    );

    server
        .admin()
        .create_token("watched", Role::Agent)
        .await
        .expect("token");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            receiver.received().len() == 1
        })
        .await
    );
    let prefix = &id[..7];
    let log = latchkey(cfg, &env, &["admin", "webhooks", "deliveries", prefix]).await;
    assert!(
        log.stdout.contains("token.create") && log.stdout.contains("delivered"),
        "{}",
        log.stdout
    );
    let seq = log
        .stdout
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("a seq")
        .to_string();
    let again = latchkey(cfg, &env, &["admin", "webhooks", "redeliver", prefix, &seq]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.contains("manual"), "{}", again.stdout);
    assert_eq!(receiver.received().len(), 2);

    let bad = latchkey(
        cfg,
        &env,
        &[
            "admin",
            "webhooks",
            "add",
            "https://127.0.0.1/x",
            "--events",
            "nope",
        ],
    )
    .await;
    assert_eq!(bad.code, i32::from(exit::INVALID), "{}", bad.stderr);
    let removed = latchkey(cfg, &env, &["admin", "webhooks", "remove", prefix]).await;
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    let list = latchkey(cfg, &env, &["admin", "webhooks", "list"]).await;
    assert!(list.stdout.contains("no webhooks yet"), "{}", list.stdout);
    server.stop().await;
}
