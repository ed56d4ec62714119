//! Policies and team settings in the console on the real server, both backends
//! (docs/console.md, "Policies" and "Team settings"): what a form saves is what
//! the policy API then answers; a policy the API refuses is refused beside the
//! form as typed and changes nothing; a member edits their own browser's policy
//! only; the team's settings are the admins'; forged forms are refused.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::{Value, json};

async fn policy_of(admin: &latchkey_testkit::AdminClient, path: &str) -> Value {
    let (status, body) = admin.raw(Method::GET, path, None).await.expect("policy");
    assert_eq!(status, 200, "{body}");
    body["policy"].clone()
}

async fn a_browsers_policy_is_edited_by_its_admin_or_its_person(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("members");
    let (_hers_ext, hers) = server.paired_for(&alice.id).await.expect("paired");
    let (_his_ext, his) = server.paired_for(&bob.id).await.expect("paired");
    let agent = admin
        .create_token("booker", latchkey_protocol::api::Role::Agent)
        .await
        .expect("agent");

    // The admin narrows Alice's browser.
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let path = format!("/console/devices/{hers}/policy");
    let page = web.get(&path).await.expect("page");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("booker"),
        "the team's agents are offered"
    );
    let csrf = page.csrf().expect("csrf");
    let agent_box = format!("agent:{}", agent.view.id);
    let saved = web
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("agents_mode", "only"),
                (&agent_box, "on"),
                ("consent", "ask"),
                ("allow_sites", "example.com\r\n*.shop.example"),
                ("capabilities_mode", "only"),
                ("capability:read", "on"),
                ("max_minutes", "30"),
            ],
        )
        .await
        .expect("save");
    assert_eq!(saved.status, 303, "{}", saved.body);
    assert_eq!(saved.location(), Some(format!("{path}?saved=0").as_str()));
    let api_path = format!("/v1/admin/devices/{hers}/policy");
    let want = json!({
        "agents": [agent.view.id],
        "consent": "ask",
        "allow_sites": ["example.com", "*.shop.example"],
        "capabilities": ["read"],
        "max_session_minutes": 30,
    });
    assert_eq!(policy_of(&admin, &api_path).await, want);
    let again = web.get(&format!("{path}?saved=0")).await.expect("page");
    assert!(again.body.contains("Saved."), "{}", again.body);
    assert!(again.body.contains("*.shop.example"), "{}", again.body);

    // A policy the API refuses: shown beside the form as typed; nothing changes.
    for (field, value, says) in [
        ("allow_sites", "exa mple.com", "allow_sites"),
        ("max_minutes", "0", "max_session_minutes"),
        ("max_minutes", "ten", "max_session_minutes"),
        ("consent", "maybe", "consent"),
    ] {
        let refused = web
            .post(&path, &[("csrf", &csrf), (field, value)])
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{field}={value}: {}", refused.body);
        assert!(refused.body.contains(r#"role="alert""#), "{}", refused.body);
        assert!(refused.body.contains(says), "{says}: {}", refused.body);
        assert_eq!(policy_of(&admin, &api_path).await, want, "unchanged");
    }
    let forged = web
        .post(&path, &[("csrf", &"0".repeat(64)), ("consent", "deny")])
        .await
        .expect("answer");
    assert_eq!(forged.status, 403);
    assert_eq!(policy_of(&admin, &api_path).await, want);

    // Alice edits her own; Bob's answers as an unknown browser.
    let as_alice = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("token"))
        .await
        .expect("in");
    let page = as_alice.get(&path).await.expect("page");
    assert_eq!(page.status, 200);
    let csrf = page.csrf().expect("csrf");
    let cleared = as_alice
        .post(&path, &[("csrf", &csrf), ("consent", "deny")])
        .await
        .expect("save");
    assert_eq!(cleared.status, 303, "{}", cleared.body);
    assert_eq!(
        policy_of(&admin, &api_path).await,
        json!({"consent": "deny"})
    );
    let his_path = format!("/console/devices/{his}/policy");
    let unknown = format!("/console/devices/{}/policy", "0".repeat(32));
    let (foreign, never) = (
        as_alice.get(&his_path).await.expect("page"),
        as_alice.get(&unknown).await.expect("page"),
    );
    assert_eq!((foreign.status, never.status), (404, 404));
    let posted = as_alice
        .post(&his_path, &[("csrf", &csrf), ("consent", "allow")])
        .await
        .expect("answer");
    assert_eq!(posted.status, 404);
    assert_eq!(
        policy_of(&admin, &format!("/v1/admin/devices/{his}/policy")).await,
        json!({})
    );
    assert!(
        admin
            .audit_has(
                std::time::Duration::from_secs(10),
                &["policy.set", &format!("device:{hers}"), "consent:deny"]
            )
            .await
    );
}

