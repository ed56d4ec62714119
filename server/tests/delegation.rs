//! Delegation tokens on the real server, both backends (docs/delegation.md): a
//! delegation narrowed to a browser, sites and classes, used as a bearer token;
//! one limited to its delegator's session; widening refused; every forged or
//! mistimed token refused (`alg: none`, HMAC with the public key, unknown `kid`,
//! wrong audience or issuer, expired, not yet valid) within the clock-skew
//! bounds; revocation by id, down the chain, and with the root API token.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use latchkey_protocol::api::Role;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, FakeAgent, TestServer, backend_tests, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

async fn agent_token(server: &TestServer, name: &str) -> (String, FakeAgent) {
    let t = server
        .admin()
        .create_token(name, Role::Agent)
        .await
        .expect("token");
    (t.view.id, server.agent(&t.token))
}

/// `POST /v1/delegations` as `agent`: status and body.
async fn delegate(agent: &FakeAgent, body: Value) -> (u16, Value) {
    let r = agent
        .request(Method::POST, "/v1/delegations", Some(&body))
        .await
        .expect("answer");
    (r.status, r.body)
}

async fn minted(agent: &FakeAgent, body: Value) -> (String, String) {
    let (status, answer) = delegate(agent, body).await;
    assert_eq!(status, 201, "{answer}");
    (
        answer["id"].as_str().expect("id").to_string(),
        answer["token"].as_str().expect("token").to_string(),
    )
}

async fn status_of(server: &TestServer, token: &str) -> u16 {
    server
        .agent(token)
        .try_start(None)
        .await
        .expect("answer")
        .status
}

