//! MCP clients across replicas, on the real thing (docs/mcp.md, "Sessions";
//! docs/cluster.md, "MCP on any replica"): an MCP caller whose requests land on
//! either of two replicas, with no sticky load balancer, keeps one browser and
//! one session; a choice made or ended through one replica holds on the other;
//! a call to a session that ended elsewhere opens a new one in its place; two
//! replicas opening for one caller at once leave one session open.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use latchkey_testkit::cluster::{DEADLINE, browser_on, two_replicas};
use latchkey_testkit::mcp::text;
use latchkey_testkit::{Action, FakeAgent, McpClient, Revision, TestServer, wait_until};
use serde_json::json;

async fn mcp(server: &TestServer, token: &str) -> McpClient {
    McpClient::to_server(server, token, Revision::Stateless)
        .await
        .expect("MCP client connects")
}

/// The token's open sessions, on every replica.
async fn open_sessions(agent: &FakeAgent) -> Vec<String> {
    let list = agent.sessions().await.expect("sessions");
    list.sessions.into_iter().map(|s| s.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_caller_keeps_its_browser_and_session_on_either_replica() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (device, browser) = browser_on(&a).await;
    let agent = a.new_agent().await.expect("agent");
    let (on_a, on_b) = (mcp(&a, &agent.token).await, mcp(&b, &agent.token).await);

    // Opened through A, carried on through B: one session, one Agent Window.
    on_a.works("browser_snapshot", json!({})).await;
    on_b.works("browser_snapshot", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 1);
    assert_eq!(browser.count("tool.snapshot"), 2);
    let first = open_sessions(&agent).await;
    assert_eq!(first.len(), 1, "{first:?}");

    // Closed through B: A's next call opens a new session rather than
    // calling the closed one.
    on_b.works("browser_close", json!({})).await;
    assert_eq!(browser.count("tool.session_stop"), 1);
    on_a.works("browser_snapshot", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 2);
    let second = open_sessions(&agent).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second, first);

    // The person presses Stop: neither replica opens a session by itself.
    browser.event("latchkey.user_stop", json!({"session_id": second[0]}));
    assert!(
        wait_until(DEADLINE, || async {
            open_sessions(&agent).await.is_empty()
        })
        .await,
        "the person's Stop ends the session"
    );
    for client in [&on_b, &on_a] {
        let refused = client.fails("browser_snapshot", json!({})).await;
        assert!(refused.starts_with("session_ended"), "{refused}");
    }
    assert_eq!(browser.count("tool.session_start"), 2);

    // Picking the browser again through B goes on through A.
    on_b.works("browser_select", json!({"browser_id": device}))
        .await;
    on_a.works("browser_snapshot", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 3);
    assert_eq!(open_sessions(&agent).await.len(), 1);

    // That session (on B) closed through B: A's next call is refused by B
    // before it reaches the ended session, and A opens a new one in its
    // place, without an error and without the call running twice.
    on_b.works("browser_close", json!({})).await;
    let snapshots = browser.count("tool.snapshot");
    on_a.works("browser_snapshot", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 4);
    assert_eq!(browser.count("tool.snapshot"), snapshots + 1);
    // B's copy names the closed session: it finds the new one.
    on_b.works("browser_snapshot", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 4);
    assert_eq!(open_sessions(&agent).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_opening_for_one_caller_at_once_leave_one_session() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    // The browser holds its first two session starts until both have come,
    // so both replicas are opening at once.
    let release = Arc::new(tokio::sync::Notify::new());
    let starts = Arc::new(AtomicUsize::new(0));
    let script = {
        let (release, starts) = (release.clone(), starts.clone());
        Arc::new(move |r: &latchkey_protocol::RequestFrame| {
            if r.method != "tool.session_start" {
                return None;
            }
            let n = starts.fetch_add(1, Ordering::SeqCst);
            let reply = Action::Reply(json!({ "agent_window_id": 900 + n }));
            Some(if n < 2 {
                Action::WaitFor(release.clone(), Box::new(reply))
            } else {
                reply
            })
        })
    };
    let (_device, browser) = a.new_browser(script).await.expect("browser");
    let agent = a.new_agent().await.expect("agent");
    let (on_a, on_b) = (mcp(&a, &agent.token).await, mcp(&b, &agent.token).await);

    let first = tokio::spawn(async move {
        let answer = on_a.call("browser_tabs", json!({})).await;
        (on_a, answer)
    });
    let second = tokio::spawn(async move {
        let answer = on_b.call("browser_tabs", json!({})).await;
        (on_b, answer)
    });
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_start") >= 2
        })
        .await,
        "both replicas asked the browser for a session"
    );
    let done = wait_until(DEADLINE, || async {
        release.notify_waiters();
        first.is_finished() && second.is_finished()
    })
    .await;
    assert!(done, "both calls answered");
    let (on_a, one) = first.await.expect("first");
    let (on_b, other) = second.await.expect("second");
    let answers = [one.expect("answer"), other.expect("answer")];
    assert!(
        answers.iter().any(|r| r.is_error != Some(true)),
        "{:?}",
        answers.iter().map(text).collect::<Vec<_>>()
    );

    // The replica that wrote second stopped its own session.
    assert_eq!(open_sessions(&agent).await.len(), 1);
    assert_eq!(browser.count("tool.session_stop"), 1);
    // Both go on with the one left.
    on_a.works("browser_tabs", json!({})).await;
    on_b.works("browser_tabs", json!({})).await;
    assert_eq!(browser.count("tool.session_start"), 2);
    assert_eq!(open_sessions(&agent).await.len(), 1);
}
