//! An MCP caller's choice is kept in the store (docs/mcp.md, "Sessions"), so
//! what was decided outlives the process that saw it: a person's Stop still
//! holds for the caller after latchkeyd restarts.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::{Backend, McpClient, Revision, TestServer, backend_tests, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

async fn mcp(server: &TestServer, token: &str) -> McpClient {
    McpClient::to_server(server, token, Revision::Stateless)
        .await
        .expect("MCP client connects")
}

backend_tests!(
    a_persons_stop_holds_for_the_caller_after_a_restart,
    |backend: Backend| async move {
        let mut server = TestServer::start(backend).await.expect("server");
        let agent = server.new_agent().await.expect("agent");
        let (_device, browser) = server
            .new_browser(latchkey_testkit::browser::never_answers("tool.hang"))
            .await
            .expect("browser");
        let client = mcp(&server, &agent.token).await;
        client.works("browser_snapshot", json!({})).await;
        let session = agent.sessions().await.expect("sessions").sessions[0]
            .id
            .clone();

        browser.event("latchkey.user_stop", json!({"session_id": session}));
        let ended = wait_until(DEADLINE, || async {
            agent.sessions().await.is_ok_and(|l| l.sessions.is_empty())
        })
        .await;
        assert!(ended, "the person's Stop ends the session");

        // The restarted node has no memory of the session; the caller's
        // choice says why it ended.
        server.restart().await.expect("restart");
        let client = mcp(&server, &agent.token).await;
        let refused = client.fails("browser_snapshot", json!({})).await;
        assert!(
            refused.starts_with("session_ended (user_stopped)"),
            "{refused}"
        );
        assert_eq!(browser.count("tool.session_start"), 1);
    }
);
