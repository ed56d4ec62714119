//! What a client may not do on the remote MCP endpoint (docs/mcp.md, "What is
//! refused before any tool runs"), by plain HTTP as a client not using an SDK
//! would send it: no token, a member's token, a foreign Host or Origin, a stream,
//! a bad session key, a body over the limit, the rate limit.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::reqwest::{self, Method, StatusCode};
use latchkey_testkit::{Backend, TestServer};
use serde_json::{Value, json};

fn mcp_url(server: &TestServer) -> String {
    format!("{}/mcp", server.http_base())
}

/// A raw JSON-RPC POST to `/mcp`, as a client not using an SDK would send it.
async fn post(
    server: &TestServer,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: String,
) -> reqwest::Response {
    let mut request = latchkey_testkit::http_client()
        .request(Method::POST, mcp_url(server))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("answer")
}

fn tools_list() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_client_may_not_do_is_refused_before_any_tool_runs() {
    let server = TestServer::builder(Backend::Sqlite)
        .config(|c| {
            c.mcp.max_request_bytes = 4096;
        })
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");

    // No token: 401 pointing at the protected-resource metadata, which answers.
    let refused = post(&server, None, &[], tools_list()).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .expect("ascii")
        .to_string();
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        server.http_base()
    );
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .expect("metadata")
        .json()
        .await
        .expect("json");
    assert_eq!(metadata["resource"], mcp_url(&server));
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    let member = server
        .admin()
        .add_member("Ann", "ann@example.test")
        .await
        .expect("member");
    let member_token = server
        .admin()
        .member_token(&member.id)
        .await
        .expect("member token");
    assert_eq!(
        post(&server, Some(&member_token), &[], tools_list())
            .await
            .status(),
        StatusCode::FORBIDDEN
    );

    // With the token: the list answers.
    let ok = post(&server, Some(&agent.token), &[], tools_list()).await;
    assert_eq!(ok.status(), StatusCode::OK);

    // A Host or Origin that is not the gateway's (DNS rebinding) is refused.
    let host = post(
        &server,
        Some(&agent.token),
        &[("host", "attacker.test")],
        tools_list(),
    )
    .await;
    assert_eq!(host.status(), StatusCode::FORBIDDEN);
    let origin = post(
        &server,
        Some(&agent.token),
        &[("origin", "https://attacker.test")],
        tools_list(),
    )
    .await;
    assert_eq!(origin.status(), StatusCode::FORBIDDEN);
    let own_origin = server.http_base();
    let same = post(
        &server,
        Some(&agent.token),
        &[("origin", own_origin.as_str())],
        tools_list(),
    )
    .await;
    assert_eq!(same.status(), StatusCode::OK);

    // The endpoint never streams to the client.
    let stream = latchkey_testkit::http_client()
        .get(mcp_url(&server))
        .bearer_auth(&agent.token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("answer");
    assert_eq!(stream.status(), StatusCode::METHOD_NOT_ALLOWED);

    // A session key must be short visible ASCII.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "browser_close", "arguments": {}}})
    .to_string();
    let long = "k".repeat(65);
    let keyed = post(
        &server,
        Some(&agent.token),
        &[("latchkey-session-key", long.as_str())],
        call,
    )
    .await;
    let answer: Value = keyed.json().await.expect("JSON-RPC answer");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");

    // A body over the limit is refused whole.
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "browser_navigate", "arguments": {"url": "x".repeat(5000)}}});
    assert_eq!(
        post(&server, Some(&agent.token), &[], big.to_string())
            .await
            .status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_rate_limit_holds_on_this_surface_too() {
    let server = TestServer::builder(Backend::Sqlite)
        .config(|c| c.limits.agent_calls_per_second_per_token = 5)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let mut limited = None;
    for _ in 0..20 {
        let answer = post(&server, Some(&agent.token), &[], tools_list()).await;
        if answer.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(answer);
            break;
        }
    }
    let limited = limited.expect("20 requests at once exceed 5 per second");
    assert!(limited.headers().contains_key("retry-after"));
}