backend_tests!(
    a_browsers_policy_is_edited_by_its_admin_or_its_person,
    a_browsers_policy_is_edited_by_its_admin_or_its_person
);

async fn team_settings_are_the_admins(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, _bob) = admin.alice_and_bob().await.expect("members");
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let page = web.get("/console/team").await.expect("page");
    assert_eq!(page.status, 200, "{}", page.body);
    let csrf = page.csrf().expect("csrf");

    // Retention: a number of days, blank for the default, nothing else.
    let saved = web
        .post(
            "/console/team/retention",
            &[("csrf", &csrf), ("days", "30")],
        )
        .await
        .expect("save");
    assert_eq!(saved.status, 303, "{}", saved.body);
    let (_, retention) = admin
        .raw(Method::GET, "/v1/admin/audit/retention", None)
        .await
        .expect("retention");
    assert_eq!(retention["days"], 30);
    assert_eq!(retention["is_default"], false);
    for bad in ["thirty", "0", "-1"] {
        let refused = web
            .post("/console/team/retention", &[("csrf", &csrf), ("days", bad)])
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{bad}: {}", refused.body);
        assert!(refused.body.contains("days"), "{}", refused.body);
    }
    let (_, retention) = admin
        .raw(Method::GET, "/v1/admin/audit/retention", None)
        .await
        .expect("retention");
    assert_eq!(retention["days"], 30, "unchanged");
    let reset = web
        .post("/console/team/retention", &[("csrf", &csrf), ("days", "")])
        .await
        .expect("save");
    assert_eq!(reset.status, 303);
    let (_, retention) = admin
        .raw(Method::GET, "/v1/admin/audit/retention", None)
        .await
        .expect("retention");
    assert_eq!(retention["is_default"], true);

    // The team's policy.
    let saved = web
        .post(
            "/console/team/policy",
            &[
                ("csrf", &csrf),
                ("block_sites", "bank.example"),
                ("schemes", "https"),
            ],
        )
        .await
        .expect("save");
    assert_eq!(saved.status, 303, "{}", saved.body);
    assert_eq!(
        policy_of(&admin, "/v1/admin/policy").await,
        json!({"block_sites": ["bank.example"], "schemes": ["https"]})
    );
    let refused = web
        .post(
            "/console/team/policy",
            &[("csrf", &csrf), ("schemes", "javascript")],
        )
        .await
        .expect("answer");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains(r#"value="javascript""#),
        "typed value kept: {}",
        refused.body
    );

    // A member has none of it.
    let as_alice = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("token"))
        .await
        .expect("in");
    assert_eq!(
        as_alice.get("/console/team").await.expect("page").status,
        403
    );
    let member_csrf = as_alice
        .get("/console/devices")
        .await
        .expect("page")
        .csrf()
        .expect("csrf");
    let posted = as_alice
        .post(
            "/console/team/policy",
            &[("csrf", &member_csrf), ("consent", "allow")],
        )
        .await
        .expect("answer");
    assert_eq!(posted.status, 403);
    assert_eq!(
        policy_of(&admin, "/v1/admin/policy").await,
        json!({"block_sites": ["bank.example"], "schemes": ["https"]})
    );
}

backend_tests!(team_settings_are_the_admins, team_settings_are_the_admins);
