//! Limits that hold per browser and per token on the agent API (docs/security.md,
//! "Limits"): sessions open per device (each is an Agent Window in a real browser)
//! and per token, an admin token on agent endpoints charged like an agent, and
//! `cancel` frames charged like any request. An outside review opened 1,000 Agent
//! Windows on one browser with one token, and had 5,000 cancels answered in 0.3 s.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_testkit::agent_socket::{call_in_flight, code_of, result_of};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_browser_and_per_token() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_sessions_per_token = 10)
        .start()
        .await
        .expect("server");
    let (first, browser) = server
        .new_browser(std::sync::Arc::new(|_| None))
        .await
        .expect("browser");
    let (second, _other) = server
        .new_browser(std::sync::Arc::new(|_| None))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    // The default: 8 Agent Windows per browser.
    for _ in 0..8 {
        agent.start(Some(&first)).await.expect("within the cap");
    }
    let refused = agent.try_start(Some(&first)).await.expect("answer");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.code(), "capacity_reached");
    assert_eq!(refused.reason(), "sessions_per_device");
    assert_eq!(
        browser.count("tool.session_start"),
        8,
        "the refused start never reached the browser"
    );
    // Another agent is refused on that browser too: the cap is the browser's.
    let other_agent = server.new_agent().await.expect("agent");
    let refused = other_agent.try_start(Some(&first)).await.expect("answer");
    assert_eq!(refused.code(), "capacity_reached");
    // The token's own cap (10 here): two more on the other browser, then no more.
    for _ in 0..2 {
        agent
            .start(Some(&second))
            .await
            .expect("within the token's cap");
    }
    let refused = agent.try_start(Some(&second)).await.expect("answer");
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.code(), "limit_reached");
    assert_eq!(refused.reason(), "sessions_per_token");
    // A stopped session makes room again.
    let open = agent.sessions().await.expect("sessions");
    agent.stop(&open.sessions[0].id).await.expect("stop");
    agent.start(Some(&second)).await.expect("room again");
    server.stop().await;
}

/// An admin token on the agent API is charged to the same per-token budget as an
/// agent token (its admin API is not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_tokens_on_agent_endpoints_are_rate_limited() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.agent_calls_per_second_per_token = 3)
        .start()
        .await
        .expect("server");
    let admin_as_agent = server.agent(&server.admin_token);
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(
            admin_as_agent
                .request(Method::GET, "/v1/browsers", None)
                .await
                .expect("answer")
                .status,
        );
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    assert!(
        server.admin().devices().await.is_ok(),
        "the admin API is not charged"
    );
    server.stop().await;
}

/// `cancel` frames are charged: a flood of them is answered `rate_limited`, while a
/// cancel of a request in flight is still honoured over the limit (stopping work
/// must stay possible; there is at most one such cancel per request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_frames_count_against_the_rate_limit() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.agent_calls_per_second_per_token = 20)
        .start()
        .await
        .expect("server");
    let agent = server
        .admin()
        .create_token("canceller", Role::Agent)
        .await
        .expect("token");
    let (browser, mut socket, _) = call_in_flight(&server, &agent.token)
        .await
        .expect("call in flight");
    // 200 cancels of nothing, as fast as they go.
    for n in 0..200 {
        socket
            .request(&format!("c{n}"), "cancel", json!({ "rpc_id": "nothing" }))
            .await
            .expect("send");
    }
    let mut limited = 0;
    for _ in 0..200 {
        let answer = socket.answer().await.expect("answer");
        if code_of(&answer) == "rate_limited" {
            limited += 1;
        }
    }
    assert!(limited >= 150, "only {limited} of 200 cancels were refused");
    // Over the limit, a cancel of the request in flight still stops it.
    let cancel = socket
        .call("ch", "cancel", json!({ "rpc_id": "h" }))
        .await
        .expect("answer");
    let followup = socket.answer().await.expect("answer");
    let mut answers = [cancel, followup];
    answers.sort_by_key(|f| f.id().map(str::to_string));
    // Sorted by id: "ch" (the cancel's own answer), then "h" (the call it stopped).
    assert_eq!(result_of(&answers[0])["cancelled"], true, "{answers:?}");
    assert_eq!(code_of(&answers[1]), "cancelled", "{answers:?}");
    assert!(wait_until(DEADLINE, || async { browser.count("cancel") == 1 }).await);
    server.stop().await;
}
