//! A tool call on `/mcp` is answered by latchkey itself when it passes every check
//! the MCP SDK makes, and by the SDK otherwise (docs/mcp.md, "How a call is
//! served"). Each call here is sent twice by plain HTTP, once as it comes and once
//! with an allowed `Origin` (which sends it to the SDK), and the two answers must be
//! the same; requests the SDK refuses must still be refused, with nothing run. The
//! `latchkey_mcp_requests_total` counter says who answered. (One test in this
//! binary: the recorder is process-wide, so counts are exact.)

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use latchkey_testkit::reqwest::{Method, StatusCode};
use latchkey_testkit::{Action, Backend, Script, TestServer};
use serde_json::{Value, json};

const LEGACY: &str = "2025-11-25";
const CURRENT: &str = "2026-07-28";

fn page_script() -> Script {
    Arc::new(|r| match r.method.as_str() {
        "tool.snapshot" => Some(Action::Reply(json!({
            "tab_id": 7, "ref_count": 1, "text": "- button \"Buy\" @e1",
        }))),
        "tool.screenshot" => Some(Action::Reply(json!({
            "tab_id": 7, "format": "png", "width": 1, "height": 1,
            "image_base64": base64::engine::general_purpose::STANDARD.encode(b"not really a png"),
        }))),
        "tool.click" => Some(Action::Error(latchkey_protocol::ErrorBody::new(
            latchkey_protocol::ErrorCode::NotFound,
            "ref e9 is not in the last snapshot",
        ))),
        _ => None,
    })
}

