//! Calls across replicas on the real thing (docs/cluster.md, "Calls across
//! replicas"): the browser's socket on replica A, the agent on replica B, one
//! PostgreSQL database and a `nats-server` of the test's own between them.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::agent::{CallRequest, StartSessionRequest};
use latchkey_testkit::cluster::{
    DEADLINE, browser_on, listening, process_replica, readiness, two_replicas,
};
use latchkey_testkit::extension::Ended;
use latchkey_testkit::mcp::text as mcp_text;
use latchkey_testkit::{
    AgentSocket, Connections, FakeAgent, FakeBrowser, FakeExtension, McpClient, Revision,
    TestServer, wait_until,
};
use serde_json::{Value, json};

/// Until `agent`'s replica lists `device` online.
async fn online_for(agent: &FakeAgent, device: &str) -> bool {
    wait_until(DEADLINE, || async {
        agent
            .browsers()
            .await
            .is_ok_and(|l| l.browsers.iter().any(|b| b.id == device && b.online))
    })
    .await
}

/// A browser on `a`, an agent on `b` that sees it online, and a session of
/// that agent on it, with its event stream open.
async fn session_across(
    a: &TestServer,
    b: &TestServer,
) -> (
    String,
    FakeBrowser,
    FakeAgent,
    String,
    latchkey_testkit::EventStream,
) {
    let (device, browser) = browser_on(a).await;
    let agent = b.new_agent().await.expect("agent");
    assert!(
        online_for(&agent, &device).await,
        "the browser on A is online on B"
    );
    let session = agent.start(None).await.expect("session from B").id;
    let events = agent.events(&session).await.expect("events on B");
    (device, browser, agent, session, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_one_replica_drives_a_browser_on_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (device, browser, agent, session, _events) = session_across(&a, &b).await;
    assert_eq!(browser.count("tool.session_start"), 1);

    let answer = agent
        .call(&session, "tool.tabs_list", json!({"n": 1}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{:?}", answer.body);
    assert_eq!(answer.result()["method"], "tool.tabs_list");
    assert_eq!(answer.result()["echo"]["n"], 1);

    // The agent socket on B drives it too.
    let mut socket = AgentSocket::open(&b, &agent.token).await.expect("socket");
    let second = socket.start_session("s").await.expect("a second session");
    let frame = socket
        .call("c", "tool.snapshot", json!({"session_id": second}))
        .await
        .expect("call over the socket");
    assert_eq!(
        latchkey_testkit::agent_socket::result_of(&frame)["method"],
        "tool.snapshot"
    );
    assert_eq!(browser.count("tool.session_start"), 2);

    agent.stop(&session).await.expect("stop");
    assert_eq!(browser.count("tool.session_stop"), 1);
    // B's admin sees it online too.
    let listed = b.admin().device(&device).await.expect("device on b");
    assert!(listed.online);
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_and_its_cancel_cross_replicas() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, browser, agent, session, events) = session_across(&a, &b).await;
    // A drain waits for open event streams: this one is not needed here.
    drop(events);
    let answer = agent
        .call_with(
            &session,
            &CallRequest {
                method: "tool.hang".into(),
                params: Some(json!({})),
                timeout_ms: Some(300),
            },
        )
        .await
        .expect("call");
    assert_eq!(
        (answer.status, answer.code()),
        (504, "timeout"),
        "{:?}",
        answer.body
    );
    assert!(
        wait_until(DEADLINE, || async { browser.count("cancel") == 1 }).await,
        "the cancel reached the browser on A: {:?}",
        browser.received_methods()
    );
    let cancel = browser.first("cancel").expect("cancel");
    let hang = browser.first("tool.hang").expect("hang");
    assert_eq!(cancel.params.expect("params")["rpc_id"], json!(hang.id));
    // The browser answered the cancel; once that answer is back on B, the
    // session is free and usable again.
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .sessions()
                .await
                .is_ok_and(|l| l.sessions.iter().all(|s| !s.busy))
        })
        .await
    );
    let next = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(next.is_ok(), "{:?}", next.body);
    for s in [b, a] {
        s.stop().await;
    }
}

