//! The console's Sessions page on the real server, both backends
//! (docs/console.md, "Sessions"): the team's open sessions for an admin, with the
//! agent, the browser and its owner, live; those on their own browsers for a
//! member and no one else's. Ending one takes the CSRF token: an admin's End is
//! `stopped_by_admin` to the agent, the browser's owner's is `user_stopped`, and
//! anyone else's answers as for an unknown session.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use latchkey_testkit::{Backend, FakeBrowser, TestServer, backend_tests};
use serde_json::json;

async fn sessions_are_listed_live_for_whom_they_concern_and_an_admin_ends_them(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (ext, device) = server.paired_for(&alice.id).await.expect("paired");
    let _browser = FakeBrowser::serve(
        ext.connect_online().await.expect("online"),
        Arc::new(|_| None),
    );

    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("sign in");
    let mut live = web.stream("/console/sessions/live").await.expect("stream");
    let (name, first) = live.next_event().await.expect("the list as it is");
    assert_eq!(name, "list");
    assert!(
        first["html"]
            .as_str()
            .expect("html")
            .contains("No agent is using a browser now")
    );

    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(Some(&device)).await.expect("session").id;
    let marker = format!(r#"data-session="{session}""#);
    loop {
        let (_, data) = live.next_event().await.expect("the session appears");
        if data["html"].as_str().expect("html").contains(&marker) {
            break;
        }
    }
    let page = web.get("/console/sessions").await.expect("page");
    assert!(page.body.contains(&marker), "{}", page.body);
    assert!(page.body.contains("agent-"), "the agent's token name");
    assert!(page.body.contains("Alice &#60;alice@example.com&#62;"));
    assert!(page.body.contains("Idle"));
    let csrf = page.csrf().expect("csrf");

    // Alice sees the session on her browser, with End; Bob sees nothing, and his
    // End of it answers as for an unknown session.
    let as_alice = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("t"))
        .await
        .expect("sign in");
    let hers = as_alice.get("/console/sessions").await.expect("page");
    assert!(hers.body.contains(&marker));
    let end = format!("/console/sessions/{session}/end");
    assert!(hers.body.contains(&end), "End for the browser's owner");
    let as_bob = server
        .console_signed_in(&admin.member_token(&bob.id).await.expect("t"))
        .await
        .expect("sign in");
    let his = as_bob.get("/console/sessions").await.expect("page");
    assert!(!his.body.contains(&marker));
    assert!(his.body.contains("No agent is using a browser now"));
    let refused = as_bob
        .post(&end, &[("csrf", &his.csrf().expect("csrf"))])
        .await
        .expect("answer");
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert!(refused.body.contains("not_found"), "{}", refused.body);

    // A wrong CSRF token changes nothing; the right one ends it.
    assert_eq!(
        web.post(&end, &[("csrf", &"0".repeat(64))])
            .await
            .expect("answer")
            .status,
        403
    );
    assert!(
        agent
            .call(&session, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    let done = web.post(&end, &[("csrf", &csrf)]).await.expect("end");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/sessions"))
    );
    let after = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        after.body["error"]["code"], "session_ended",
        "{}",
        after.body
    );
    assert_eq!(after.body["error"]["data"]["reason"], "stopped_by_admin");
    loop {
        let (_, data) = live.next_event().await.expect("the session goes");
        if !data["html"].as_str().expect("html").contains(&marker) {
            break;
        }
    }

    // The browser's owner ends the next one: the agent hears the person stopped it.
    let next = agent.start(Some(&device)).await.expect("session").id;
    let page = as_alice.get("/console/sessions").await.expect("page");
    let end = format!("/console/sessions/{next}/end");
    assert!(page.body.contains(&end), "{}", page.body);
    let done = as_alice
        .post(&end, &[("csrf", &page.csrf().expect("csrf"))])
        .await
        .expect("end");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/sessions"))
    );
    let after = agent
        .call(&next, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (
            &after.body["error"]["code"],
            &after.body["error"]["data"]["reason"]
        ),
        (&json!("session_ended"), &json!("user_stopped")),
        "{}",
        after.body
    );
    server.stop().await;
}

backend_tests!(
    sessions_are_listed_live_for_whom_they_concern_and_an_admin_ends_them,
    sessions_are_listed_live_for_whom_they_concern_and_an_admin_ends_them
);
