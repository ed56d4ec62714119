//! Policies on the real server, both backends (docs/policy.md): every capability
//! class granted and refused at the team's and at the browser's layer, sites on
//! the URLs the gateway sees, who may start and consent, a policy written while
//! a session runs, the time limit, and who may set a browser's policy. Nothing a
//! policy refuses reaches the browser; every refusal names its rule and layer.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{AdminClient, Backend, FakeBrowser, TestServer, backend_tests, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

/// `PUT` a policy; the answer's body, which must be a success.
async fn put(admin: &AdminClient, path: &str, policy: Value) -> Value {
    let (status, body) = admin
        .raw(Method::PUT, path, Some(policy))
        .await
        .expect("answer");
    assert_eq!(status, 200, "{path}: {body}");
    body
}

async fn get(admin: &AdminClient, path: &str) -> Value {
    let (status, body) = admin.raw(Method::GET, path, None).await.expect("answer");
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// An agent token: its id (for `agents`) and an agent using it.
async fn agent(server: &TestServer, name: &str) -> (String, latchkey_testkit::FakeAgent) {
    let token = server
        .admin()
        .create_token(name, Role::Agent)
        .await
        .expect("token");
    (token.view.id, server.agent(&token.token))
}

async fn browser(server: &TestServer) -> (String, FakeBrowser) {
    server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser")
}

/// One method of each class the person lends, with params the catalogue accepts.
const CLASSES: [(&str, &str, &str); 5] = [
    ("read", "tool.tab_list", "{}"),
    ("input", "tool.press", r#"{"key": "Enter"}"#),
    ("navigate", "tool.reload", "{}"),
    ("script", "tool.evaluate", r#"{"expression": "1"}"#),
    ("borrow", "tool.tab_return", r#"{"tab_id": 3}"#),
];

async fn each_class_is_granted_or_refused_at_either_layer(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = browser(&server).await;
    let (_, agent) = agent(&server, "matrix").await;
    let session = agent.start(None).await.expect("start").id;
    let device_path = format!("/v1/admin/devices/{device}/policy");
    for (layer, path, other) in [
        ("team", "/v1/admin/policy", device_path.as_str()),
        ("device", device_path.as_str(), "/v1/admin/policy"),
    ] {
        put(&admin, other, json!({})).await;
        for (class, method, params) in CLASSES {
            let params: Value = serde_json::from_str(params).expect("params");
            for granted in [true, false] {
                let capabilities: Vec<&str> = CLASSES
                    .iter()
                    .map(|(c, _, _)| *c)
                    .filter(|c| (*c == class) == granted)
                    .collect();
                // Written while the session runs: it applies from the next call.
                put(&admin, path, json!({ "capabilities": capabilities })).await;
                let before = browser.count(method);
                let outcome = agent
                    .call(&session, method, params.clone())
                    .await
                    .expect("answer");
                let case = format!("{class} at {layer}, granted {granted}: {:?}", outcome.body);
                if granted {
                    assert!(outcome.is_ok(), "{case}");
                    assert_eq!(browser.count(method), before + 1, "{case}");
                } else {
                    assert_eq!(outcome.status, 403, "{case}");
                    assert_eq!(outcome.code(), "permission_denied", "{case}");
                    assert_eq!(outcome.reason(), "capability_not_granted", "{case}");
                    let data = &outcome.body["error"]["data"];
                    assert_eq!(data["capability"], class, "{case}");
                    assert_eq!(data["from"], json!([layer]), "{case}");
                    assert_eq!(browser.count(method), before, "never forwarded: {case}");
                }
            }
        }
    }
    // The session class is never taken away: the agent can always stop.
    agent.stop(&session).await.expect("stop");
}

async fn sites_are_enforced_on_the_urls_the_gateway_sees(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = browser(&server).await;
    put(
        &admin,
        "/v1/admin/policy",
        json!({"block_sites": ["pay.shop.test"]}),
    )
    .await;
    let path = format!("/v1/admin/devices/{device}/policy");
    put(
        &admin,
        &path,
        json!({"allow_sites": ["*.shop.test", "docs.test"]}),
    )
    .await;
    let (_, agent) = agent(&server, "sites").await;
    let session = agent.start(None).await.expect("start").id;

    let nav = |url: &str| {
        let (agent, session, url) = (agent.clone(), session.clone(), url.to_string());
        async move {
            agent
                .call(&session, "tool.navigate", json!({ "url": url }))
                .await
                .expect("answer")
        }
    };
    assert!(nav("https://www.shop.test/cart").await.is_ok());
    assert!(nav("http://docs.test/").await.is_ok());
    let refused = [
        (
            "https://PAY.shop.test./checkout",
            "site_blocked",
            json!(["team"]),
        ),
        (
            "https://elsewhere.test/",
            "site_not_allowed",
            json!(["device"]),
        ),
        ("https://shop.test/", "site_not_allowed", json!(["device"])),
        ("javascript:alert(1)", "scheme_not_allowed", json!([])),
        ("file:///etc/passwd", "scheme_not_allowed", json!([])),
        ("www.shop.test/relative", "scheme_not_allowed", json!([])),
    ];
    for (url, reason, from) in refused {
        let outcome = nav(url).await;
        assert_eq!(
            (outcome.code(), outcome.reason()),
            ("permission_denied", reason),
            "{url}: {:?}",
            outcome.body
        );
        assert_eq!(outcome.body["error"]["data"]["from"], from, "{url}");
    }
    assert_eq!(browser.count("tool.navigate"), 2, "only the allowed ones");
    let blocked_host = nav("https://pay.shop.test/").await;
    assert_eq!(blocked_host.body["error"]["data"]["host"], "pay.shop.test");
    assert_eq!(
        blocked_host.body["error"]["data"]["pattern"],
        "pay.shop.test"
    );

    // A new tab and a recording's first page are URLs the gateway sees too.
    let tab = agent
        .call(
            &session,
            "tool.tab_create",
            json!({"url": "https://elsewhere.test"}),
        )
        .await
        .expect("answer");
    assert_eq!(tab.reason(), "site_not_allowed");
    let blank_tab = agent
        .call(&session, "tool.tab_create", json!({}))
        .await
        .expect("answer");
    assert!(blank_tab.is_ok(), "{:?}", blank_tab.body);
    let recording = agent
        .call(&session, "tool.record_start", json!({}))
        .await
        .expect("answer");
    assert_eq!(recording.reason(), "site_not_allowed", "its default page");
    assert_eq!(browser.count("tool.tab_create"), 1);
    assert_eq!(browser.count("tool.record_start"), 0);

    // The effective view says where each limit came from.
    let view = get(&admin, &format!("{path}?effective=true")).await;
    let effective = &view["effective"];
    assert_eq!(
        effective["allow_sites"],
        json!([{"from": "device", "patterns": ["*.shop.test", "docs.test"]}])
    );
    assert_eq!(
        effective["block_sites"],
        json!([{"pattern": "pay.shop.test", "from": "team"}])
    );
    assert_eq!(
        effective["schemes"],
        json!({"value": ["http", "https"], "from": []})
    );
    assert_eq!(
        view["policy"]["allow_sites"],
        json!(["*.shop.test", "docs.test"])
    );
    let plain = get(&admin, &path).await;
    assert!(plain.get("effective").is_none(), "{plain}");
}

async fn who_may_start_and_consent_reach_running_sessions(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = browser(&server).await;
    let (alpha_id, alpha) = agent(&server, "alpha").await;
    let (beta_id, beta) = agent(&server, "beta").await;
    let beta_session = beta.start(None).await.expect("start").id;

    // Beta is dropped from the team's list: its open session ends at once.
    let written = put(&admin, "/v1/admin/policy", json!({"agents": [alpha_id]})).await;
    assert_eq!(written["sessions_ended"], 1);
    let gone = beta
        .call(&beta_session, "tool.tab_list", json!({}))
        .await
        .expect("answer");
    assert_eq!(
        (gone.code(), gone.reason()),
        ("session_ended", "policy_changed")
    );
    let closed = wait_until(DEADLINE, || async {
        browser.count("tool.session_stop") == 1
    })
    .await;
    assert!(
        closed,
        "the browser closes the window: {:?}",
        browser.received_methods()
    );
    let refused = beta.try_start(None).await.expect("answer");
    assert_eq!(
        (refused.status, refused.code(), refused.reason()),
        (403, "permission_denied", "agent_not_allowed")
    );
    let alpha_session = alpha.start(None).await.expect("alpha").id;
    assert_ne!(beta_id, alpha_id);

    // The browser's owner says no more sessions: alpha's ends too.
    let path = format!("/v1/admin/devices/{device}/policy");
    let written = put(&admin, &path, json!({"consent": "deny"})).await;
    assert_eq!(written["sessions_ended"], 1);
    let gone = alpha
        .call(&alpha_session, "tool.tab_list", json!({}))
        .await
        .expect("answer");
    assert_eq!(
        (gone.code(), gone.reason()),
        ("session_ended", "policy_changed")
    );
    let refused = alpha.try_start(None).await.expect("answer");
    assert_eq!(refused.reason(), "consent_denied");
    assert_eq!(refused.body["error"]["data"]["from"], json!(["device"]));
    assert_eq!(
        browser.count("tool.session_start"),
        2,
        "refusals never reach it"
    );

    // Each decision is in the audit trail.
    let audited = wait_until(DEADLINE, || async {
        let actions = admin
            .audit_lines(100, &["action", "detail"])
            .await
            .expect("audit");
        [
            "policy.set agents:1",
            "policy.set consent:deny",
            "policy.deny agent_not_allowed",
            "policy.deny consent_denied",
            "session.end policy_changed",
        ]
        .iter()
        .all(|want| actions.iter().any(|a| a.starts_with(want)))
    })
    .await;
    assert!(
        audited,
        "{}",
        get(&admin, "/v1/admin/audit?limit=100").await
    );
}

async fn a_session_ends_at_its_time_limit(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = browser(&server).await;
    put(
        &admin,
        &format!("/v1/admin/devices/{device}/policy"),
        json!({"max_session_minutes": 30}),
    )
    .await;
    put(
        &admin,
        "/v1/admin/policy",
        json!({"max_session_minutes": 5}),
    )
    .await;
    let (_, agent) = agent(&server, "timed").await;
    let session = agent.start(None).await.expect("start").id;
    server.clock().advance(Duration::from_secs(4 * 60));
    assert!(
        agent
            .call(&session, "tool.tab_list", json!({}))
            .await
            .expect("answer")
            .is_ok()
    );
    // Past the team's five minutes (the shorter limit) the session ends.
    server.clock().advance(Duration::from_secs(61));
    let ended = wait_until(DEADLINE, || async {
        browser.count("tool.session_stop") == 1
    })
    .await;
    assert!(ended, "{:?}", browser.received_methods());
    let gone = agent
        .call(&session, "tool.tab_list", json!({}))
        .await
        .expect("answer");
    assert_eq!(
        (gone.code(), gone.reason()),
        ("session_ended", "time_limit")
    );
    let row = wait_until(DEADLINE, || async {
        get(&admin, "/v1/admin/audit?limit=20").await["events"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["action"] == "session.end" && e["detail"] == "time_limit")
    })
    .await;
    assert!(row, "session.end time_limit in the trail");
}

async fn bad_policies_are_refused_whole_and_change_nothing(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    put(
        &admin,
        "/v1/admin/policy",
        json!({"block_sites": ["a.test"]}),
    )
    .await;
    for (body, field) in [
        (
            json!({"allow_sites": ["ok.test", "bad*.test"]}),
            "allow_sites[1]",
        ),
        (json!({"schemes": ["javascript"]}), "schemes[0]"),
        (json!({"max_session_minutes": 0}), "max_session_minutes"),
        (json!({"agents": ["tok_0000000000000000"]}), "agents[0]"),
    ] {
        let (status, answer) = admin
            .raw(Method::PUT, "/v1/admin/policy", Some(body.clone()))
            .await
            .expect("answer");
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_params", "{body}");
        assert_eq!(answer["error"]["data"]["field"], field, "{body}");
    }
    let (status, answer) = admin
        .raw(
            Method::PUT,
            "/v1/admin/policy",
            Some(json!({"sites": ["a.test"]})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!("invalid_request"))
    );
    let now = get(&admin, "/v1/admin/policy").await;
    assert_eq!(now["policy"], json!({"block_sites": ["a.test"]}));
}

/// Only a browser's owner and the team's admins set its policy; another member's
/// browser, another team's browser and another team's token all answer exactly
/// like unknown ones.
async fn who_may_set_a_browsers_policy(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let as_alice = server.admin_with(&admin.member_token(&alice.id).await.expect("token"));
    let hers = server.paired_for(&alice.id).await.expect("paired").1;
    let his = server.paired_for(&bob.id).await.expect("paired").1;

    let mine = format!("/v1/me/devices/{hers}/policy");
    let set = put(&as_alice, &mine, json!({"capabilities": ["read"]})).await;
    assert_eq!(set["scope"], "device");
    let view = get(&as_alice, &format!("{mine}?effective=true")).await;
    assert_eq!(
        view["effective"]["capabilities"]["value"],
        json!(["session", "read"])
    );
    // An admin sees the same policy on her browser.
    let seen = get(&admin, &format!("/v1/admin/devices/{hers}/policy")).await;
    assert_eq!(seen["policy"], json!({"capabilities": ["read"]}));

    let unknown = "0123456789abcdef0123456789abcdef";
    let answer = |client: AdminClient, path: String| async move {
        client
            .raw(Method::PUT, &path, Some(json!({"consent": "deny"})))
            .await
            .expect("answer")
    };
    let bobs = answer(as_alice.clone(), format!("/v1/me/devices/{his}/policy")).await;
    let nobody = answer(as_alice.clone(), format!("/v1/me/devices/{unknown}/policy")).await;
    assert_eq!(bobs, nobody);
    assert_eq!(bobs.0, 404);
    // Nor the team's policy, nor the admin route.
    for path in [
        "/v1/admin/policy".to_string(),
        format!("/v1/admin/devices/{his}/policy"),
    ] {
        let (status, _) = answer(as_alice.clone(), path.clone()).await;
        assert_eq!(status, 403, "{path}");
    }
    let untouched = get(&admin, &format!("/v1/admin/devices/{his}/policy")).await;
    assert_eq!(untouched["policy"], json!({}));

    // Another team's admin: our browser and our tokens are unknown to it.
    let other = server.admin_with(&server.new_tenant("other").await.expect("tenant"));
    let ours = answer(other.clone(), format!("/v1/admin/devices/{his}/policy")).await;
    let nothing = answer(other.clone(), format!("/v1/admin/devices/{unknown}/policy")).await;
    assert_eq!(ours, nothing);
    assert_eq!(ours.0, 404);
    let (our_token, _) = agent(&server, "ours").await;
    let (status, body) = other
        .raw(
            Method::PUT,
            "/v1/admin/policy",
            Some(json!({"agents": [our_token]})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, body["error"]["data"]["field"].clone()),
        (400, json!("agents[0]"))
    );
}

backend_tests!(setters, who_may_set_a_browsers_policy);
backend_tests!(classes, each_class_is_granted_or_refused_at_either_layer);
backend_tests!(sites, sites_are_enforced_on_the_urls_the_gateway_sees);
backend_tests!(starts, who_may_start_and_consent_reach_running_sessions);
backend_tests!(time_limit, a_session_ends_at_its_time_limit);
backend_tests!(bad_input, bad_policies_are_refused_whole_and_change_nothing);
