//! The console's Members page on the real server, both backends
//! (docs/console.md, "Members"): an admin adds a member (bad or duplicate emails
//! refused, nothing added), and removes one after a confirmation that counts
//! their browsers: the browser disconnects, and their console sign-in ends, at
//! once. Members have no such page.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, TestServer, backend_tests};

async fn an_admin_adds_and_removes_members(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("sign in");
    let page = web.get("/console/members").await.expect("page");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("No members yet"));
    let csrf = page.csrf().expect("csrf");

    let added = web
        .post(
            "/console/members",
            &[
                ("csrf", &csrf),
                ("name", "Alice"),
                ("email", "Alice%40Example.com"),
                ("role", "member"),
            ],
        )
        .await
        .expect("add");
    assert_eq!(
        (added.status, added.location()),
        (303, Some("/console/members"))
    );
    for (email, code) in [
        ("alice%40example.com", "invalid_request"),
        ("not-an-email", "invalid_params"),
    ] {
        let refused = web
            .post(
                "/console/members",
                &[("csrf", &csrf), ("name", "Again"), ("email", email)],
            )
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{email}: {}", refused.body);
        assert!(refused.body.contains(code), "{}", refused.body);
    }
    let page = web.get("/console/members").await.expect("page");
    assert_eq!(page.body.matches("data-member=").count(), 1);
    assert!(page.body.contains("alice@example.com"), "stored lower case");
    let members = admin
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/members",
            None,
        )
        .await
        .expect("list")
        .1;
    let alice = members["members"][0]["id"].as_str().expect("id").to_owned();

    // Alice, signed in, with a browser online.
    let as_alice = server
        .console_signed_in(&admin.member_token(&alice).await.expect("token"))
        .await
        .expect("sign in");
    assert_eq!(
        as_alice
            .get("/console/members")
            .await
            .expect("answer")
            .status,
        403
    );
    let (ext, _) = server.paired_for(&alice).await.expect("paired");
    let mut socket = ext.connect_online().await.expect("online");

    let confirm = web
        .get(&format!("/console/members/{alice}/remove"))
        .await
        .expect("confirm");
    assert_eq!(confirm.status, 200);
    assert!(confirm.body.contains("Remove Alice?"), "{}", confirm.body);
    assert!(
        confirm.body.contains("their 1 active browser(s)"),
        "{}",
        confirm.body
    );
    let remove = format!("/console/members/{alice}/remove");
    assert_eq!(
        web.post(&remove, &[("csrf", &"0".repeat(64))])
            .await
            .expect("answer")
            .status,
        403
    );
    assert_eq!(
        as_alice.get("/console/devices").await.expect("page").status,
        200
    );
    let done = web.post(&remove, &[("csrf", &csrf)]).await.expect("remove");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/members"))
    );
    assert_eq!(
        socket.ended(Duration::from_secs(10)).await.expect("closed"),
        Ended::Closed(4001)
    );
    let gone = as_alice.get("/console/devices").await.expect("page");
    assert_eq!(
        (gone.status, gone.location()),
        (303, Some("/console/sign-in"))
    );
    assert!(
        web.get("/console/members")
            .await
            .expect("page")
            .body
            .contains("No members yet")
    );
    let again = web
        .get(&format!("/console/members/{alice}/remove"))
        .await
        .expect("answer");
    assert_eq!(again.status, 404);
    server.stop().await;
}

backend_tests!(
    an_admin_adds_and_removes_members,
    an_admin_adds_and_removes_members
);