/// Read events until one of `kind`; its data.
async fn event_of(events: &mut latchkey_testkit::EventStream, kind: &str) -> Value {
    loop {
        let (_, data) = events.next_event().await.expect("an event in time");
        if data["type"] == kind {
            return data;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persons_events_reach_the_session_on_another_replica() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, browser, agent, session, mut events) = session_across(&a, &b).await;
    browser.event("session.user_interrupt", json!({"session_id": session}));
    assert_eq!(
        event_of(&mut events, "user_interrupt").await["session_id"],
        json!(session)
    );
    browser.event(
        "session.window_closed",
        json!({"session_id": session, "reason": "user_closed_window"}),
    );
    let ended = event_of(&mut events, "session_ended").await;
    assert_eq!(ended["reason"], "window_closed");
    let r = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!((r.code(), r.reason()), ("session_ended", "window_closed"));
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_on_another_replica_end_with_the_browsers_socket() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    // The browser goes away.
    let (_device, browser, agent, session, mut events) = session_across(&a, &b).await;
    browser.drop_connection();
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "browser_disconnected"
    );
    let r = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (r.code(), r.reason()),
        ("session_ended", "browser_disconnected")
    );

    // A browser revoked through B with a call in flight from B.
    let (device, browser, agent, session, mut events) = session_across(&a, &b).await;
    let in_flight = agent.spawn_call(&session, "tool.hang", json!({}));
    assert!(wait_until(DEADLINE, || async { browser.count("tool.hang") == 1 }).await);
    b.admin().revoke(&device).await.expect("revoke on b");
    let answered = in_flight.await.expect("join");
    assert_eq!(answered.code(), "device_revoked", "{:?}", answered.body);
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "device_revoked"
    );
    for s in [b, a] {
        s.stop().await;
    }
}

/// NATS away: a call that must travel to another replica fails at once with
/// `gateway_unavailable` (503, Retry-After), and works again once NATS is
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_a_call_to_another_replica_fails_fast_and_retryable() {
    let Some((mut nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, _browser, agent, session, events) = session_across(&a, &b).await;
    drop(events);
    nats.stop().await;
    assert!(
        wait_until(DEADLINE, || async {
            readiness(&b).await == "ready; cluster: disconnected"
        })
        .await
    );
    let refused = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (refused.status, refused.code()),
        (503, "gateway_unavailable")
    );
    nats.restart().await.expect("nats back");
    assert!(listening(&b).await && listening(&a).await);
    let answered = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(answered.is_ok(), "{:?}", answered.body);
    for s in [b, a] {
        s.stop().await;
    }
}

/// A replica that drains closes its browsers' sockets with 1012; the
/// sessions other replicas opened through them end `server_shutting_down`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_holder_ends_the_sessions_opened_through_it_elsewhere() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    // The browser on B, which drains (A, the first replica, owns the test's
    // database and stops last).
    let (_device, mut browser, agent, session, mut events) = session_across(&b, &a).await;
    b.stop().await;
    assert_eq!(
        browser.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(1012)
    );
    let ended = event_of(&mut events, "session_ended").await;
    assert_eq!(ended["reason"], "server_shutting_down");
    let r = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (r.code(), r.reason()),
        ("session_ended", "server_shutting_down")
    );
    a.stop().await;
}

