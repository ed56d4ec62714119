//! Revoking an API token, or reaching its expiry, ends everything it holds at once,
//! by push (docs/security.md, "API tokens"): its agent sockets close with 4006 /
//! 4007 after each request still open is answered `token_revoked` /
//! `token_expired`, its calls in flight over HTTP get the same code, its event
//! streams end, and its sessions end with that reason (the browser is told to close
//! their Agent Windows). An outside review found all of it still working 30 s after
//! the revocation. Another tenant's revocation of the same id ends nothing.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::Frame;
use latchkey_protocol::api::Role;
use latchkey_testkit::agent_socket::{call_in_flight, code_of, result_of};
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{AgentSocket, Backend, TestServer, backend_tests, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

async fn revoked_while_in_use(backend: Backend, role: Role) {
    let server = TestServer::start(backend).await.expect("server");
    let token = server
        .admin()
        .create_token("worker", role)
        .await
        .expect("token");
    let agent = server.agent(&token.token);
    // The token holds: a socket with a session and a call in flight on it, a
    // session over HTTP with a call in flight, and an event stream.
    let (browser, mut socket, _) = call_in_flight(&server, &token.token)
        .await
        .expect("call in flight");
    let over_http = agent.start(None).await.expect("session").id;
    let mut events = agent.events(&over_http).await.expect("events");
    let in_flight = agent.spawn_call(&over_http, "tool.hang", json!({}));
    assert!(wait_until(DEADLINE, || async { browser.count("tool.hang") == 2 }).await);

    let (status, _) = server
        .admin()
        .revoke_token(&token.view.id)
        .await
        .expect("revoke");
    assert_eq!(status, 200);

    // The socket: the open request answered with the token's code, then 4006.
    let (ended, answers) = socket.ended(DEADLINE).await.expect("socket closed");
    assert_eq!(ended, Ended::Closed(4006));
    let h1: Vec<&Frame> = answers.iter().filter(|f| f.id() == Some("h")).collect();
    assert_eq!(
        h1.len(),
        1,
        "one answer for the call in flight: {answers:?}"
    );
    assert_eq!(code_of(h1[0]), "token_revoked");

    // The call in flight over HTTP.
    let outcome = tokio::time::timeout(DEADLINE, in_flight)
        .await
        .expect("answered in time")
        .expect("task");
    assert_eq!((outcome.status, outcome.code()), (401, "token_revoked"));

    // The event stream says why its session ended, then ends.
    let mut seen = Vec::new();
    while let Some((name, data)) = events.next().await.expect("event in time") {
        seen.push((name, data));
    }
    assert!(
        seen.iter().any(|(name, data)| (name == "session_ended"
            && data["reason"] == "token_revoked")
            || (name == "error" && data["code"] == "token_revoked")),
        "{seen:?}"
    );

    // Both sessions are gone, and the browser was told to close both windows.
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_stop") == 2
        })
        .await
    );
    assert_eq!(
        server.admin().sessions().await.expect("sessions"),
        json!([])
    );
    // And the token opens nothing any more.
    assert_eq!(
        agent
            .browsers()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string().contains("401")),
        Err(true)
    );
    assert!(AgentSocket::open(&server, &token.token).await.is_err());
    server.stop().await;
}

backend_tests!(agent_token_revoked, |b| revoked_while_in_use(
    b,
    Role::Agent
));
backend_tests!(admin_token_revoked, |b| revoked_while_in_use(
    b,
    Role::Admin
));

/// A token with a lifetime ends at its expiry instant, not at its next request:
/// the socket closes with 4007 and its session ends `token_expired`.
async fn expired_while_in_use(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let token = server
        .admin()
        .create_token_with_ttl("short-lived", Role::Agent, Some(3600))
        .await
        .expect("token");
    let (browser, mut socket, _) = call_in_flight(&server, &token.token)
        .await
        .expect("call in flight");

    // An hour passes: the gateway's clock moves to the token's expiry and past it.
    server.clock().advance(Duration::from_secs(3601));
    let (ended, answers) = socket.ended(DEADLINE).await.expect("socket closed");
    assert_eq!(ended, Ended::Closed(4007));
    assert_eq!(
        answers.iter().map(code_of).collect::<Vec<_>>(),
        vec!["token_expired".to_string()]
    );
    // The session ended with the token: the browser was told to close its window,
    // and it is gone from the team's sessions.
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_stop") == 1
        })
        .await
    );
    assert_eq!(
        server.admin().sessions().await.expect("sessions"),
        json!([])
    );
    server.stop().await;
}

backend_tests!(token_expiry, expired_while_in_use);

/// Another tenant's admin revoking the same token id changes nothing and answers
/// exactly as for an unknown id.
async fn a_foreign_revocation_ends_nothing(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_browser, mut socket, _) = call_in_flight(&server, &agent.token)
        .await
        .expect("call in flight");
    let other = server.new_tenant("other").await.expect("tenant");
    let token_id = server
        .admin()
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/tokens",
            None,
        )
        .await
        .expect("tokens")
        .1["tokens"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["role"] == "agent"))
        .and_then(|t| t["id"].as_str())
        .expect("the agent's token id")
        .to_string();
    let (status, body) = server
        .admin_with(&other)
        .revoke_token(&token_id)
        .await
        .expect("revoke");
    let (unknown_status, unknown_body) = server
        .admin_with(&other)
        .revoke_token("tok_0123456789abcdef")
        .await
        .expect("revoke");
    assert_eq!((status, body), (unknown_status, unknown_body));
    assert_eq!(status, 404);
    let list = socket
        .call("l", "session.list", json!({}))
        .await
        .expect("still open");
    assert_eq!(
        result_of(&list)["sessions"].as_array().map(Vec::len),
        Some(1)
    );
    server.stop().await;
}

backend_tests!(foreign_revocation, a_foreign_revocation_ends_nothing);
