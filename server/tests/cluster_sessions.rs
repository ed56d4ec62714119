//! Sessions by id on any replica, on the real thing (docs/cluster.md,
//! "Sessions by id on any replica"): a session started on replica A is called,
//! followed, cancelled and stopped through replica B, with no load balancer
//! keeping the agent on one replica; one PostgreSQL database and a
//! `nats-server` of the test's own between them.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::agent_socket::{code_of, result_of};
use latchkey_testkit::cluster::{
    DEADLINE, browser_on, listening, process_replica, readiness, two_replicas,
};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{AgentSocket, EventStream, FakeAgent, FakeBrowser, TestServer, wait_until};
use serde_json::{Value, json};

/// Read events until one of `kind`; its data.
async fn event_of(events: &mut EventStream, kind: &str) -> Value {
    loop {
        let (_, data) = events.next_event().await.expect("an event in time");
        if data["type"] == kind {
            return data;
        }
    }
}

/// A call on `session` by `agent` is answered 404 `not_found`.
async fn answers_not_found(agent: &FakeAgent, session: &str) {
    let call = agent
        .call(session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (call.status, call.code()),
        (404, "not_found"),
        "{:?}",
        call.body
    );
}

/// A browser on `server`, an agent token, and a session of it there.
async fn session_on(server: &TestServer) -> (FakeBrowser, FakeAgent, String) {
    let (_device, browser) = browser_on(server).await;
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("session").id;
    (browser, agent, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_started_on_one_replica_is_driven_and_stopped_through_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (browser, on_a, session) = session_on(&a).await;
    let on_b = b.agent(&on_a.token);
    // Its events, followed on B.
    let mut events = on_b.events(&session).await.expect("events through B");

    let answer = on_b
        .call(&session, "tool.tabs_list", json!({"n": 2}))
        .await
        .expect("call through B");
    assert!(answer.is_ok(), "{:?}", answer.body);
    assert_eq!(answer.result()["method"], "tool.tabs_list");
    assert_eq!(answer.result()["echo"]["n"], 2);

    // Listed on B for its token and the team's admin, not for another token.
    let listed = |agent: latchkey_testkit::FakeAgent, session: String| async move {
        agent
            .sessions()
            .await
            .is_ok_and(|l| l.sessions.iter().any(|s| s.id == session))
    };
    assert!(
        wait_until(DEADLINE, || listed(on_b.clone(), session.clone())).await,
        "B lists the session on A"
    );
    let team = b.admin().sessions().await.expect("admin list on B");
    let ids: Vec<&str> = team
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, [session.as_str()], "{team}");
    let stranger = b.new_agent().await.expect("another token");
    assert!(!listed(stranger, session.clone()).await);

    // The agent socket on B drives it too.
    let mut socket = AgentSocket::open(&b, &on_a.token).await.expect("socket");
    let frame = socket
        .call("c1", "tool.snapshot", json!({"session_id": session}))
        .await
        .expect("call over B's socket");
    assert_eq!(result_of(&frame)["method"], "tool.snapshot", "{frame:?}");

    // Errors come back with the code the session's replica gave.
    let bad = on_b
        .call(&session, "tool.snapshot", json!({"timeout_ms": 0}))
        .await
        .expect("call");
    assert_eq!((bad.status, bad.code()), (400, "invalid_params"));

    // The person's events reach the stream on B.
    browser.event("session.user_interrupt", json!({"session_id": session}));
    assert_eq!(
        event_of(&mut events, "user_interrupt").await["session_id"],
        json!(session)
    );

    let stopped = on_b.stop(&session).await.expect("stop through B");
    assert!(stopped.stopped);
    assert_eq!(browser.count("tool.session_stop"), 1);
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "stopped"
    );
    // Asked again, B says why it ended, as A would.
    let after = on_b
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!((after.code(), after.reason()), ("session_ended", "stopped"));
    assert!(on_a.sessions().await.expect("list").sessions.is_empty());
    assert!(on_b.sessions().await.expect("list").sessions.is_empty());
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tokens_session_answers_like_an_unknown_one_on_every_replica() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (browser, owner, session) = session_on(&a).await;
    let stranger = b.new_agent().await.expect("another token");
    let unknown = "0123456789abcdef0123456789abcdef";
    let malformed = "not-a-session.>";
    for id in [session.as_str(), unknown, malformed] {
        let call = stranger
            .call(id, "tool.snapshot", json!({}))
            .await
            .expect("call");
        assert_eq!((call.status, call.code()), (404, "not_found"), "{id}");
        assert_eq!(
            call.body["error"]["message"], "session not registered or already stopped",
            "{id}: {:?}",
            call.body
        );
        let stop = stranger.stop_raw(id).await.expect("stop");
        assert_eq!((stop.status, stop.code()), (404, "not_found"), "{id}");
        let events = stranger.events(id).await;
        assert!(events.is_err(), "{id}: a stream of another token's session");
    }
    assert_eq!(browser.count("tool.snapshot"), 0);
    assert_eq!(browser.count("tool.session_stop"), 0);
    // The owner's session is untouched.
    let mine = b
        .agent(&owner.token)
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(mine.is_ok(), "{:?}", mine.body);
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_on_another_replica_stops_any_session_of_the_team() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (browser, agent, session) = session_on(&a).await;
    let mut events = agent.events(&session).await.expect("events on A");
    let path = format!("/v1/admin/sessions/{session}");
    let (status, body) = b
        .admin()
        .raw(Method::DELETE, &path, None)
        .await
        .expect("admin stop through B");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stopped"], true);
    assert_eq!(browser.count("tool.session_stop"), 1);
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "stopped_by_admin"
    );
    let (status, body) = b
        .admin()
        .raw(Method::DELETE, &path, None)
        .await
        .expect("again");
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found"))
    );
    for s in [b, a] {
        s.stop().await;
    }
}

