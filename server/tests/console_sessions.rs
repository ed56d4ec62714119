//! The console's Sessions page on the real server, both backends
//! (docs/console.md, "Sessions"): the team's open sessions for an admin, with the
//! agent, the browser and its owner, live; those on their own browsers for a
//! member and no one else's. Ending one takes the CSRF token: an admin's End is
//! `stopped_by_admin` to the agent, the browser's owner's is `user_stopped`, and
//! anyone else's answers as for an unknown session.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use latchkey_protocol::agent::StartSessionRequest;
use latchkey_testkit::{Action, Backend, EventStream, FakeBrowser, TestServer, backend_tests};
use serde_json::json;

/// Read the live list until its HTML satisfies `wanted`.
async fn list_until(live: &mut EventStream, wanted: impl Fn(&str) -> bool) {
    loop {
        let (_, data) = live.next_event().await.expect("the list in time");
        if wanted(data["html"].as_str().expect("html")) {
            return;
        }
    }
}

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
        (after.code(), after.reason()),
        ("session_ended", "user_stopped"),
        "{}",
        after.body
    );
    server.stop().await;
}

backend_tests!(
    sessions_are_listed_live_for_whom_they_concern_and_an_admin_ends_them,
    sessions_are_listed_live_for_whom_they_concern_and_an_admin_ends_them
);

/// The list says why the agent wanted the browser, and when it has handed the
/// page to the person and waits for their help: redrawn live as the help
/// request begins and as it ends.
async fn the_list_shows_the_purpose_and_a_help_request_live(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, _bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (ext, device) = server.paired_for(&alice.id).await.expect("paired");
    let release = Arc::new(tokio::sync::Notify::new());
    let script: latchkey_testkit::Script = {
        let release = release.clone();
        Arc::new(move |r| {
            (r.method == "tool.request_help").then(|| {
                let done = Action::Reply(json!({"outcome": "done", "tab_id": 3}));
                Action::WaitFor(release.clone(), Box::new(done))
            })
        })
    };
    let _browser = FakeBrowser::serve(ext.connect_online().await.expect("online"), script);
    let agent = server.new_agent().await.expect("agent");
    let started = agent
        .start_raw(&StartSessionRequest {
            browser_id: Some(device),
            purpose: Some("Book the 9:40 train to Leeds".into()),
            ..StartSessionRequest::default()
        })
        .await
        .expect("start");
    assert_eq!(started.status, 201, "{}", started.body);
    let session = started.body["id"].as_str().expect("id").to_owned();
    assert_eq!(
        agent.sessions().await.expect("list").sessions[0]
            .purpose
            .as_deref(),
        Some("Book the 9:40 train to Leeds")
    );

    let as_alice = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("t"))
        .await
        .expect("sign in");
    let page = as_alice.get("/console/sessions").await.expect("page");
    assert!(
        page.body.contains("Book the 9:40 train to Leeds"),
        "{}",
        page.body
    );
    let mut live = as_alice
        .stream("/console/sessions/live")
        .await
        .expect("stream");
    list_until(&mut live, |html| {
        html.contains(&session) && html.contains("Idle")
    })
    .await;

    let asking = {
        let agent = agent.clone();
        let session = session.clone();
        tokio::spawn(async move {
            agent
                .call(
                    &session,
                    "tool.request_help",
                    json!({"prompt": "Solve the puzzle"}),
                )
                .await
        })
    };
    list_until(&mut live, |html| html.contains("Waiting for the person")).await;
    assert!(
        agent.sessions().await.expect("list").sessions[0].asking_for_help,
        "the agent API says so too"
    );
    release.notify_one();
    let answer = asking.await.expect("task").expect("call");
    assert!(answer.is_ok(), "{}", answer.body);
    list_until(&mut live, |html| {
        html.contains(&session) && !html.contains("Waiting for the person")
    })
    .await;
    assert!(!agent.sessions().await.expect("list").sessions[0].asking_for_help);
    server.stop().await;
}

backend_tests!(
    the_list_shows_the_purpose_and_a_help_request_live,
    the_list_shows_the_purpose_and_a_help_request_live
);
