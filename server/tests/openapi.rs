//! The OpenAPI document against the running server (docs/api.md): every
//! documented operation answers, with a status the document lists for it and, for
//! a refusal, a code that status lists; every other method on a documented path is
//! refused; the served document is the one committed in docs/openapi.json.
//!
//! That no route is left out of the document is also held at build time: plain
//! `Router::route` is a clippy error in the server (server/clippy.toml).
//! Regenerate the committed document with
//! `LATCHKEY_BLESS=1 cargo test -p latchkey-server --test openapi`.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use latchkey_testkit::reqwest::{self, Method};
use latchkey_testkit::{Backend, TestServer};
use serde_json::{Value, json};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

async fn document(server: &TestServer) -> Value {
    let answer = reqwest::get(format!("{}/openapi.json", server.http_base()))
        .await
        .expect("answer");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "application/json");
    answer.json().await.expect("json")
}

/// The codes a documented refusal names: "Refused: `a`, `b` (…)".
fn listed_codes(response: &Value) -> Vec<String> {
    let description = response["description"].as_str().unwrap_or_default();
    description
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// What one operation answered, checked against what the document says of it.
async fn check(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    method: &str,
    operation: &Value,
    token: Option<&str>,
) -> u16 {
    let url = format!("{base}{}", path.replace("{id}", "unknown-id"));
    let mut request = client
        .request(
            Method::from_bytes(method.to_uppercase().as_bytes()).expect("method"),
            &url,
        )
        .header("accept", "application/json, text/event-stream");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if operation.get("requestBody").is_some() {
        request = request.json(&json!({}));
    }
    let answer = request.send().await.expect("answer");
    let status = answer.status().as_u16();
    let content_type = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = if content_type.starts_with("text/event-stream") {
        String::new() // A stream stays open; its first answer is enough.
    } else {
        answer.text().await.expect("body")
    };
    let what = format!("{method} {path} answered {status} {body}");
    let documented = &operation["responses"][status.to_string()];
    assert!(
        documented.is_object(),
        "{what}: not among the documented statuses {:?}",
        operation["responses"]
            .as_object()
            .map(|r| r.keys().collect::<Vec<_>>())
    );
    let error_body = documented["content"]["application/json"]["schema"]["$ref"]
        == "#/components/schemas/ApiErrorBody";
    if error_body {
        let parsed: Value = serde_json::from_str(&body).expect(&what);
        let code = parsed["error"]["code"].as_str().expect(&what).to_string();
        assert_ne!(
            parsed["error"]["message"], "no such endpoint",
            "{what}: the router's fallback answered, not the operation"
        );
        let listed = listed_codes(documented);
        assert!(
            listed.contains(&code),
            "{what}: `{code}` is not among {listed:?}"
        );
    }
    if (200..300).contains(&status) && content_type.starts_with("application/json") {
        let _: Value = serde_json::from_str(&body).expect(&what);
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_answers_as_documented() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let doc = document(&server).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));

    let admin = server.admin();
    let member = admin
        .add_member("Ada", "ada@example.test")
        .await
        .expect("member");
    let member_token = admin.member_token(&member.id).await.expect("member token");
    let client = latchkey_testkit::http_client();
    let base = server.http_base();

    // The fallback is told apart from an operation's own not_found.
    let (status, body) = admin.text("/v1/not-a-route").await.expect("answer");
    assert_eq!(status, 404);
    assert!(body.contains("no such endpoint"), "{body}");

    let mut operations = 0;
    let mut reached_handlers = 0;
    let paths = doc["paths"].as_object().expect("paths");
    for (path, item) in paths {
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            let public = operation["security"] == json!([{}]);
            let token = if public {
                None
            } else if path.starts_with("/v1/me") {
                Some(member_token.as_str())
            } else {
                Some(server.admin_token.as_str())
            };
            let status = check(&client, &base, path, method, operation, token).await;
            operations += 1;
            if ![401, 403].contains(&status) {
                reached_handlers += 1;
            }
        }
    }
    assert!(operations >= 59, "{operations} operations");
    // Authenticated with the right role, every operation but the extension's
    // (which take a device's credential) gets past authentication.
    assert!(
        reached_handlers >= operations - 4,
        "{reached_handlers} of {operations} reached their handler"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_not_documented_on_a_path_is_refused() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let doc = document(&server).await;
    let client = latchkey_testkit::http_client();
    let base = server.http_base();
    let mut probed = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS.iter().filter(|m| item.get(**m).is_none()) {
            let url = format!("{base}{}", path.replace("{id}", "unknown-id"));
            let answer = client
                .request(
                    Method::from_bytes(method.to_uppercase().as_bytes()).expect("m"),
                    &url,
                )
                .bearer_auth(&server.admin_token)
                .json(&json!({}))
                .send()
                .await
                .expect("answer");
            let status = answer.status().as_u16();
            // 405 from the router; the extension paths answer 404 for any other
            // method, as the extension contract has it.
            let expected = if path.starts_with("/extension") || path == "/" {
                404
            } else {
                405
            };
            assert_eq!(status, expected, "{method} {path}");
            probed += 1;
        }
    }
    assert!(probed > 100, "{probed} probes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_committed_one_and_follows_the_configuration() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let served = document(&server).await;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    let generated = serde_json::to_string_pretty(&served).expect("json") + "\n";
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/openapi.json");
    } else {
        let committed = std::fs::read_to_string(&path).expect("docs/openapi.json");
        assert!(
            committed == generated,
            "docs/openapi.json is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-server --test openapi"
        );
    }
    // `latchkeyd openapi` prints the same document.
    let printed = serde_json::to_value(latchkey_server::openapi::document()).expect("json");
    assert_eq!(printed, served);

    // MCP turned off: neither `/mcp` nor its metadata is documented, or served.
    let without = TestServer::builder(Backend::Sqlite)
        .config(|c| c.mcp.enabled = false)
        .start()
        .await
        .expect("server");
    let doc = document(&without).await;
    let paths = doc["paths"].as_object().expect("paths");
    assert!(
        !paths
            .keys()
            .any(|p| p.contains("mcp") || p.contains("oauth"))
    );
    assert_eq!(
        paths.len() + 3,
        served["paths"].as_object().expect("paths").len()
    );
    let (status, _) = without
        .admin()
        .text("/.well-known/oauth-protected-resource")
        .await
        .expect("answer");
    assert_eq!(status, 404);
}
