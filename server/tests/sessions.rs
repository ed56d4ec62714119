//! The session multiplexer over real sockets: sessions on a scripted extension,
//! per-session serialisation, deadlines and cancellation, events, ownership.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::agent::{CallRequest, StartSessionRequest};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Action, Backend, FakeBrowser, Script, TestServer, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

/// `tool.hang` never answers; `tool.slow` answers after 400 ms; the rest default.
fn script() -> Script {
    Arc::new(|r| match r.method.as_str() {
        "tool.hang" => Some(Action::Never),
        "tool.slow" => Some(Action::Delay(
            Duration::from_millis(400),
            Box::new(Action::Reply(json!({"slow": true}))),
        )),
        "tool.nope" => Some(Action::Error(latchkey_protocol::ErrorBody::new(
            latchkey_protocol::ErrorCode::UnknownMethod,
            "tool.nope not implemented in extension",
        ))),
        _ => None,
    })
}

async fn wait_received(browser: &FakeBrowser, method: &str, n: usize) -> bool {
    wait_until(DEADLINE, || async { browser.count(method) >= n }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_call_stop() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (device, browser) = server.new_browser(script()).await.expect("browser");

    let browsers = agent.browsers().await.expect("browsers").browsers;
    assert_eq!(browsers.len(), 1);
    assert!(browsers[0].online);
    assert_eq!(browsers[0].id, device);

    let session = agent.start(None).await.expect("start");
    assert_eq!(session.browser_id, device);
    assert!(session.agent_window_id.is_some());
    assert_eq!(session.id.len(), 32, "unguessable: 128 random bits");
    let start = browser.first("tool.session_start").expect("start sent");
    assert_eq!(
        start.params.expect("params")["session_id"],
        session.id.as_str()
    );

    let r = agent
        .call(
            &session.id,
            "tool.navigate",
            json!({"url": "http://127.0.0.1/", "timeout_ms": 5000}),
        )
        .await
        .expect("call");
    assert!(r.is_ok(), "{:?}", r.body);
    let echo = &r.result()["echo"];
    assert_eq!(
        echo["session_id"],
        session.id.as_str(),
        "the gateway fills in session_id"
    );
    assert_eq!(echo["url"], "http://127.0.0.1/");
    assert_eq!(echo["timeout_ms"], 5000, "params pass through unchanged");

    // An unknown method reaches the extension, which answers unknown_method.
    let r = agent
        .call(&session.id, "tool.nope", json!({}))
        .await
        .expect("call");
    assert_eq!((r.status, r.code()), (400, "unknown_method"));

    // wait_ms is the gateway's own: answered, never forwarded.
    let r = agent
        .call(&session.id, "tool.wait_ms", json!({"duration_ms": 20}))
        .await
        .expect("call");
    assert_eq!(r.result()["waited_ms"], 20);
    assert_eq!(browser.count("tool.wait_ms"), 0);

    assert_eq!(agent.sessions().await.expect("list").sessions.len(), 1);
    let stopped = agent.stop(&session.id).await.expect("stop");
    assert!(stopped.stopped);
    assert_eq!(browser.count("tool.session_stop"), 1);
    let r = agent
        .call(&session.id, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (r.status, r.code(), r.reason()),
        (410, "session_ended", "stopped")
    );
    assert!(agent.sessions().await.expect("list").sessions.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_are_refused_before_forwarding() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(script()).await.expect("browser");
    let session = agent.start(None).await.expect("start");
    let cases = [
        (
            json!({"method": "tool.click", "params": [1]}),
            "invalid_params",
        ),
        (
            json!({"method": "tool.click", "params": {}, "timeout_ms": 0}),
            "invalid_params",
        ),
        (
            json!({"method": "tool.click", "params": {}, "timeout_ms": 600_001}),
            "invalid_params",
        ),
        (
            json!({"method": "tool.click", "params": {"timeout_ms": "soon"}}),
            "invalid_params",
        ),
        (json!({"method": "system.status"}), "invalid_params"),
        (json!({"method": "tool.session_stop"}), "invalid_params"),
        (
            json!({"method": "tool.wait_ms", "params": {"duration_ms": 300_001}}),
            "invalid_params",
        ),
        (
            json!({"method": "tool.click", "extra": 1}),
            "invalid_request",
        ),
    ];
    for (body, code) in cases {
        let r = agent
            .request(
                Method::POST,
                &format!("/v1/sessions/{}/calls", session.id),
                Some(&body),
            )
            .await
            .expect("req");
        assert_eq!((r.status, r.code()), (400, code), "{body}");
    }
    let forwarded: Vec<String> = browser
        .received_methods()
        .into_iter()
        .filter(|m| m != "tool.session_start")
        .collect();
    assert!(
        forwarded.is_empty(),
        "nothing bad was forwarded: {forwarded:?}"
    );
    let bad_size = StartSessionRequest {
        width: Some(50),
        height: Some(600),
        ..Default::default()
    };
    let r = agent.start_raw(&bad_size).await.expect("start");
    assert_eq!((r.status, r.code()), (400, "invalid_params"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_at_a_time_per_session_and_sessions_in_parallel() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(script()).await.expect("browser");
    let a = agent.start(None).await.expect("a");
    let b = agent.start(None).await.expect("b");

    let slow = agent.spawn_call(&a.id, "tool.slow", json!({}));
    assert!(wait_received(&browser, "tool.slow", 1).await);
    let busy = agent
        .call(&a.id, "tool.click", json!({"ref": "e1"}))
        .await
        .expect("call");
    assert_eq!(
        (busy.status, busy.code(), busy.reason()),
        (504, "timeout", "session_busy")
    );
    let exempt = agent
        .call(&a.id, "tool.record_stop", json!({}))
        .await
        .expect("call");
    assert!(exempt.is_ok(), "record_stop skips the busy lock");
    let parallel = agent
        .call(&b.id, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(parallel.is_ok(), "another session runs in parallel");
    assert!(slow.await.expect("join").is_ok());
    assert!(
        agent
            .call(&a.id, "tool.click", json!({"ref": "e1"}))
            .await
            .expect("call")
            .is_ok()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_sends_cancel_and_frees_the_session() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(script()).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let call = CallRequest {
        method: "tool.hang".into(),
        params: Some(json!({})),
        timeout_ms: Some(200),
    };
    let r = agent.call_with(&s.id, &call).await.expect("call");
    assert_eq!((r.status, r.code()), (504, "timeout"));
    assert!(
        wait_received(&browser, "cancel", 1).await,
        "the deadline sends cancel"
    );
    let hang = browser.first("tool.hang").expect("hang");
    let cancel = browser.first("cancel").expect("cancel");
    assert_eq!(
        cancel.params.expect("params")["rpc_id"],
        hang.id.as_str(),
        "cancel names the forwarded id"
    );
    assert_eq!(cancel.id, format!("cancel-{}", hang.id));
    // The extension's final `cancelled` frees the session.
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .call(&s.id, "tool.snapshot", json!({}))
                .await
                .map(|r| r.is_ok())
                .unwrap_or(false)
        })
        .await
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_going_away_cancels_its_call() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(script()).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let impatient = latchkey_testkit::http_builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let url = format!("{}/v1/sessions/{}/calls", server.http_base(), s.id);
    let gone = impatient
        .post(url)
        .bearer_auth(&agent.token)
        .json(&json!({"method": "tool.hang", "params": {}}))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up");
    assert!(
        wait_received(&browser, "cancel", 1).await,
        "a vanished agent's call is cancelled"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_belong_to_their_token_and_tenant() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let owner = server.new_agent().await.expect("agent");
    let other = server.new_agent().await.expect("agent");
    let (device, _browser) = server.new_browser(script()).await.expect("browser");
    let s = owner.start(None).await.expect("start");
    let stranger = server.agent(&server.new_tenant("beta").await.expect("tenant"));
    for agent in [&other, &stranger] {
        let r = agent
            .call(&s.id, "tool.snapshot", json!({}))
            .await
            .expect("call");
        let unknown = agent
            .call(
                "00000000000000000000000000000000",
                "tool.snapshot",
                json!({}),
            )
            .await
            .expect("call");
        assert_eq!(
            (r.status, &r.body),
            (unknown.status, &unknown.body),
            "foreign session = unknown session"
        );
        assert_eq!(r.code(), "not_found");
        assert_eq!(agent.stop_raw(&s.id).await.expect("stop").status, 404);
        assert!(agent.sessions().await.expect("list").sessions.is_empty());
    }
    // Another tenant cannot even see or pick the browser.
    assert!(
        stranger
            .browsers()
            .await
            .expect("browsers")
            .browsers
            .is_empty()
    );
    let r = stranger
        .start_raw(&StartSessionRequest {
            browser_id: Some(device),
            ..Default::default()
        })
        .await
        .expect("start");
    assert_eq!((r.status, r.code()), (404, "not_found"));
    let r = stranger
        .start_raw(&StartSessionRequest::default())
        .await
        .expect("start");
    assert_eq!((r.status, r.code()), (409, "no_browser_connected"));
    // The tenant's admin sees and can stop every session of the tenant.
    let (status, list) = server
        .admin()
        .raw(Method::GET, "/v1/admin/sessions", None)
        .await
        .expect("list");
    assert_eq!(status, 200);
    assert_eq!(list["sessions"].as_array().expect("sessions").len(), 1);
    let (status, _) = server
        .admin()
        .raw(
            Method::DELETE,
            &format!("/v1/admin/sessions/{}", s.id),
            None,
        )
        .await
        .expect("stop");
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_choice() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let r = agent
        .start_raw(&StartSessionRequest::default())
        .await
        .expect("start");
    assert_eq!((r.status, r.code()), (409, "no_browser_connected"));
    let (a, ba) = server.new_browser(script()).await.expect("a");
    let (b, bb) = server.new_browser(script()).await.expect("b");
    let r = agent
        .start_raw(&StartSessionRequest::default())
        .await
        .expect("start");
    assert_eq!((r.status, r.code()), (409, "multiple_browsers_online"));
    let mut listed: Vec<String> =
        serde_json::from_value(r.body["error"]["data"]["browsers"].clone()).expect("browsers");
    listed.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(
        agent.start(Some(&b)).await.expect("start on b").browser_id,
        b
    );
    // With both gone, the refusal names them, last seen first, for the agent to
    // ask the person to open one.
    ba.drop_connection();
    bb.drop_connection();
    let offline = wait_until(Duration::from_secs(10), || async {
        agent
            .browsers()
            .await
            .is_ok_and(|l| l.browsers.iter().all(|x| !x.online))
    })
    .await;
    assert!(offline);
    let r = agent
        .start_raw(&StartSessionRequest::default())
        .await
        .expect("start");
    assert_eq!((r.status, r.code()), (409, "no_browser_connected"));
    let seen = r.body["error"]["data"]["last_seen"]
        .as_array()
        .expect("last_seen")
        .clone();
    let mut ids: Vec<&str> = seen.iter().filter_map(|x| x["id"].as_str()).collect();
    ids.sort_unstable();
    let mut expected = [a.as_str(), b.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    assert!(seen.iter().all(|x| x["last_seen_at"].is_string()));
    let message = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("no browser is online; open one of these:") && message.contains(&a)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reply_never_reaches_another_caller() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let script: Script = Arc::new(|r| match r.method.as_str() {
        // Finishes after the deadline and ignores the cancel (the work was done).
        "tool.late" => Some(Action::Stubborn(
            Duration::from_millis(500),
            Box::new(Action::Reply(json!({"late": true}))),
        )),
        _ => None,
    });
    let (_device, browser) = server.new_browser(script).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let call = CallRequest {
        method: "tool.late".into(),
        params: Some(json!({})),
        timeout_ms: Some(100),
    };
    let r = agent.call_with(&s.id, &call).await.expect("call");
    assert_eq!(r.code(), "timeout");
    // Until the late answer (or the grace) the session stays busy.
    let busy = agent
        .call(&s.id, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(busy.reason(), "session_busy");
    assert!(wait_received(&browser, "cancel", 1).await);
    // Once free, every answer is the caller's own.
    assert!(
        wait_until(DEADLINE, || async {
            let r = agent
                .call(&s.id, "tool.snapshot", json!({"n": 1}))
                .await
                .expect("call");
            if r.is_ok() {
                assert!(
                    r.result().get("late").is_none(),
                    "a late reply reached another caller"
                );
                assert_eq!(r.result()["echo"]["n"], 1);
            }
            r.is_ok()
        })
        .await
    );
    server.stop().await;
}
