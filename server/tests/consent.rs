//! The person's say and the browser's enforcement on the real server, both
//! backends (docs/policy.md, "Consent" and "Enforcement in the browser";
//! docs/protocol.md, "Latchkey's additions"): a start the policy asks about
//! waits for the person, shows as `consent_pending`, and ends as they answer;
//! an extension that cannot ask gets no session; site rules travel with the
//! start to an extension that enforces them (and to no other), follow a policy
//! written while the session runs, and a navigation the browser stopped
//! reaches the agent and the audit trail.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::agent::{SessionPhase, StartSessionRequest};
use latchkey_protocol::api::Role;
use latchkey_protocol::{ErrorBody, ErrorCode};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{
    Action, AdminClient, Backend, FakeAgent, FakeBrowser, TestServer, backend_tests, wait_until,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

const DEADLINE: Duration = Duration::from_secs(10);
const BOTH: &[&str] = &["site_rules", "consent"];

async fn put(admin: &AdminClient, path: &str, policy: Value) {
    let (status, body) = admin
        .raw(Method::PUT, path, Some(policy))
        .await
        .expect("answer");
    assert_eq!(status, 200, "{path}: {body}");
}

fn start_with(purpose: &str) -> StartSessionRequest {
    StartSessionRequest {
        purpose: Some(purpose.to_string()),
        ..StartSessionRequest::default()
    }
}

/// The params of the `index`-th `tool.session_start` the browser received.
fn start_params(browser: &latchkey_testkit::FakeBrowser, index: usize) -> Value {
    browser
        .received()
        .into_iter()
        .filter(|r| r.method == "tool.session_start")
        .nth(index)
        .and_then(|r| r.params)
        .expect("a session_start")
}

/// A browser that supports both additions, under a policy that asks its person
/// first (and `more`), and an agent (its token's id) named `name`.
async fn asked_browser(
    server: &TestServer,
    script: latchkey_testkit::Script,
    more: Value,
    name: &str,
) -> (FakeBrowser, String, Arc<FakeAgent>) {
    let (device, browser) = server
        .new_browser_with_features(script, BOTH)
        .await
        .expect("browser");
    let mut policy = json!({"consent": "ask"});
    if let (Some(p), Value::Object(extra)) = (policy.as_object_mut(), more) {
        p.extend(extra);
    }
    put(
        &server.admin(),
        &format!("/v1/admin/devices/{device}/policy"),
        policy,
    )
    .await;
    let token = server
        .admin()
        .create_token(name, Role::Agent)
        .await
        .expect("token");
    (browser, token.view.id, Arc::new(server.agent(&token.token)))
}

async fn a_start_the_policy_asks_about_waits_for_the_person(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    // The person answers when the test says so: yes to the first start, no to
    // the second.
    let answer = Arc::new(Notify::new());
    let gate = answer.clone();
    let script: latchkey_testkit::Script = Arc::new(move |r| {
        if r.method != "tool.session_start" {
            return None;
        }
        let purpose = r
            .params
            .as_ref()
            .and_then(|p| p["consent"]["purpose"].as_str());
        let then = if purpose == Some("compare prices") {
            Action::Reply(json!({"agent_window_id": 77, "consent": "once"}))
        } else {
            Action::Error(ErrorBody {
                code: ErrorCode::PermissionDenied,
                message: "the person said no".into(),
                data: Some(json!({"reason": "consent_denied"})),
            })
        };
        Some(Action::WaitFor(gate.clone(), Box::new(then)))
    });
    let (browser, agent_id, agent) = asked_browser(
        &server,
        script,
        json!({"capabilities": ["read", "navigate"]}),
        "shopper",
    )
    .await;

    let starting = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.start_raw(&start_with("compare prices")).await })
    };
    // The agent sees the session waiting for the person.
    let pending = wait_until(DEADLINE, || async {
        agent.sessions().await.is_ok_and(|l| {
            l.sessions
                .iter()
                .any(|s| s.phase == SessionPhase::ConsentPending && s.agent_window_id.is_none())
        })
    })
    .await;
    assert!(pending, "the start shows as consent_pending");
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_start") == 1
        })
        .await,
        "the start reached the browser"
    );
    // What the person is shown: the agent and its team, the purpose, the
    // capabilities; and how long they have.
    let params = start_params(&browser, 0);
    let consent = &params["consent"];
    assert_eq!(consent["agent"], "shopper");
    assert_eq!(consent["agent_id"], agent_id.as_str());
    assert_eq!(consent["team"], "default");
    assert_eq!(consent["purpose"], "compare prices");
    assert_eq!(
        consent["capabilities"],
        json!(["session", "read", "navigate"])
    );
    assert_eq!(consent["timeout_ms"], 60_000);
    answer.notify_one();
    let started = starting.await.expect("task").expect("answer");
    assert_eq!(started.status, 201, "{}", started.body);
    assert_eq!(started.body["phase"], "open");
    assert_eq!(started.body["agent_window_id"], 77);
    // The watcher writes the start's row off the agent's path.
    let recorded = wait_until(DEADLINE, || async {
        admin
            .audit_lines(20, &["action", "detail"])
            .await
            .is_ok_and(|audit| {
                audit.iter().any(|l| {
                    l.starts_with("session.start")
                        && l.contains("purpose:\"compare prices\"")
                        && l.contains("consent:once")
                })
            })
    })
    .await;
    assert!(
        recorded,
        "{:#?}",
        admin.audit_lines(20, &["action", "detail"]).await
    );

    // No: the agent is refused with the rule, nothing stays open, and the
    // refusal is audited.
    let refusing = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.start_raw(&start_with("something else")).await })
    };
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_start") == 2
        })
        .await
    );
    answer.notify_one();
    let refused = refusing.await.expect("task").expect("answer");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.code(), "permission_denied");
    assert_eq!(refused.reason(), "consent_denied");
    let open = agent.sessions().await.expect("list").sessions;
    assert_eq!(open.len(), 1, "only the first session is open: {open:?}");
    let denied = wait_until(DEADLINE, || async {
        admin
            .audit_lines(20, &["action", "detail"])
            .await
            .is_ok_and(|audit| {
                audit
                    .iter()
                    .any(|l| l.starts_with("policy.deny consent_denied"))
            })
    })
    .await;
    assert!(
        denied,
        "{:#?}",
        admin.audit_lines(20, &["action", "detail"]).await
    );
    // Each ask is in the trail when it is asked, naming the browser.
    let asked = admin
        .audit_lines(50, &["action", "detail"])
        .await
        .expect("audit")
        .into_iter()
        .filter(|l| l.starts_with("session.consent_requested"))
        .count();
    assert_eq!(asked, 2, "two starts, two asks");
}
backend_tests!(
    consent_ask,
    a_start_the_policy_asks_about_waits_for_the_person
);

