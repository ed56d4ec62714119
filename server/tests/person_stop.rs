//! The person's controls reach the agent, on the real server, both backends
//! (docs/sessions.md, "How a session ends"): Stop ends the session with
//! `user_stopped` (the call in flight, the event stream and every later call
//! say so), "Stop all agents" says `kill_switch` the same way, another token
//! still learns nothing, interrupt presses flooding in are audited only up to the
//! bound, and an extension that shows its person who drives a session is told
//! the agent at the start and the reason at the stop.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::ErrorBody;
use latchkey_testkit::{
    Action, AdminClient, Backend, SessionOnBrowser, TestServer, backend_tests,
    browser::never_answers, wait_until,
};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);
use latchkey_testkit::admin::AUDIT_FIELDS as FIELDS;

/// A request's param, `null` when absent.
fn param(params: &Option<Value>, key: &str) -> Value {
    params
        .as_ref()
        .and_then(|p| p.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

async fn lines(admin: &AdminClient) -> Vec<String> {
    admin.audit_lines(500, &FIELDS).await.expect("audit")
}

/// Whether the trail comes to have a row with every one of `parts`.
async fn logged(admin: &AdminClient, parts: &[&str]) -> bool {
    admin.audit_has(DEADLINE, parts).await
}

async fn stop_ends_the_session_and_every_later_call_says_why(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let SessionOnBrowser {
        browser,
        agent,
        session,
        ..
    } = server
        .session_on_new_browser(never_answers("tool.click"))
        .await
        .expect("a session");
    let stranger = server.new_agent().await.expect("another agent");
    let mut events = agent.events(&session).await.expect("events");
    let in_flight = agent.spawn_call(&session, "tool.click", json!({"ref": "e1"}));
    assert!(wait_until(DEADLINE, || async { browser.count("tool.click") == 1 }).await);

    browser.event("latchkey.user_stop", json!({"session_id": session}));
    let answered = in_flight.await.expect("join");
    assert_eq!(
        (answered.status, answered.code(), answered.reason()),
        (410, "session_ended", "user_stopped"),
        "{answered:?}"
    );
    let (name, data) = events.next_event().await.expect("an event");
    assert_eq!(
        (name.as_str(), data["reason"].as_str()),
        ("session_ended", Some("user_stopped"))
    );
    let later = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (later.status, later.code(), later.reason()),
        (410, "session_ended", "user_stopped")
    );
    assert!(
        later.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the browser's person stopped it")),
        "{later:?}"
    );
    // Another token hears exactly what it would for an id that never existed.
    let foreign = stranger
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    let unknown = stranger
        .call("zzzz", "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!((foreign.status, foreign.code()), (404, "not_found"));
    assert_eq!(foreign.body, unknown.body);
    // The extension already ended it: no `tool.session_stop` is sent.
    assert_eq!(browser.count("tool.session_stop"), 0);
    let target = format!("session:{session}");
    assert!(
        logged(&admin, &["session.end", &target, "user_stopped"]).await,
        "{:#?}",
        lines(&admin).await
    );
    // Only this device's sessions: a Stop for another's is ignored.
    let (other_device, other) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let kept = agent.start(Some(&other_device)).await.expect("start").id;
    browser.event("latchkey.user_stop", json!({"session_id": kept}));
    browser.event("session.user_interrupt", json!({"session_id": kept}));
    browser.event("system.heartbeat", json!({}));
    let still = agent
        .call(&kept, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(still.is_ok(), "{still:?}");
    drop(other);
}
backend_tests!(
    user_stop,
    stop_ends_the_session_and_every_later_call_says_why
);

async fn the_kill_switch_reaches_the_call_in_flight_and_later_calls(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let SessionOnBrowser {
        browser,
        agent,
        session,
        ..
    } = server
        .session_on_new_browser(never_answers("tool.click"))
        .await
        .expect("a session");
    let in_flight = agent.spawn_call(&session, "tool.click", json!({"ref": "e1"}));
    assert!(wait_until(DEADLINE, || async { browser.count("tool.click") == 1 }).await);
    browser.event("latchkey.kill_switch", json!({}));
    browser.drop_connection();
    let answered = in_flight.await.expect("join");
    assert_eq!(
        (answered.code(), answered.reason()),
        ("session_ended", "kill_switch"),
        "{answered:?}"
    );
    let later = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (later.code(), later.reason()),
        ("session_ended", "kill_switch")
    );
}
backend_tests!(
    kill_switch,
    the_kill_switch_reaches_the_call_in_flight_and_later_calls
);

async fn interrupt_presses_are_audited_up_to_the_bound(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let SessionOnBrowser {
        browser,
        agent,
        session,
        ..
    } = server
        .session_on_new_browser(Arc::new(|_| None))
        .await
        .expect("a session");
    let mut events = agent.events(&session).await.expect("events");
    for _ in 0..30 {
        browser.event("session.user_interrupt", json!({"session_id": session}));
    }
    // Every press reached the agent, in order after the ones before it.
    for _ in 0..30 {
        let (name, _) = events.next_event().await.expect("an event");
        assert_eq!(name, "user_interrupt");
    }
    // Each press's row was handed to the trail before its event went out, so
    // all 30 were offered before the stop's round trip to the browser.
    agent.stop(&session).await.expect("stop");
    let target = format!("session:{session}");
    assert!(logged(&admin, &["session.end", &target, "stopped"]).await);
    let rows = lines(&admin)
        .await
        .iter()
        .filter(|l| l.contains("session.interrupt") && l.contains(&target))
        .count();
    assert_eq!(rows, 20, "{:#?}", lines(&admin).await);
}
backend_tests!(
    interrupt_bound,
    interrupt_presses_are_audited_up_to_the_bound
);

async fn an_extension_that_shows_the_agent_hears_who_and_why(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (device, browser) = server
        .new_browser_with_features(
            Arc::new(|r| {
                (r.method == "tool.tab_borrow").then(|| {
                    let tab = param(&r.params, "tab_id").as_i64();
                    let reason = if tab == Some(1) {
                        "borrow_timed_out"
                    } else {
                        "made_up"
                    };
                    Action::Error(ErrorBody::with_reason(
                        latchkey_protocol::ErrorCode::Cancelled,
                        "tab_borrow cancelled by user",
                        reason,
                    ))
                })
            }),
            &["agent_info"],
        )
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let started = agent
        .start_raw(&latchkey_protocol::agent::StartSessionRequest {
            browser_id: Some(device.clone()),
            purpose: Some("Book the <b>train</b>".into()),
            ..Default::default()
        })
        .await
        .expect("start");
    assert_eq!(started.status, 201, "{started:?}");
    let session = started.body["id"].as_str().expect("id").to_string();
    let start = browser.first("tool.session_start").expect("a start");
    let who = param(&start.params, "agent");
    assert_eq!(who["purpose"], "Book the <b>train</b>");
    assert!(who["name"].as_str().is_some_and(|n| !n.is_empty()), "{who}");
    assert!(who["team"].as_str().is_some_and(|n| !n.is_empty()), "{who}");
    assert!(
        who["agent_id"].as_str().is_some_and(|n| !n.is_empty()),
        "{who}"
    );

    // A borrow the person let time out, and one with a reason nobody listed.
    for tab in [1, 2] {
        let r = agent
            .call(&session, "tool.tab_borrow", json!({"tab_id": tab}))
            .await
            .expect("call");
        assert_eq!(r.code(), "cancelled");
    }
    agent.stop(&session).await.expect("stop");
    let stop = browser.first("tool.session_stop").expect("a stop");
    assert_eq!(param(&stop.params, "reason"), "stopped");
    assert!(
        logged(
            &admin,
            &["session.call", "tool.tab_borrow", "reason:borrow_timed_out"]
        )
        .await
    );
    let all = lines(&admin).await;
    assert!(!all.iter().any(|l| l.contains("made_up")), "{all:#?}");

    // A contract-only extension is told neither.
    let (plain, plain_browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let other = agent.start(Some(&plain)).await.expect("start").id;
    agent.stop(&other).await.expect("stop");
    let start = plain_browser.first("tool.session_start").expect("a start");
    assert!(param(&start.params, "agent").is_null(), "{start:?}");
    let stop = plain_browser.first("tool.session_stop").expect("a stop");
    assert!(param(&stop.params, "reason").is_null(), "{stop:?}");
}
backend_tests!(
    agent_info,
    an_extension_that_shows_the_agent_hears_who_and_why
);