/// The browser's person ends a session from the console on another replica: it
/// ends `user_stopped` where it lives; another member's End through that
/// replica answers as for an unknown session and reaches nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_ends_a_session_on_their_browser_through_another_replica() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let admin = a.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (ext, device) = a.paired_for(&alice.id).await.expect("paired");
    let browser = FakeBrowser::serve(
        ext.connect_online().await.expect("online"),
        std::sync::Arc::new(|_| None),
    );
    let agent = a.new_agent().await.expect("agent");
    let session = agent.start(Some(&device)).await.expect("session").id;
    let mut events = agent.events(&session).await.expect("events on A");
    let end = format!("/console/sessions/{session}/end");

    let as_bob = b
        .console_signed_in(&admin.member_token(&bob.id).await.expect("token"))
        .await
        .expect("Bob on B");
    let csrf = as_bob
        .get("/console/sessions")
        .await
        .expect("page")
        .csrf()
        .expect("csrf");
    let refused = as_bob.post(&end, &[("csrf", &csrf)]).await.expect("answer");
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert_eq!(browser.count("tool.session_stop"), 0);

    let as_alice = b
        .console_signed_in(&admin.member_token(&alice.id).await.expect("token"))
        .await
        .expect("Alice on B");
    let page = as_alice.get("/console/sessions").await.expect("page");
    assert!(page.body.contains(&end), "listed on B: {}", page.body);
    let done = as_alice
        .post(&end, &[("csrf", &page.csrf().expect("csrf"))])
        .await
        .expect("end");
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(browser.count("tool.session_stop"), 1);
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "user_stopped"
    );
    for s in [b, a] {
        s.stop().await;
    }
}

/// The agent gives up on a call it made through B: the cancel crosses to the
/// session's replica and reaches the browser, as for a local call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_reaches_the_browser() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (browser, on_a, session) = session_on(&a).await;
    let mut socket = AgentSocket::open(&b, &on_a.token).await.expect("socket");
    socket
        .request("h", "tool.hang", json!({"session_id": session}))
        .await
        .expect("send");
    assert!(wait_until(DEADLINE, || async { browser.count("tool.hang") == 1 }).await);
    let cancel = socket
        .call("ch", "cancel", json!({"rpc_id": "h"}))
        .await
        .expect("cancel");
    let followup = socket.answer().await.expect("answer");
    let mut answers = [cancel, followup];
    answers.sort_by_key(|f| f.id().map(str::to_string));
    assert_eq!(result_of(&answers[0])["cancelled"], true, "{answers:?}");
    assert_eq!(code_of(&answers[1]), "cancelled", "{answers:?}");
    assert!(
        wait_until(DEADLINE, || async { browser.count("cancel") == 1 }).await,
        "the cancel reached the browser on A: {:?}",
        browser.received_methods()
    );
    let cancel = browser.first("cancel").expect("cancel");
    let hang = browser.first("tool.hang").expect("hang");
    assert_eq!(cancel.params.expect("params")["rpc_id"], json!(hang.id));
    for s in [b, a] {
        s.stop().await;
    }
}

