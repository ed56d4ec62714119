//! Many sessions at once: 50 sessions over 5 devices and 3 tenants with concurrent
//! calls, each answer reaching exactly its caller; 100 calls in flight when the device
//! is revoked, disconnected or replaced; the per-device in-flight cap.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_server::auth::bootstrap::create_tenant;
use latchkey_testkit::{
    Action, Backend, FakeAgent, FakeBrowser, Script, TestServer, backend_tests, wait_until,
};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

/// Answers after a short, varying delay so answers interleave on the socket.
fn echo_script() -> Script {
    Arc::new(|r| {
        if r.method.starts_with("tool.session_") {
            return None;
        }
        let nonce = r
            .params
            .as_ref()
            .and_then(|p| p["nonce"].as_u64())
            .unwrap_or(0);
        Some(Action::Delay(
            Duration::from_millis(nonce % 7),
            Box::new(Action::Reply(json!({ "echo": r.params }))),
        ))
    })
}

async fn fifty_sessions(backend: Backend) {
    // Up to 17 sessions share one device here; let them all be in flight at once.
    let server = TestServer::builder(backend)
        .limits(|l| {
            l.authorize_per_minute = 60_000;
            l.max_calls_in_flight_per_device = 32;
            // Sessions at this scale: the caps are tested in session_caps.rs.
            l.max_sessions_per_device = 64;
            l.max_sessions_per_token = 64;
        })
        .start()
        .await
        .expect("server");
    // Three tenants: default plus two more, each with its own admin and agent.
    let mut agents_by_tenant: Vec<(FakeAgent, Vec<String>, Vec<FakeBrowser>)> = Vec::new();
    let store = server.state().store.clone();
    for (i, name) in ["default", "beta", "gamma"].iter().enumerate() {
        let admin = if i == 0 {
            server.admin()
        } else {
            let t = create_tenant(store.as_ref(), name, server.clock().now_ms())
                .await
                .expect("tenant");
            server.admin_with(&t.admin_token)
        };
        let token = admin
            .create_token("agent", latchkey_protocol::api::Role::Agent)
            .await
            .expect("token");
        let agent = server.agent(&token.token);
        let devices = if i == 0 { 1 } else { 2 };
        let mut ids = Vec::new();
        let mut browsers = Vec::new();
        for _ in 0..devices {
            let pairing = admin.create_pairing(None, None).await.expect("pairing");
            let mut ext = latchkey_testkit::FakeExtension::from_link(
                &pairing.link,
                server.http.clone(),
                None,
            )
            .expect("link");
            let grant = ext.pair().await.expect("pair");
            let socket = ext.connect_online().await.expect("online");
            ids.push(grant.device_id);
            browsers.push(FakeBrowser::serve(socket, echo_script()));
        }
        agents_by_tenant.push((agent, ids, browsers));
    }
    // 50 sessions spread over the 5 devices.
    let mut sessions = Vec::new();
    for n in 0..50usize {
        let (agent, ids, _) = &agents_by_tenant[n % 3];
        let device = &ids[n % ids.len()];
        let s = agent.start(Some(device)).await.expect("start");
        sessions.push((n % 3, s.id, device.clone()));
    }
    // Every session calls 4 times, all sessions concurrently.
    let mut tasks = Vec::new();
    for (tenant, session, _) in sessions.iter().cloned() {
        let agent = agents_by_tenant[tenant].0.clone();
        tasks.push(tokio::spawn(async move {
            for k in 0..4u64 {
                let nonce = rand_nonce(&session, k);
                let r = agent
                    .call(&session, "tool.snapshot", json!({ "nonce": nonce }))
                    .await
                    .expect("call");
                assert!(r.is_ok(), "{:?}", r.body);
                assert_eq!(
                    r.result()["echo"]["nonce"],
                    nonce,
                    "an answer reached the wrong caller"
                );
                assert_eq!(r.result()["echo"]["session_id"], session.as_str());
            }
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    // Every device saw exactly its own sessions' calls.
    for (_, ids, browsers) in &agents_by_tenant {
        for (device, browser) in ids.iter().zip(browsers) {
            let mine: Vec<&String> = sessions
                .iter()
                .filter(|(_, _, d)| d == device)
                .map(|(_, s, _)| s)
                .collect();
            let calls: Vec<_> = browser
                .received()
                .into_iter()
                .filter(|r| r.method == "tool.snapshot")
                .collect();
            assert_eq!(calls.len(), mine.len() * 4);
            for c in calls {
                let sid = c.params.as_ref().expect("params")["session_id"]
                    .as_str()
                    .expect("sid")
                    .to_string();
                assert!(
                    mine.contains(&&sid),
                    "a call was routed to another tenant's device"
                );
            }
        }
    }
    server.stop().await;
}

fn rand_nonce(session: &str, k: u64) -> u64 {
    let h = session
        .bytes()
        .fold(0u64, |a, b| a.wrapping_mul(31).wrapping_add(u64::from(b)));
    (h % 1_000_000) * 10 + k
}

backend_tests!(fifty_sessions_five_devices_three_tenants, fifty_sessions);

/// 100 sessions on one device, each with a call that never answers.
async fn hundred_in_flight(
    server: &TestServer,
) -> (
    String,
    FakeAgent,
    FakeBrowser,
    Vec<tokio::task::JoinHandle<latchkey_testkit::CallOutcome>>,
) {
    let agent = server.new_agent().await.expect("agent");
    let (device, browser) = server
        .new_browser(latchkey_testkit::browser::never_answers("tool.hang"))
        .await
        .expect("browser");
    let mut calls = Vec::new();
    for _ in 0..100 {
        let s = agent.start(None).await.expect("start");
        let agent = agent.clone();
        calls.push(tokio::spawn(async move {
            agent
                .call(&s.id, "tool.hang", json!({}))
                .await
                .expect("call")
        }));
    }
    let hangs = || {
        browser
            .received_methods()
            .iter()
            .filter(|m| *m == "tool.hang")
            .count()
    };
    assert!(
        wait_until(DEADLINE, || async { hangs() == 100 }).await,
        "100 calls in flight"
    );
    (device, agent, browser, calls)
}

fn hundred_server(backend: Backend) -> latchkey_testkit::TestServerBuilder {
    TestServer::builder(backend).limits(|l| {
        l.max_calls_in_flight_per_device = 128;
        l.max_sessions_per_device = 128;
        l.max_sessions_per_token = 128;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_fails_every_in_flight_call_and_sends_nothing_after() {
    let server = hundred_server(Backend::Sqlite)
        .start()
        .await
        .expect("server");
    let (device, agent, mut browser, calls) = hundred_in_flight(&server).await;
    server.admin().revoke(&device).await.expect("revoke");
    let seen_at_ack = browser.received().len();
    for c in calls {
        let r = tokio::time::timeout(Duration::from_secs(5), c)
            .await
            .expect("answered at once")
            .expect("join");
        assert_eq!((r.status, r.code()), (410, "device_revoked"));
    }
    let ended = browser.ended(DEADLINE).await.expect("ended");
    let received_before_close = browser.received().len();
    assert_eq!(ended, latchkey_testkit::extension::Ended::Closed(4001));
    // The fake recorded everything it received until the socket closed: nothing
    // arrived after the revocation was acknowledged (no cancels either).
    assert_eq!(
        seen_at_ack, received_before_close,
        "a frame was sent after the revocation was acknowledged"
    );
    assert_eq!(
        seen_at_ack, 200,
        "100 session starts and 100 calls, and not one cancel"
    );
    assert!(
        agent.sessions().await.expect("list").sessions.is_empty(),
        "sessions purged"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_fails_every_in_flight_call() {
    let server = hundred_server(Backend::Sqlite)
        .start()
        .await
        .expect("server");
    let (_device, agent, browser, calls) = hundred_in_flight(&server).await;
    browser.drop_connection();
    for c in calls {
        let r = tokio::time::timeout(Duration::from_secs(5), c)
            .await
            .expect("answered")
            .expect("join");
        assert_eq!((r.status, r.code()), (502, "browser_disconnected"));
        assert_eq!(
            r.body["error"]["message"],
            "owning browser is no longer connected"
        );
    }
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .sessions()
                .await
                .map(|l| l.sessions.is_empty())
                .unwrap_or(false)
        })
        .await
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_cap_refuses_with_retry_after() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_calls_in_flight_per_device = 2)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, browser) = server
        .new_browser(latchkey_testkit::browser::never_answers("tool.hang"))
        .await
        .expect("browser");
    let a = agent.start(None).await.expect("a");
    let b = agent.start(None).await.expect("b");
    let c = agent.start(None).await.expect("c");
    for s in [&a, &b] {
        let agent = agent.clone();
        let id = s.id.clone();
        tokio::spawn(async move { agent.call(&id, "tool.hang", json!({})).await });
    }
    let hangs = || {
        browser
            .received_methods()
            .iter()
            .filter(|m| *m == "tool.hang")
            .count()
    };
    assert!(wait_until(DEADLINE, || async { hangs() == 2 }).await);
    let url = format!("{}/v1/sessions/{}/calls", server.http_base(), c.id);
    let resp = server
        .http
        .post(url)
        .bearer_auth(&agent.token)
        .json(&json!({"method": "tool.snapshot"}))
        .send()
        .await
        .expect("call");
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(
        resp.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let body: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["code"], "capacity_reached");
    assert_eq!(hangs(), 2, "nothing was queued or forwarded");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacement_fails_in_flight_calls_and_ends_sessions() {
    let server = hundred_server(Backend::Sqlite)
        .start()
        .await
        .expect("server");
    let agent = server.new_agent().await.expect("agent");
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");
    let old = FakeBrowser::serve(
        ext.connect_online().await.expect("online"),
        latchkey_testkit::browser::never_answers("tool.hang"),
    );
    let mut calls = Vec::new();
    for _ in 0..100 {
        let s = agent.start(None).await.expect("start");
        let agent = agent.clone();
        calls.push(tokio::spawn(async move {
            agent
                .call(&s.id, "tool.hang", json!({}))
                .await
                .expect("call")
        }));
    }
    let hangs = || {
        old.received_methods()
            .iter()
            .filter(|m| *m == "tool.hang")
            .count()
    };
    assert!(wait_until(DEADLINE, || async { hangs() == 100 }).await);

    // The same device connects again: the new socket replaces the old one.
    let _new = FakeBrowser::serve_default(ext.connect_online().await.expect("new socket"));
    for c in calls {
        let r = tokio::time::timeout(Duration::from_secs(5), c)
            .await
            .expect("answered")
            .expect("join");
        assert_eq!(
            (r.status, r.code()),
            (502, "browser_disconnected"),
            "{}",
            r.body
        );
    }
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .sessions()
                .await
                .map(|l| l.sessions.is_empty())
                .unwrap_or(false)
        })
        .await
    );
    let s = agent
        .start(None)
        .await
        .expect("a session on the new socket");
    assert!(
        agent
            .call(&s.id, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    server.stop().await;
}