async fn a_delegation_is_narrower_than_its_delegator(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let (device, browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let (_, other_browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("second");
    let (_, agent) = agent_token(&server, "main").await;
    let (id, jwt) = minted(
        &agent,
        json!({"ttl_secs": 600, "name": "researcher", "browsers": [device],
               "sites": ["*.shop.test"], "capabilities": ["read", "navigate"]}),
    )
    .await;
    assert!(id.starts_with("del_"));
    let sub = server.agent(&jwt);
    // Only its browser: the other one is not offered, even when online.
    let session = sub.start(None).await.expect("start").id;
    let call = |method: &str, params: Value| {
        let (sub, session, method) = (sub.clone(), session.clone(), method.to_string());
        async move { sub.call(&session, &method, params).await.expect("answer") }
    };
    assert!(call("tool.tab_list", json!({})).await.is_ok());
    assert!(
        call("tool.navigate", json!({"url": "https://a.shop.test/"}))
            .await
            .is_ok()
    );
    let script = call("tool.evaluate", json!({"expression": "1"})).await;
    assert_eq!(script.reason(), "capability_not_granted");
    assert_eq!(script.body["error"]["data"]["from"], json!(["delegation"]));
    let away = call("tool.navigate", json!({"url": "https://bank.test/"})).await;
    assert_eq!(away.reason(), "site_not_allowed");
    assert_eq!(browser.count("tool.evaluate"), 0);
    assert_eq!(other_browser.count("tool.session_start"), 0);
    // The audit names it under its delegator's chain.
    let actions = server
        .admin()
        .audit_lines(50, &["action", "actor"])
        .await
        .expect("audit");
    assert!(
        actions.iter().any(|a| a == "delegation.create token:main"),
        "{actions:?}"
    );

    // A child of it cannot widen any field.
    for (body, field) in [
        (
            json!({"ttl_secs": 60, "capabilities": ["read", "script"]}),
            "capabilities",
        ),
        (json!({"ttl_secs": 60, "sites": ["*.test"]}), "sites[0]"),
        (
            json!({"ttl_secs": 60, "browsers": ["0123456789abcdef0123456789abcdef"]}),
            "browsers[0]",
        ),
        (json!({"ttl_secs": 700}), "ttl_secs"),
    ] {
        let (status, answer) = delegate(&sub, body.clone()).await;
        assert_eq!(status, 403, "{body}: {answer}");
        assert_eq!(
            answer["error"]["data"]["reason"], "wider_than_delegator",
            "{body}"
        );
        assert_eq!(answer["error"]["data"]["field"], field, "{body}");
    }
    // Narrower is fine, and inherits what it leaves out.
    let (child, child_jwt) =
        minted(&sub, json!({"ttl_secs": 60, "sites": ["www.shop.test"]})).await;
    let list = agent
        .request(Method::GET, "/v1/delegations", None)
        .await
        .expect("list")
        .body;
    let child_view = list["delegations"]
        .as_array()
        .expect("list")
        .iter()
        .find(|d| d["id"] == child)
        .cloned()
        .expect("child listed");
    assert_eq!(
        child_view["scope"]["capabilities"],
        json!(["read", "navigate"])
    );
    assert_eq!(child_view["chain"].as_array().map(Vec::len), Some(3));
    assert!(child_view.get("token").is_none(), "a token is shown once");

    // Revoking the parent delegation ends the child too, and its session.
    let child_session = server
        .agent(&child_jwt)
        .start(None)
        .await
        .expect("child start")
        .id;
    let (status, _) = agent
        .request(Method::DELETE, &format!("/v1/delegations/{id}"), None)
        .await
        .map(|r| (r.status, r.body))
        .expect("revoke");
    assert_eq!(status, 200);
    assert_eq!(status_of(&server, &jwt).await, 401);
    assert_eq!(status_of(&server, &child_jwt).await, 401);
    let gone = server
        .agent(&child_jwt)
        .call(&child_session, "tool.tab_list", json!({}))
        .await
        .expect("answer");
    assert_eq!(gone.status, 401);
    let closed = wait_until(DEADLINE, || async {
        browser.count("tool.session_stop") >= 2
    })
    .await;
    assert!(closed, "{:?}", browser.received_methods());
}

async fn a_one_session_delegation_acts_only_there(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let (_, browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let (root_id, agent) = agent_token(&server, "main").await;
    let mine = agent.start(None).await.expect("start").id;
    let other = agent.start(None).await.expect("start").id;
    let (_, jwt) = minted(
        &agent,
        json!({"ttl_secs": 600, "session_id": mine, "capabilities": ["read"]}),
    )
    .await;
    let sub = server.agent(&jwt);
    assert!(
        sub.call(&mine, "tool.tab_list", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    let click = sub
        .call(&mine, "tool.press", json!({"key": "Enter"}))
        .await
        .expect("call");
    assert_eq!(click.reason(), "capability_not_granted");
    let elsewhere = sub
        .call(&other, "tool.tab_list", json!({}))
        .await
        .expect("call");
    assert_eq!(elsewhere.code(), "not_found");
    let start = sub.try_start(None).await.expect("start");
    assert_eq!(start.reason(), "session_not_delegated");
    // Someone else's session cannot be delegated: it is unknown to the caller.
    let (_, stranger) = agent_token(&server, "stranger").await;
    let (status, body) = delegate(&stranger, json!({"ttl_secs": 60, "session_id": mine})).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );

    // Revoking the root API token ends the delegation with it.
    let (status, _) = server.admin().revoke_token(&root_id).await.expect("revoke");
    assert_eq!(status, 200);
    let after = sub
        .call(&mine, "tool.tab_list", json!({}))
        .await
        .expect("call");
    assert_eq!(after.status, 401);
    assert!(browser.count("tool.tab_list") == 1);
}

/// The claims a token carries, unverified.
fn claims_of(jwt: &str) -> Value {
    let part = jwt.split('.').nth(1).expect("payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("b64")).expect("json")
}

/// The gateway's own signing key, from the store (tests only: to mint tokens
/// with claims the API would never sign).
async fn signing_key(server: &TestServer) -> (String, EncodingKey, Vec<u8>) {
    let admin = server.admin();
    let (status, jwks) = admin
        .raw(Method::GET, "/.well-known/jwks.json", None)
        .await
        .expect("jwks");
    assert_eq!(status, 200);
    let kid = jwks["keys"][0]["kid"].as_str().expect("kid").to_string();
    let keys = server.state().store.signing_keys().await.expect("keys");
    let key = keys.iter().find(|k| k.kid == kid).expect("stored");
    let der = STANDARD.decode(&key.private_key).expect("der");
    let public = URL_SAFE_NO_PAD.decode(&key.public_key).expect("public");
    (kid, EncodingKey::from_ed_der(&der), public)
}

async fn forged_and_mistimed_tokens_are_refused(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let _browser = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let (_, agent) = agent_token(&server, "main").await;
    let (id, jwt) = minted(&agent, json!({"ttl_secs": 600})).await;
    assert_eq!(status_of(&server, &jwt).await, 201, "the real one works");
    let payload = claims_of(&jwt);
    let (kid, key, public) = signing_key(&server).await;
    let sign = |claims: &Value, kid: Option<&str>| {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = kid.map(str::to_string);
        jsonwebtoken::encode(&header, claims, &key).expect("sign")
    };
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut c = payload.clone();
        edit(&mut c);
        c
    };
    let now = server.clock().now_ms() / 1000;
    assert_eq!(
        status_of(&server, &sign(&payload, Some(&kid))).await,
        201,
        "re-signed as is"
    );

    let b64 = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT", "kid": kid})),
        b64(&payload)
    );
    let hmac = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.clone());
        jsonwebtoken::encode(
            &header,
            &payload,
            &EncodingKey::from_secret(&public).expect("secret"),
        )
        .expect("hs256")
    };
    let refused: Vec<(&str, String)> = vec![
        ("alg none", none),
        ("HS256 keyed with the public key", hmac),
        ("unknown kid", sign(&payload, Some("key_0000000000000000"))),
        ("no kid", sign(&payload, None)),
        (
            "wrong audience",
            sign(&with(&|c| c["aud"] = json!("someone-else")), Some(&kid)),
        ),
        (
            "wrong issuer",
            sign(
                &with(&|c| c["iss"] = json!("https://evil.test")),
                Some(&kid),
            ),
        ),
        (
            "expired past the skew",
            sign(&with(&|c| c["exp"] = json!(now - 31)), Some(&kid)),
        ),
        (
            "not valid yet past the skew",
            sign(&with(&|c| c["nbf"] = json!(now + 60)), Some(&kid)),
        ),
        (
            "another delegation's id",
            sign(
                &with(&|c| {
                    c["sub"] = json!("del_0000000000000000");
                    c["jti"] = json!("del_0000000000000000");
                }),
                Some(&kid),
            ),
        ),
        (
            "a widened scope it was not minted with (the chain's end is not its id)",
            sign(&with(&|c| c["chain"] = json!(["tok_x"])), Some(&kid)),
        ),
        ("a tampered payload", {
            let mut parts: Vec<String> = jwt.split('.').map(String::from).collect();
            parts[1] = b64(&with(&|c| c["scope"] = json!({"capabilities": ["script"]})));
            parts.join(".")
        }),
    ];
    for (what, token) in refused {
        assert_eq!(status_of(&server, &token).await, 401, "{what}");
    }
    // Within the skew bounds, a clock a little off is fine.
    let late = sign(
        &with(&|c| {
            c["nbf"] = json!(now - 100);
            c["exp"] = json!(now - 10);
        }),
        Some(&kid),
    );
    let early = sign(&with(&|c| c["nbf"] = json!(now + 10)), Some(&kid));
    assert_eq!(status_of(&server, &late).await, 201, "expired 10 s ago");
    assert_eq!(status_of(&server, &early).await, 201, "valid in 10 s");
    // The row bounds it as well: past the minted expiry it is refused whatever
    // the claims say.
    server.clock().advance(Duration::from_secs(601));
    assert_eq!(
        status_of(
            &server,
            &sign(&with(&|c| c["exp"] = json!(now + 3600)), Some(&kid))
        )
        .await,
        401
    );
    assert!(id.starts_with("del_"));
}

async fn revocation_is_scoped_to_the_team(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let (_, agent) = agent_token(&server, "main").await;
    let (id, jwt) = minted(&agent, json!({"ttl_secs": 600})).await;
    let other = server.admin_with(&server.new_tenant("other").await.expect("tenant"));
    let theirs = other
        .raw(Method::DELETE, &format!("/v1/delegations/{id}"), None)
        .await
        .expect("answer");
    let unknown = other
        .raw(Method::DELETE, "/v1/delegations/del_0000000000000000", None)
        .await
        .expect("answer");
    assert_eq!(theirs, unknown);
    assert_eq!(theirs.0, 404);
    let _browser = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    assert_eq!(status_of(&server, &jwt).await, 201, "still live");
    // The team's admin may revoke it.
    let (status, _) = server
        .admin()
        .raw(Method::DELETE, &format!("/v1/delegations/{id}"), None)
        .await
        .expect("answer");
    assert_eq!(status, 200);
    assert_eq!(status_of(&server, &jwt).await, 401);
}

/// A rotation (another replica's, or `latchkeyd rotate-signing-key`) keeps every
/// token already handed out valid, and a token signed with the new key verifies
/// on a node that has not seen the key yet.
async fn a_rotated_key_keeps_old_tokens_valid(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let _browser = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let (_, agent) = agent_token(&server, "main").await;
    let (_, before) = minted(&agent, json!({"ttl_secs": 600})).await;
    let (old_kid, _, _) = signing_key(&server).await;
    let store = server.state().store.clone();
    let now = server.clock().now_ms();
    let fresh = latchkey_server::delegation_keys::generate(now + 1).expect("key");
    store.rotate_signing_key(&fresh).await.expect("rotate");
    // Signed elsewhere with the new key: this node reads it on the unknown kid.
    let payload = claims_of(&before);
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(fresh.kid.clone());
    let der = STANDARD.decode(&fresh.private_key).expect("der");
    let with_new =
        jsonwebtoken::encode(&header, &payload, &EncodingKey::from_ed_der(&der)).expect("sign");
    assert_eq!(status_of(&server, &with_new).await, 201);
    assert_eq!(
        status_of(&server, &before).await,
        201,
        "minted before the rotation"
    );
    let jwks = server
        .admin()
        .raw(Method::GET, "/.well-known/jwks.json", None)
        .await
        .expect("jwks")
        .1;
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k["kid"].as_str())
        .collect();
    assert_eq!(
        kids,
        vec![fresh.kid.as_str(), old_kid.as_str()],
        "newest first"
    );
    assert!(jwks["keys"][0].get("d").is_none(), "never a private half");
    // New tokens are signed with the new key.
    let (_, after) = minted(&agent, json!({"ttl_secs": 60})).await;
    let header = jsonwebtoken::decode_header(&after).expect("header");
    assert_eq!(header.kid.as_deref(), Some(fresh.kid.as_str()));
}

backend_tests!(rotation, a_rotated_key_keeps_old_tokens_valid);
backend_tests!(narrower, a_delegation_is_narrower_than_its_delegator);
backend_tests!(one_session, a_one_session_delegation_acts_only_there);
backend_tests!(forged, forged_and_mistimed_tokens_are_refused);
backend_tests!(team_scoped, revocation_is_scoped_to_the_team);