/// The session's replica goes: a stream on B hears the session end, and a
/// request on B is answered `not_found` at once (nobody answers for the id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_sessions_replica_goes_other_replicas_say_so() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, _browser) = browser_on(&b).await;
    let on_a = a.new_agent().await.expect("agent");
    let session = on_a.start(None).await.expect("session on A").id;
    let on_b = b.agent(&on_a.token);
    let mut events = on_b.events(&session).await.expect("events through B");
    a.stop().await;
    assert_eq!(
        event_of(&mut events, "session_ended").await["reason"],
        "server_shutting_down"
    );
    answers_not_found(&on_b, &session).await;
    b.stop().await;
}

/// The session's replica is killed outright (`kill -9`, a real `latchkeyd`
/// process): it publishes no end, yet a stream on B ends, saying the session
/// is gone, and a request on B is answered `not_found` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sessions_replica_ends_the_streams_that_follow_it_elsewhere() {
    let Some((nats, b, other)) = two_replicas().await else {
        return;
    };
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_latchkeyd"));
    let (mut a, _dir) = process_replica(exe, &b, &nats).await;
    let (device, _browser) = browser_on(&b).await;
    let on_b = b.new_agent().await.expect("agent");
    let on_a = FakeAgent::new(
        b.http.clone(),
        format!("http://{}", a.addr),
        on_b.token.clone(),
    );
    // A learns of the browser on B, and opens the session there.
    assert!(
        wait_until(DEADLINE, || async {
            on_a.browsers()
                .await
                .is_ok_and(|l| l.browsers.iter().any(|x| x.id == device && x.online))
        })
        .await,
        "A sees the browser on B"
    );
    let session = on_a.start(None).await.expect("session through A").id;
    let mut events = on_b.events(&session).await.expect("events through B");
    let answer = on_b
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{:?}", answer.body);

    a.child.kill().await.expect("kill -9");
    let (name, data) = events.next_event().await.expect("the stream ends");
    assert_eq!(
        (name.as_str(), &data["code"]),
        ("error", &json!("not_found")),
        "{data}"
    );
    answers_not_found(&on_b, &session).await;
    for s in [other, b] {
        s.stop().await;
    }
}

/// NATS away: a session still starts on the browser's replica; another replica
/// cannot know where it is (retryable `gateway_unavailable`), and reaches it
/// once NATS is back (the session's subscription is made again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_started_while_nats_is_away_is_reached_once_it_is_back() {
    let Some((mut nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_device, _browser) = browser_on(&a).await;
    let on_a = a.new_agent().await.expect("agent");
    let on_b = b.agent(&on_a.token);
    nats.stop().await;
    assert!(
        wait_until(DEADLINE, || async {
            readiness(&a).await == "ready; cluster: disconnected"
                && readiness(&b).await == "ready; cluster: disconnected"
        })
        .await
    );
    let session = on_a.start(None).await.expect("session on A").id;
    let refused = on_b
        .call(&session, "tool.snapshot", json!({}))
        .await
        .expect("call");
    assert_eq!(
        (refused.status, refused.code()),
        (503, "gateway_unavailable"),
        "{:?}",
        refused.body
    );
    nats.restart().await.expect("nats back");
    assert!(listening(&a).await && listening(&b).await);
    let reached = wait_until(DEADLINE, || async {
        on_b.call(&session, "tool.snapshot", json!({}))
            .await
            .is_ok_and(|r| r.is_ok())
    })
    .await;
    assert!(reached, "B reaches the session on A once NATS is back");
    for s in [b, a] {
        s.stop().await;
    }
}
