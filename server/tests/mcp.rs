//! The remote MCP endpoint on the real server (docs/mcp.md), driven by the official
//! Rust SDK's client in both protocol revisions and, where the point is what a
//! client may not do, by plain HTTP: sessions opened and ended without ids, the
//! browser chosen, results as text and images, failures as tool errors, tenancy,
//! revocation, policy, Host, Origin, body size and rate limits.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use latchkey_protocol::api::Role;
use latchkey_testkit::mcp::{image, text};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{
    Action, Backend, Connections, FakeBrowser, McpClient, Revision, Script, TestServer,
    backend_tests, wait_until,
};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

/// A browser that answers snapshots and screenshots as the extension does.
fn page_script() -> Script {
    Arc::new(|r| match r.method.as_str() {
        "tool.snapshot" => Some(Action::Reply(json!({
            "tab_id": 7, "ref_count": 2,
            "text": "- heading \"Shop\"\n- button \"Buy\" @e1\n- link \"Help\" @e2",
        }))),
        "tool.screenshot" => Some(Action::Reply(json!({
            "tab_id": 7, "format": "png", "width": 1, "height": 1,
            "image_base64": base64::engine::general_purpose::STANDARD.encode(PNG_1X1),
        }))),
        "tool.click" => Some(Action::Error({
            let mut e = latchkey_protocol::ErrorBody::new(
                latchkey_protocol::ErrorCode::NotFound,
                "ref e9 is not in the last snapshot",
            );
            e.data = Some(json!({"reason": "ref_not_found"}));
            e
        })),
        _ => None,
    })
}

/// The smallest PNG: one transparent pixel.
const PNG_1X1: [u8; 67] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

fn mcp_url(server: &TestServer) -> String {
    format!("{}/mcp", server.http_base())
}

async fn client(server: &TestServer, token: &str, revision: Revision) -> McpClient {
    McpClient::to_server(server, token, revision)
        .await
        .expect("MCP client connects")
}

async fn received(browser: &FakeBrowser, method: &str, n: usize) -> bool {
    wait_until(DEADLINE, || async { browser.count(method) >= n }).await
}

