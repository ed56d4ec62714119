//! Events and teardown: window closed, user interrupt and its gate, stop while busy,
//! stop with tabs that could not be returned, the idle reaper, start timeouts.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use latchkey_testkit::{Action, Backend, FakeAgent, FakeBrowser, Script, TestServer, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

fn hang_script() -> Script {
    latchkey_testkit::browser::never_answers("tool.hang")
}

async fn wait_received(browser: &FakeBrowser, method: &str, n: usize) -> bool {
    wait_until(DEADLINE, || async { browser.count(method) >= n }).await
}

/// Read server-sent events until `n` have arrived; returns their JSON data.
async fn read_events(
    _server: &TestServer,
    agent: &FakeAgent,
    session: &str,
    n: usize,
) -> tokio::task::JoinHandle<Vec<Value>> {
    let mut stream = agent.events(session).await.expect("events");
    tokio::spawn(async move {
        let mut events = Vec::new();
        while events.len() < n {
            match stream.next().await.expect("event in time") {
                Some((_, data)) => events.push(data),
                None => break,
            }
        }
        events
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_closed_drops_the_session_without_a_stop() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(hang_script()).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let events = read_events(&server, &agent, &s.id, 2).await;

    // An event for a session of another device (or an unknown one) is ignored.
    browser.event(
        "session.window_closed",
        json!({"session_id": "someone-else", "reason": "user_closed_window"}),
    );
    browser.event(
        "session.window_closed",
        json!({"session_id": s.id, "reason": "user_closed_window"}),
    );
    let events = events.await.expect("events");
    assert_eq!(events[0]["type"], "window_closed");
    assert_eq!(events[1]["type"], "session_ended");
    assert_eq!(events[1]["reason"], "window_closed");
    let r = agent
        .call(&s.id, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!((r.code(), r.reason()), ("session_ended", "window_closed"));
    assert_eq!(
        browser.count("tool.session_stop"),
        0,
        "no stop for a window already gone"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_interrupt_aborts_and_gates_the_next_mutation() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(hang_script()).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let events = read_events(&server, &agent, &s.id, 1).await;

    let in_flight = agent.spawn_call(&s.id, "tool.hang", json!({}));
    assert!(wait_received(&browser, "tool.hang", 1).await);
    browser.event("session.user_interrupt", json!({"session_id": s.id}));
    let aborted = in_flight.await.expect("join");
    assert_eq!((aborted.status, aborted.code()), (409, "user_aborted"));
    assert!(
        wait_received(&browser, "cancel", 1).await,
        "the forwarded call is cancelled"
    );
    assert_eq!(events.await.expect("events")[0]["type"], "user_interrupt");

    // Wait until the cancelled call has released the session.
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .sessions()
                .await
                .map(|l| l.sessions.iter().all(|s| !s.busy))
                .unwrap_or(false)
        })
        .await
    );
    // Passive reads pass without consuming the marker; the next mutation is refused
    // without being forwarded; the one after goes through.
    assert!(
        agent
            .call(&s.id, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    let gated = agent
        .call(&s.id, "tool.click", json!({"ref": "e1"}))
        .await
        .expect("call");
    assert_eq!((gated.status, gated.code()), (409, "user_aborted"));
    assert_eq!(
        browser.count("tool.click"),
        0,
        "a gated call is not forwarded"
    );
    assert!(
        agent
            .call(&s.id, "tool.click", json!({"ref": "e1"}))
            .await
            .expect("call")
            .is_ok()
    );
    assert_eq!(browser.count("tool.click"), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_while_busy_cancels_then_stops() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(hang_script()).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let in_flight = agent.spawn_call(&s.id, "tool.hang", json!({}));
    assert!(wait_received(&browser, "tool.hang", 1).await);
    let stopped = agent.stop(&s.id).await.expect("stop");
    assert!(stopped.stopped);
    let r = in_flight.await.expect("join");
    assert_eq!(r.code(), "cancelled");
    let methods = browser.received_methods();
    let cancel = methods
        .iter()
        .position(|m| m == "cancel")
        .expect("cancel sent");
    let stop = methods
        .iter()
        .position(|m| m == "tool.session_stop")
        .expect("stop sent");
    assert!(
        cancel < stop,
        "the in-flight call is cancelled before the stop: {methods:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_with_unreturned_tabs_keeps_the_session() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let stops = Arc::new(AtomicUsize::new(0));
    let counter = stops.clone();
    let script: Script = Arc::new(move |r| {
        (r.method == "tool.session_stop").then(|| {
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                Action::Reply(json!({"returned_tab_ids": [4], "return_failures": [{"tab_id": 7, "code": "cdp_failed", "message": "window gone"}]}))
            } else {
                Action::Reply(json!({"returned_tab_ids": [7]}))
            }
        })
    });
    let (_device, _browser) = server.new_browser(script).await.expect("browser");
    let s = agent.start(None).await.expect("start");
    let first = agent.stop(&s.id).await.expect("stop");
    assert!(!first.stopped);
    assert_eq!(first.return_failures[0].tab_id, 7);
    assert!(
        agent
            .call(&s.id, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok(),
        "still usable"
    );
    let second = agent.stop(&s.id).await.expect("retry");
    assert!(second.stopped);
    assert_eq!(second.returned_tab_ids, vec![7]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_reaped_busy_ones_are_not() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.session_idle_timeout_ms = 300;
            l.session_reaper_interval_ms = 50;
        })
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server.new_browser(hang_script()).await.expect("browser");
    let idle = agent.start(None).await.expect("idle");
    let busy = agent.start(None).await.expect("busy");
    let events = read_events(&server, &agent, &idle.id, 1).await;
    let _hang = agent.spawn_call(&busy.id, "tool.hang", json!({}));
    let ended = events.await.expect("events");
    assert_eq!(ended[0]["type"], "session_ended");
    assert_eq!(ended[0]["reason"], "idle");
    assert_eq!(
        browser.count("tool.session_stop"),
        1,
        "only the idle session was stopped"
    );
    let listed = agent.sessions().await.expect("list").sessions;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, busy.id);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_start_is_rolled_back() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.session_start_timeout_ms = 200)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let script: Script = Arc::new(|r| {
        (r.method == "tool.session_start").then(|| {
            Action::Stubborn(
                Duration::from_millis(400),
                Box::new(Action::Reply(json!({"agent_window_id": 9}))),
            )
        })
    });
    let (_device, browser) = server.new_browser(script).await.expect("browser");
    let r = agent.start_raw(&Default::default()).await.expect("start");
    assert_eq!((r.status, r.code()), (504, "timeout"));
    assert!(wait_received(&browser, "cancel", 1).await);
    assert!(
        wait_received(&browser, "tool.session_stop", 1).await,
        "the late window is closed again"
    );
    let start = browser.first("tool.session_start").expect("start");
    let stop = browser.first("tool.session_stop").expect("stop");
    assert_eq!(
        start.params.expect("p")["session_id"],
        stop.params.expect("p")["session_id"]
    );
    assert!(agent.sessions().await.expect("list").sessions.is_empty());

    // A start the extension really cancels is not "rolled back": no stop is sent.
    let (device2_id, browser2) = server
        .new_browser(Arc::new(|r| {
            (r.method == "tool.session_start").then(|| {
                Action::Delay(
                    Duration::from_millis(400),
                    Box::new(Action::Reply(json!({"agent_window_id": 9}))),
                )
            })
        }))
        .await
        .expect("browser");
    let device2 = device2_id.clone();
    let r = agent
        .start_raw(&latchkey_protocol::agent::StartSessionRequest {
            browser_id: Some(device2),
            ..Default::default()
        })
        .await
        .expect("start");
    assert_eq!(r.code(), "timeout");
    assert!(wait_received(&browser2, "cancel", 1).await);
    // The session id of that start is known to nobody: a new session proves the
    // device is still usable, and no stop for the cancelled start ever arrived.
    let s = agent.start(Some(&device2_id)).await;
    assert!(s.is_err(), "the second start times out too (same script)");
    assert_eq!(browser2.count("tool.session_stop"), 0);
    server.stop().await;
}