/// A `tools/call` body in `version`'s shape: from 2026-07-28 on, `_meta` carries
/// the version and the client's capabilities.
fn call_body(version: &str, id: u64, name: &str, arguments: Value) -> String {
    let mut params = json!({ "name": name, "arguments": arguments });
    if version == CURRENT {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": CURRENT,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

type Headers = Vec<(String, String)>;

/// The headers a client of `version` sends with a call of `name`.
fn call_headers(version: &str, name: &str) -> Headers {
    let mut headers = vec![("mcp-protocol-version".to_string(), version.to_string())];
    if version == CURRENT {
        headers.push(("mcp-method".into(), "tools/call".into()));
        headers.push(("mcp-name".into(), name.into()));
    }
    headers
}

struct Endpoint<'a> {
    server: &'a TestServer,
    token: &'a str,
}

impl Endpoint<'_> {
    async fn post(&self, headers: &[(String, String)], body: String) -> (StatusCode, String) {
        let mut request = latchkey_testkit::http_client()
            .request(Method::POST, format!("{}/mcp", self.server.http_base()))
            .bearer_auth(self.token)
            .header("content-type", "application/json")
            .header("latchkey-session-key", "direct-test");
        if !headers.iter().any(|(k, _)| k == "accept") {
            request = request.header("accept", "application/json, text/event-stream");
        }
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let answer = request.body(body).send().await.expect("answer");
        let status = answer.status();
        (status, answer.text().await.expect("body"))
    }

    async fn counts(&self) -> (f64, f64) {
        let m: HashMap<String, f64> = self.server.metrics().await.expect("scrape");
        let get = |path: &str| {
            m.get(&format!("latchkey_mcp_requests_total{{path=\"{path}\"}}"))
                .copied()
                .unwrap_or(0.0)
        };
        (get("direct"), get("sdk"))
    }
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_answered_alike_by_latchkey_and_by_the_sdk() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (device, browser) = server.new_browser(page_script()).await.expect("browser");
    let mcp = Endpoint {
        server: &server,
        token: &agent.token,
    };
    let origin = {
        let url = latchkey_testkit::reqwest::Url::parse(&server.http_base()).expect("url");
        url.origin().ascii_serialization()
    };

    // Choosing the browser is the endpoint's own tool: the SDK answers it.
    let (before_direct, before_sdk) = mcp.counts().await;
    let select = json!({ "browser_id": device });
    let (status, text) = mcp
        .post(
            &call_headers(LEGACY, "browser_select"),
            call_body(LEGACY, 1, "browser_select", select),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(json_of(&text)["result"]["isError"], json!(false), "{text}");
    assert_eq!(mcp.counts().await, (before_direct, before_sdk + 1.0));

    // Each call both ways, in both revisions: the same status, type and answer.
    let calls = [
        ("browser_snapshot", json!({})),
        ("browser_take_screenshot", json!({})),
        ("browser_click", json!({ "ref": "e9" })),
        (
            "browser_navigate",
            json!({ "url": "https://example.test/" }),
        ),
    ];
    let mut id = 10;
    for version in [LEGACY, CURRENT] {
        for (name, arguments) in &calls {
            id += 1;
            let headers = call_headers(version, name);
            let (direct_before, sdk_before) = mcp.counts().await;
            let direct = mcp
                .post(&headers, call_body(version, id, name, arguments.clone()))
                .await;
            assert_eq!(
                mcp.counts().await,
                (direct_before + 1.0, sdk_before),
                "{version} {name} was not answered directly"
            );
            let mut through_sdk = headers.clone();
            through_sdk.push(("origin".into(), origin.clone()));
            let sdk = mcp
                .post(
                    &through_sdk,
                    call_body(version, id, name, arguments.clone()),
                )
                .await;
            assert_eq!(mcp.counts().await, (direct_before + 1.0, sdk_before + 1.0));
            assert_eq!(direct.0, StatusCode::OK, "{version} {name}: {}", direct.1);
            assert_eq!(direct.0, sdk.0, "{version} {name}");
            assert_eq!(
                json_of(&direct.1),
                json_of(&sdk.1),
                "{version} {name}: latchkey and the SDK answer differently"
            );
        }
    }
    assert_eq!(browser.count("tool.snapshot"), 4);
    assert_eq!(browser.count("tool.click"), 4);

    // A body the SDK reads but not in a plain call's exact shape (a key of the
    // client's own) is the SDK's to answer, and it is answered.
    let mut extra = json_of(&call_body(CURRENT, 50, "browser_snapshot", json!({})));
    extra["x-client-trace"] = json!("t-1");
    let (direct_before, sdk_before) = mcp.counts().await;
    let (status, text) = mcp
        .post(
            &call_headers(CURRENT, "browser_snapshot"),
            extra.to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(json_of(&text)["result"]["isError"], json!(false), "{text}");
    assert_eq!(mcp.counts().await, (direct_before, sdk_before + 1.0));
    assert_eq!(browser.count("tool.snapshot"), 5);

    // What the SDK refuses is still refused, by the SDK, and nothing runs.
    let navigations = browser.count("tool.navigate");
    let navigate = || {
        call_body(
            CURRENT,
            99,
            "browser_navigate",
            json!({"url": "https://x.test/"}),
        )
    };
    let with = |extra: &[(&str, &str)]| {
        let mut headers = call_headers(CURRENT, "browser_navigate");
        for (k, v) in extra {
            headers.retain(|(name, _)| name != k);
            headers.push((k.to_string(), v.to_string()));
        }
        headers
    };
    let refusals: Vec<(&str, Headers, String, StatusCode)> = vec![
        (
            "Mcp-Name names another tool",
            with(&[("mcp-name", "browser_click")]),
            navigate(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "no Mcp-Method header",
            call_headers(CURRENT, "browser_navigate")
                .into_iter()
                .filter(|(k, _)| k != "mcp-method")
                .collect(),
            navigate(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "_meta without the version the header names",
            call_headers(CURRENT, "browser_navigate"),
            call_body(
                LEGACY,
                99,
                "browser_navigate",
                json!({"url": "https://x.test/"}),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            "a version no one knows",
            with(&[("mcp-protocol-version", "2099-01-01")]),
            navigate(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "JSON only in Accept",
            with(&[("accept", "application/json")]),
            navigate(),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            "event streams refused in Accept",
            with(&[("accept", "application/json, text/event-stream; q=0")]),
            navigate(),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            "a foreign Origin",
            with(&[("origin", "https://evil.example")]),
            navigate(),
            StatusCode::FORBIDDEN,
        ),
        (
            "a foreign Host",
            with(&[("host", "evil.example")]),
            navigate(),
            StatusCode::FORBIDDEN,
        ),
    ];
    for (what, headers, body, expected) in refusals {
        let (direct_before, sdk_before) = mcp.counts().await;
        let (status, text) = mcp.post(&headers, body).await;
        assert_eq!(status, expected, "{what}: {text}");
        assert_eq!(
            mcp.counts().await,
            (direct_before, sdk_before + 1.0),
            "{what} was not left to the SDK"
        );
    }
    // An unknown tool is the SDK's to name.
    let (status, text) = mcp
        .post(
            &call_headers(LEGACY, "browser_teleport"),
            call_body(LEGACY, 100, "browser_teleport", json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.contains("no tool named"), "{text}");
    assert_eq!(browser.count("tool.navigate"), navigations);
}