backend_tests!(
    a_conversation_in_each_revision,
    |backend: Backend| async move {
        let server = TestServer::start(backend).await.expect("server");
        let agent = server.new_agent().await.expect("agent");
        let (device, browser) = server.new_browser(page_script()).await.expect("browser");
        for (round, revision) in [Revision::Stateless, Revision::Initialize]
            .into_iter()
            .enumerate()
        {
            let mcp = client(&server, &agent.token, revision).await;
            let expected = match revision {
                Revision::Stateless => "2026-07-28",
                Revision::Initialize => "2025-11-25",
            };
            assert_eq!(mcp.protocol_version().as_deref(), Some(expected));

            let tools = mcp.tools().await.expect("tools");
            let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
            for name in [
                "browser_list",
                "browser_navigate",
                "browser_snapshot",
                "browser_click",
                "browser_type",
                "browser_take_screenshot",
                "request_help",
            ] {
                assert!(names.iter().any(|n| n == name), "{name} listed");
            }

            // The skill, as a resource and through the Skills extension.
            let skill = mcp
                .read_text("skill://latchkey/SKILL.md")
                .await
                .expect("the skill");
            assert_eq!(skill, include_str!("../../skills/latchkey/SKILL.md"));
            if revision == Revision::Stateless {
                let skills = mcp.skills().await.expect("skills/list");
                assert_eq!(skills, ["skill://latchkey/SKILL.md"]);
            }

            let list = mcp
                .call("browser_list", json!({}))
                .await
                .expect("browser_list");
            assert_eq!(list.is_error, Some(false));
            let listed = list.structured_content.clone().expect("structured");
            assert_eq!(listed["browsers"][0]["id"], device.as_str());

            // The first browser tool opens a session on the only browser online.
            let nav = mcp
                .call("browser_navigate", json!({"url": "https://shop.test/"}))
                .await
                .expect("navigate");
            assert_eq!(nav.is_error, Some(false), "{}", text(&nav));
            assert!(received(&browser, "tool.session_start", round + 1).await);
            let sent = browser.first("tool.navigate").expect("navigate sent");
            assert_eq!(sent.params.expect("params")["url"], "https://shop.test/");

            let snap = mcp
                .call("browser_snapshot", json!({}))
                .await
                .expect("snapshot");
            assert_eq!(
                text(&snap),
                "Tab 7 · 2 refs\n- heading \"Shop\"\n- button \"Buy\" [ref=e1]\n- link \"Help\" [ref=e2]"
            );

            let shot = mcp
                .call("browser_take_screenshot", json!({}))
                .await
                .expect("shot");
            let (data, mime) = image(&shot).expect("an image block");
            assert_eq!(mime, "image/png");
            let png = base64::engine::general_purpose::STANDARD
                .decode(data)
                .expect("base64");
            assert_eq!(png, PNG_1X1);
            assert!(text(&shot).starts_with("Screenshot of tab 7, 1×1 px"));

            // A browser failure is a tool error that says what to do.
            let click = mcp
                .call("browser_click", json!({"ref": "e9"}))
                .await
                .expect("click");
            assert_eq!(click.is_error, Some(true));
            assert!(
                text(&click).contains("stale ref: call browser_snapshot again"),
                "{}",
                text(&click)
            );

            // Params the catalogue refuses never reach the browser.
            let bad = mcp
                .call("browser_navigate", json!({"url": 5}))
                .await
                .expect("answer");
            assert_eq!(bad.is_error, Some(true));
            assert!(text(&bad).starts_with("invalid_params"), "{}", text(&bad));
            assert_eq!(browser.count("tool.navigate"), round + 1);

            // One session for the whole conversation, ended by browser_close.
            assert_eq!(browser.count("tool.session_start"), round + 1);
            let closed = mcp.call("browser_close", json!({})).await.expect("close");
            assert_eq!(closed.is_error, Some(false), "{}", text(&closed));
            assert!(received(&browser, "tool.session_stop", round + 1).await);
            mcp.close().await.expect("close client");
        }
        assert!(
            server
                .admin()
                .audit_has(DEADLINE, &["session.call", "tool.navigate"])
                .await,
            "MCP calls are audited like any other"
        );
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_is_chosen_when_several_are_online_and_keys_keep_clients_apart() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (first, browser_a) = server.new_browser(page_script()).await.expect("a");
    let (_second, browser_b) = server.new_browser(page_script()).await.expect("b");
    let mcp = client(&server, &agent.token, Revision::Stateless).await;

    let which = mcp
        .call("browser_snapshot", json!({}))
        .await
        .expect("answer");
    assert_eq!(which.is_error, Some(true));
    assert!(text(&which).contains("browser_select"), "{}", text(&which));

    let picked = mcp
        .call(
            "browser_select",
            json!({"browser_id": first, "purpose": "compare prices"}),
        )
        .await
        .expect("select");
    assert_eq!(picked.is_error, Some(false), "{}", text(&picked));
    let snap = mcp
        .call("browser_snapshot", json!({}))
        .await
        .expect("snapshot");
    assert_eq!(snap.is_error, Some(false));
    assert_eq!(browser_a.count("tool.snapshot"), 1);
    assert_eq!(browser_b.count("tool.snapshot"), 0);

    // Another client of the same token with its own key gets its own session.
    let other = McpClient::connect(
        &mcp_url(&server),
        &agent.token,
        Revision::Stateless,
        Some("worker-2"),
        Connections::PerRequest,
    )
    .await
    .expect("second client");
    let mine = other
        .call("browser_select", json!({"browser_id": first}))
        .await
        .expect("select");
    assert_eq!(mine.is_error, Some(false));
    assert_eq!(browser_a.count("tool.session_start"), 2);
    let a = picked.structured_content.expect("session")["session_id"].clone();
    let b = mine.structured_content.expect("session")["session_id"].clone();
    assert_ne!(a, b);
}

backend_tests!(another_team_sees_nothing, |backend: Backend| async move {
    let server = TestServer::start(backend).await.expect("server");
    let (device, browser) = server.new_browser(page_script()).await.expect("browser");
    let beta_admin = server.new_tenant("beta").await.expect("tenant");
    let beta_agent = server
        .admin_with(&beta_admin)
        .create_token("beta-agent", Role::Agent)
        .await
        .expect("token");
    let mcp = client(&server, &beta_agent.token, Revision::Stateless).await;
    let list = mcp.call("browser_list", json!({})).await.expect("list");
    assert_eq!(
        list.structured_content.expect("list")["browsers"],
        json!([])
    );

    // Naming the other team's browser answers exactly as an unknown id.
    let foreign = mcp
        .call("browser_select", json!({"browser_id": device}))
        .await
        .expect("answer");
    let unknown = mcp
        .call("browser_select", json!({"browser_id": "dev_unknown"}))
        .await
        .expect("answer");
    assert_eq!(foreign.is_error, Some(true));
    assert_eq!(
        text(&foreign).replace(&device, "ID"),
        text(&unknown).replace("dev_unknown", "ID")
    );
    let nav = mcp
        .call("browser_navigate", json!({"url": "https://a.test/"}))
        .await
        .expect("answer");
    assert_eq!(nav.is_error, Some(true));
    assert!(
        text(&nav).starts_with("no_browser_connected"),
        "{}",
        text(&nav)
    );
    assert_eq!(browser.count("tool.session_start"), 0);
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_mid_conversation() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let token = server
        .admin()
        .create_token("short-lived", Role::Agent)
        .await
        .expect("token");
    let (_device, browser) = server.new_browser(page_script()).await.expect("browser");
    let mcp = client(&server, &token.token, Revision::Stateless).await;
    let snap = mcp
        .call("browser_snapshot", json!({}))
        .await
        .expect("snapshot");
    assert_eq!(snap.is_error, Some(false));

    let (status, _) = server
        .admin()
        .revoke_token(&token.view.id)
        .await
        .expect("revoke");
    assert_eq!(status, 200);
    // Its session ends with it, and its next request is refused.
    assert!(received(&browser, "tool.session_stop", 1).await);
    assert!(mcp.call("browser_snapshot", json!({})).await.is_err());
    assert_eq!(browser.count("tool.snapshot"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_refusal_is_a_tool_error_naming_the_rule_and_a_persons_stop_is_not_undone() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let (status, _) = server
        .admin()
        .raw(
            Method::PUT,
            "/v1/admin/policy",
            Some(json!({"block_sites": ["pay.shop.test"]})),
        )
        .await
        .expect("policy");
    assert_eq!(status, 200);
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(page_script()).await.expect("browser");
    let mcp = client(&server, &agent.token, Revision::Initialize).await;
    let nav = mcp
        .call("browser_navigate", json!({"url": "https://pay.shop.test/"}))
        .await
        .expect("answer");
    assert_eq!(nav.is_error, Some(true));
    let said = text(&nav);
    assert!(
        said.starts_with("permission_denied (site_blocked)"),
        "{said}"
    );
    assert!(said.contains("pay.shop.test"), "{said}");
    assert_eq!(browser.count("tool.navigate"), 0);

    // The person presses Stop: the endpoint does not open a new session by itself.
    let session = server.admin().sessions().await.expect("sessions")[0]["id"]
        .as_str()
        .expect("a session")
        .to_string();
    browser.event("latchkey.user_stop", json!({"session_id": session}));
    let stopped = wait_until(DEADLINE, || async {
        server
            .admin()
            .sessions()
            .await
            .expect("sessions")
            .as_array()
            .is_some_and(|s| s.is_empty())
    })
    .await;
    assert!(stopped, "the person's Stop ends the session");
    let after = mcp
        .call("browser_snapshot", json!({}))
        .await
        .expect("answer");
    assert_eq!(after.is_error, Some(true));
    assert!(
        text(&after).starts_with("session_ended"),
        "{}",
        text(&after)
    );
    assert_eq!(browser.count("tool.session_start"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cap_holds_across_session_keys() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_sessions_per_token = 1)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(page_script()).await.expect("browser");
    let url = mcp_url(&server);
    let first = McpClient::connect(
        &url,
        &agent.token,
        Revision::Stateless,
        Some("one"),
        Connections::Kept,
    )
    .await
    .expect("first client");
    let second = McpClient::connect(
        &url,
        &agent.token,
        Revision::Stateless,
        Some("two"),
        Connections::Kept,
    )
    .await
    .expect("second client");
    let ok = first
        .call("browser_snapshot", json!({}))
        .await
        .expect("answer");
    assert_eq!(ok.is_error, Some(false), "{}", text(&ok));
    let capped = second
        .call("browser_snapshot", json!({}))
        .await
        .expect("answer");
    assert_eq!(capped.is_error, Some(true));
    assert!(
        text(&capped).starts_with("limit_reached (sessions_per_token)"),
        "{}",
        text(&capped)
    );
    assert_eq!(browser.count("tool.session_start"), 1);
    // Once the first client lets its session go, the second may open one.
    first.call("browser_close", json!({})).await.expect("close");
    let now = second
        .call("browser_snapshot", json!({}))
        .await
        .expect("answer");
    assert_eq!(now.is_error, Some(false), "{}", text(&now));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_its_call_on_the_browser() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server
        .new_browser(latchkey_testkit::browser::never_answers("tool.click"))
        .await
        .expect("browser");
    let mcp = client(&server, &agent.token, Revision::Stateless).await;
    let pending =
        tokio::spawn(async move { mcp.call("browser_click", json!({"ref": "e1"})).await });
    assert!(received(&browser, "tool.click", 1).await);
    pending.abort();
    assert!(
        received(&browser, "cancel", 1).await,
        "the browser is told to stop: {:?}",
        browser.received_methods()
    );
}
