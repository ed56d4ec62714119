//! `/v1/me/sessions` on the real server, both backends (docs/people.md, "Your
//! own browsers"): a person lists the agent sessions on their own browsers and
//! ends one, which the agent hears as the person's Stop (`user_stopped`);
//! another person's session answers exactly as an unknown one; agent tokens have
//! no such list.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

async fn a_person_lists_and_ends_the_sessions_on_their_own_browsers(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (browsers, devices) = server
        .online_browsers_for(&[&alice.id, &bob.id])
        .await
        .expect("browsers");
    let agent = server.new_agent().await.expect("agent");
    let hers = agent.start(Some(&devices[0])).await.expect("session").id;
    let his = agent.start(Some(&devices[1])).await.expect("session").id;
    let as_alice = server.admin_with(&admin.member_token(&alice.id).await.expect("token"));
    let as_bob = server.admin_with(&admin.member_token(&bob.id).await.expect("token"));

    let (status, list) = as_alice
        .raw(Method::GET, "/v1/me/sessions", None)
        .await
        .expect("list");
    assert_eq!(status, 200, "{list}");
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, [hers.as_str()], "hers only: {list}");
    assert_eq!(list["sessions"][0]["browser_id"], json!(devices[0]));

    // Bob ends nothing of hers: answered as an unknown session.
    let (status, refused) = as_bob
        .raw(Method::DELETE, &format!("/v1/me/sessions/{hers}"), None)
        .await
        .expect("answer");
    let (_, unknown) = as_bob
        .raw(
            Method::DELETE,
            "/v1/me/sessions/0123456789abcdef0123456789abcdef",
            None,
        )
        .await
        .expect("answer");
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused["error"]["code"], unknown["error"]["code"]);
    assert_eq!(browsers[0].count("tool.session_stop"), 0);
    assert!(
        agent
            .call(&hers, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );

    // Alice ends hers: the agent hears the person stopped it; his goes on.
    let (status, ended) = as_alice
        .raw(Method::DELETE, &format!("/v1/me/sessions/{hers}"), None)
        .await
        .expect("end");
    assert_eq!((status, &ended["stopped"]), (200, &json!(true)), "{ended}");
    assert_eq!(browsers[0].count("tool.session_stop"), 1);
    let after = agent
        .call(&hers, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (after.code(), after.reason()),
        ("session_ended", "user_stopped"),
        "{}",
        after.body
    );
    assert!(
        agent
            .call(&his, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    let (status, _) = as_alice
        .raw(Method::DELETE, &format!("/v1/me/sessions/{hers}"), None)
        .await
        .expect("again");
    assert_eq!(status, 404);

    // An agent token is no one's: it has no sessions of its own browsers.
    let (status, _) = server
        .admin_with(&agent.token)
        .raw(Method::GET, "/v1/me/sessions", None)
        .await
        .expect("answer");
    assert_eq!(status, 403);
    server.stop().await;
}

backend_tests!(
    a_person_lists_and_ends_the_sessions_on_their_own_browsers,
    a_person_lists_and_ends_the_sessions_on_their_own_browsers
);