/// A server whose team blocks `evil.test`, and a browser listing `features`.
async fn blocking_evil(
    backend: Backend,
    features: &[&str],
) -> (TestServer, AdminClient, String, FakeBrowser) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = server
        .new_browser_with_features(Arc::new(|_| None), features)
        .await
        .expect("browser");
    put(
        &admin,
        "/v1/admin/policy",
        json!({"block_sites": ["evil.test"]}),
    )
    .await;
    (server, admin, device, browser)
}

async fn an_extension_that_cannot_ask_gets_no_session(backend: Backend) {
    let (server, admin, device, browser) = blocking_evil(backend, &[]).await;
    let agent = server.new_agent().await.expect("agent");
    // A contract-only extension gets the contract's params only: no site
    // rules, no consent.
    let session = agent.start(None).await.expect("start");
    let params = start_params(&browser, 0);
    let mut keys: Vec<&str> = params
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["focused", "session_id"], "{params}");
    agent.stop(&session.id).await.expect("stop");

    put(
        &admin,
        &format!("/v1/admin/devices/{device}/policy"),
        json!({"consent": "ask"}),
    )
    .await;
    let refused = agent.try_start(None).await.expect("answer");
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.reason(), "consent_unavailable");
    assert_eq!(refused.body["error"]["data"]["from"], json!(["device"]));
    assert_eq!(
        browser.count("tool.session_start"),
        1,
        "never asked the browser"
    );
}
backend_tests!(
    consent_unavailable,
    an_extension_that_cannot_ask_gets_no_session
);