/// `kill -9` of the replica holding the browser: the next call from the other
/// replica fails `browser_disconnected` at once (nobody answers on the dead
/// replica's subject), the session ends with it, and the browser, once it
/// reconnects to the surviving replica, is driven there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_ends_its_sessions_elsewhere_and_the_browser_comes_back() {
    let Some((nats, b, other)) = two_replicas().await else {
        return;
    };
    // Replica A is a real latchkeyd process on the same database and NATS.
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_latchkeyd"));
    let (mut a, _dir) = process_replica(exe, &b, &nats).await;

    let pairing = b.admin().create_pairing(None, None).await.expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, b.http.clone(), None).expect("link");
    let grant = ext.pair().await.expect("pair");
    let device = grant.device_id.clone();
    ext.via(&format!("ws://{}/extension", a.addr), None);
    let _on_a = FakeBrowser::serve_default(ext.connect_online().await.expect("online on A"));
    let agent = b.new_agent().await.expect("agent");
    assert!(online_for(&agent, &device).await);
    let session = agent.start(Some(&device)).await.expect("session").id;
    let mut events = agent.events(&session).await.expect("events");
    let first = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(first.is_ok(), "{:?}", first.body);

    let connected = nats.connections().await.expect("NATS clients");
    a.child.kill().await.expect("kill -9");
    // Asked once NATS noticed A gone (as it does at once for a process the
    // kernel closed): a request it still routed to A would wait for the
    // call's deadline instead (docs/cluster.md, "A replica that vanished").
    let noticed = wait_until(DEADLINE, || async {
        nats.connections().await.is_ok_and(|n| n < connected)
    })
    .await;
    assert!(noticed, "NATS noticed A gone");
    let lost = agent
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(lost.code(), "browser_disconnected", "{:?}", lost.body);
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "browser_disconnected"
    );
    // Forgotten: B no longer lists it online, until it reconnects to B.
    assert!(
        wait_until(DEADLINE, || async {
            agent
                .browsers()
                .await
                .is_ok_and(|l| l.browsers.iter().any(|x| x.id == device && !x.online))
        })
        .await
    );
    ext.via(&format!("{}/extension", b.public_base()), b.client_tls());
    let _on_b = FakeBrowser::serve_default(ext.connect_online().await.expect("online on B"));
    let again = agent.start(Some(&device)).await.expect("a new session").id;
    let answer = agent
        .call(&again, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{:?}", answer.body);
    drop(events);
    for s in [other, b] {
        s.stop().await;
    }
}

/// A start that waits for a browser (`wait_for_browser_ms`) on one replica is
/// woken by a browser coming online on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_waiting_for_a_browser_sees_one_arrive_on_another_replica() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let agent = b.new_agent().await.expect("agent");
    let waiting = {
        let agent = agent.clone();
        tokio::spawn(async move {
            let req = StartSessionRequest {
                wait_for_browser_ms: Some(60_000),
                ..Default::default()
            };
            agent.start_raw(&req).await
        })
    };
    let (_device, browser) = browser_on(&a).await;
    // Well before the 60 s the start may wait.
    let started = tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("woken when the browser arrived")
        .expect("join")
        .expect("start");
    assert_eq!(started.status, 201, "{:?}", started.body);
    assert_eq!(browser.count("tool.session_start"), 1);
    for s in [b, a] {
        s.stop().await;
    }
}

/// The agent's replica drains while the browser's socket stays on another:
/// the session ends and its Agent Window is closed in the browser before the
/// replica exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_agent_replica_closes_its_windows_on_browsers_elsewhere() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, browser, _agent, session, events) = session_across(&a, &b).await;
    drop(events);
    b.stop().await;
    let stop = browser
        .first("tool.session_stop")
        .expect("the window was closed before B exited");
    assert_eq!(stop.params.expect("params")["session_id"], json!(session));
    a.stop().await;
}

/// The MCP endpoint of replica B lists a browser whose socket is on replica A,
/// opens its session there on the first browser tool, and drives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_on_one_replica_drives_a_browser_on_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (device, browser) = browser_on(&a).await;
    let agent = b.new_agent().await.expect("agent");
    assert!(online_for(&agent, &device).await);
    let mcp = McpClient::connect(
        &format!("{}/mcp", b.http_base()),
        &agent.token,
        Revision::Stateless,
        None,
        Connections::PerRequest,
    )
    .await
    .expect("MCP client on B");
    let listed = mcp.call("browser_list", json!({})).await.expect("list");
    assert_eq!(listed.is_error, Some(false), "{}", mcp_text(&listed));
    assert!(mcp_text(&listed).contains(&device), "{}", mcp_text(&listed));

    let tabs = mcp.call("browser_tabs", json!({})).await.expect("tabs");
    assert_eq!(tabs.is_error, Some(false), "{}", mcp_text(&tabs));
    assert_eq!(browser.count("tool.session_start"), 1);
    assert_eq!(browser.count("tool.tab_list"), 1);
    mcp.close().await.expect("close");
    for s in [b, a] {
        s.stop().await;
    }
}
