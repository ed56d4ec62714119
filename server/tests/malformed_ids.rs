//! Every route that takes an id, on the real server and both backends, with ids no
//! server ever issued: a NUL byte (which PostgreSQL refuses in text), kilobytes of
//! text, another kind's id, an id of the right shape nobody holds. Each answers
//! `not_found` like an unknown id, never `store_unavailable`, and changes nothing
//! (docs/security.md, "What a peer can make the gateway store").

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::api::Role;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

/// Ids that are not ids, percent-encoded for a path segment.
fn bad_ids() -> Vec<String> {
    vec![
        "%00".to_string(),
        "mem_0123456789abcde%00".to_string(),
        "x".repeat(4000),
        "tok_0123456789abcdef".to_string(),
        "del_0123456789abcdef".to_string(),
        "0123456789abcdef0123456789abcdef".to_string(),
        "%E2%80%AE".to_string(),
    ]
}

async fn ids_nobody_issued_answer_not_found(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let as_alice = server.admin_with(&admin.member_token(&alice.id).await.expect("token"));
    let agent = admin
        .create_token("agent", Role::Agent)
        .await
        .expect("agent");
    let as_agent = server.admin_with(&agent.token);
    // Every set-up row is written before the count starts.
    assert!(
        admin
            .audit_has(
                std::time::Duration::from_secs(10),
                &["token.create", "agent"]
            )
            .await
    );
    let before = admin
        .audit_lines(200, &["action", "target"])
        .await
        .expect("audit");

    let routes: Vec<(
        &latchkey_testkit::AdminClient,
        Method,
        &str,
        Option<serde_json::Value>,
    )> = vec![
        (&admin, Method::GET, "/v1/admin/devices/{}", None),
        (
            &admin,
            Method::PATCH,
            "/v1/admin/devices/{}",
            Some(json!({"label": "x"})),
        ),
        (&admin, Method::DELETE, "/v1/admin/devices/{}", None),
        (&admin, Method::POST, "/v1/admin/devices/{}/forget", None),
        (&admin, Method::GET, "/v1/admin/devices/{}/policy", None),
        (
            &admin,
            Method::PUT,
            "/v1/admin/devices/{}/policy",
            Some(json!({})),
        ),
        (&admin, Method::DELETE, "/v1/admin/tokens/{}", None),
        (&admin, Method::DELETE, "/v1/admin/members/{}", None),
        (&admin, Method::DELETE, "/v1/admin/pairings/{}", None),
        (&admin, Method::DELETE, "/v1/admin/sessions/{}", None),
        (&as_alice, Method::DELETE, "/v1/me/devices/{}", None),
        (&as_alice, Method::GET, "/v1/me/devices/{}/policy", None),
        (&as_agent, Method::DELETE, "/v1/delegations/{}", None),
        (&as_agent, Method::DELETE, "/v1/sessions/{}", None),
        (
            &as_agent,
            Method::POST,
            "/v1/sessions/{}/calls",
            Some(json!({"method": "tool.tab_list"})),
        ),
    ];
    for (client, method, template, body) in &routes {
        for id in bad_ids() {
            let path = template.replace("{}", &id);
            let (status, answer) = client
                .raw(method.clone(), &path, body.clone())
                .await
                .expect("an answer");
            let shown = &path[..path.len().min(60)];
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (404, Some("not_found")),
                "{method} {shown}: {answer}"
            );
        }
    }
    // Filters are data, not ids, but reach the store too.
    for filter in [
        "actor=%00",
        "target=device%3A%00",
        "action=%00.*",
        "outcome=%00",
    ] {
        let (status, answer) = admin
            .raw(Method::GET, &format!("/v1/admin/audit?{filter}"), None)
            .await
            .expect("an answer");
        assert!(
            status == 200 || answer["error"]["code"] == json!("invalid_params"),
            "{filter}: {status} {answer}"
        );
    }
    let after = admin
        .audit_lines(200, &["action", "target"])
        .await
        .expect("audit");
    assert_eq!(before, after, "nothing was done, so nothing was audited");
    server.stop().await;
}

backend_tests!(malformed, ids_nobody_issued_answer_not_found);