async fn site_rules_travel_with_the_start_and_follow_the_policy(backend: Backend) {
    let (server, admin, device, browser) = blocking_evil(backend, &["site_rules"]).await;
    let device_path = format!("/v1/admin/devices/{device}/policy");
    put(
        &admin,
        &device_path,
        json!({"allow_sites": ["*.shop.test", "shop.test"]}),
    )
    .await;
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("start").id;
    let params = start_params(&browser, 0);
    assert_eq!(
        params["site_rules"],
        json!({"allow_lists": [["*.shop.test", "shop.test"]], "block_sites": ["evil.test"], "schemes": ["http", "https"]})
    );
    assert!(
        params.get("consent").is_none(),
        "the policy does not ask: {params}"
    );

    // A policy written while the session runs reaches the browser's rules.
    put(
        &admin,
        &device_path,
        json!({"allow_sites": ["shop.test"], "block_sites": ["ads.shop.test"]}),
    )
    .await;
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("latchkey.session_rules") == 1
        })
        .await
    );
    let pushed = browser
        .first("latchkey.session_rules")
        .and_then(|r| r.params)
        .expect("params");
    assert_eq!(pushed["session_id"], session.as_str());
    assert_eq!(
        pushed["site_rules"],
        json!({"allow_lists": [["shop.test"]], "block_sites": ["evil.test", "ads.shop.test"], "schemes": ["http", "https"]})
    );
    // A write that leaves the rules as they were pushes nothing.
    put(
        &admin,
        "/v1/admin/policy",
        json!({"block_sites": ["evil.test"], "max_session_minutes": 600}),
    )
    .await;

    // A navigation the browser stopped: the agent hears of it, the trail keeps it.
    let mut events = agent.events(&session).await.expect("events");
    browser.event(
        "latchkey.site_blocked",
        json!({"session_id": session, "tab_id": 7, "host": "evil.test\u{202e}", "reason": "site_blocked", "pattern": "evil.test"}),
    );
    // Another device's session, and a reason that is not about sites: ignored.
    browser.event(
        "latchkey.site_blocked",
        json!({"session_id": "0123456789abcdef0123456789abcdef", "tab_id": 1, "host": "x.test", "reason": "site_blocked"}),
    );
    browser.event(
        "latchkey.site_blocked",
        json!({"session_id": session, "tab_id": 1, "host": "x.test", "reason": "agent_not_allowed"}),
    );
    let (name, data) = events.next_event().await.expect("an event");
    assert_eq!(name, "site_blocked");
    assert_eq!(
        data["host"], "evil.test",
        "cleaned of formatting characters: {data}"
    );
    assert_eq!(data["tab_id"], 7);
    assert_eq!(data["reason"], "site_blocked");
    let logged = wait_until(DEADLINE, || async {
        admin.audit_lines(20, &["action", "target", "detail"]).await.is_ok_and(|lines| {
            lines.iter().filter(|l| l.contains("browser stopped tab")).count() == 1
                && lines.iter().any(|l| {
                    l == &format!("policy.deny session:{session} browser stopped tab 7 at evil.test (site_blocked pattern:evil.test)")
                })
        })
    })
    .await;
    assert!(
        logged,
        "{:#?}",
        admin.audit_lines(20, &["action", "target", "detail"]).await
    );
    assert_eq!(
        browser.count("latchkey.session_rules"),
        1,
        "no push for unchanged rules"
    );
    agent.stop(&session).await.expect("stop");
}
backend_tests!(
    site_rules,
    site_rules_travel_with_the_start_and_follow_the_policy
);

async fn a_browser_that_does_not_take_new_rules_loses_the_session(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let script: latchkey_testkit::Script = Arc::new(|r| {
        (r.method == "latchkey.session_rules")
            .then(|| Action::Error(ErrorBody::new(ErrorCode::ProtocolError, "cannot")))
    });
    let (_, _browser) = server
        .new_browser_with_features(script, &["site_rules"])
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("start").id;
    let mut events = agent.events(&session).await.expect("events");
    put(
        &admin,
        "/v1/admin/policy",
        json!({"block_sites": ["evil.test"]}),
    )
    .await;
    let (name, data) = events.next_event().await.expect("an event");
    assert_eq!(
        (name.as_str(), data["reason"].as_str()),
        ("session_ended", Some("policy_changed"))
    );
}
backend_tests!(
    rules_not_taken,
    a_browser_that_does_not_take_new_rules_loses_the_session
);

async fn a_token_revoked_while_the_person_is_asked_ends_the_wait(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    // The person never answers; only the gateway's cancel ends the prompt.
    let script: latchkey_testkit::Script =
        Arc::new(|r| (r.method == "tool.session_start").then_some(Action::Never));
    let (browser, token_id, agent) = asked_browser(&server, script, json!({}), "revoked").await;
    let starting = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.try_start(None).await })
    };
    assert!(
        wait_until(DEADLINE, || async {
            browser.count("tool.session_start") == 1
        })
        .await
    );
    let (status, _) = admin.revoke_token(&token_id).await.expect("revoke");
    assert_eq!(status, 200);
    let answer = tokio::time::timeout(DEADLINE, starting)
        .await
        .expect("the start stops waiting at once")
        .expect("task")
        .expect("answer");
    assert_eq!(answer.code(), "token_revoked", "{}", answer.body);
    // The browser was told to stop asking.
    assert!(wait_until(DEADLINE, || async { browser.count("cancel") == 1 }).await);
}
backend_tests!(
    revoked_while_asked,
    a_token_revoked_while_the_person_is_asked_ends_the_wait
);
