//! The agent socket's loop over a channel socket with tokio's time paused (harness:
//! `crate::core_testing`, with a device online over its own channel socket): each
//! request answered once, `cancel` reaching the browser, deadlines, a closed socket
//! cancelling its calls, and shutdown answering what is in flight.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures_util::SinkExt;

use latchkey_protocol::api::Role;
use latchkey_protocol::effect::SESSION_START;
use latchkey_protocol::{CloseCode, Frame, RequestFrame, SuccessFrame, methods};
use serde_json::{Value, json};

use super::serve_socket;
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::auth::token_watch::TokenLease;
use crate::core_testing::{Harness, harness, hold_time, next, next_frame, send};
use crate::socket::{ChannelPeer, Inbound, Outbound, channel_pair};

struct Agent {
    peer: ChannelPeer,
    task: tokio::task::JoinHandle<()>,
    state: AppState,
}

/// The agent socket's loop on a channel socket, for an agent token of the team.
fn agent_socket(h: &Harness) -> Agent {
    let deliverer = crate::webhooks::deliver::Deliverer::new(Default::default()).expect("client");
    let state = AppState::new(
        h.core.clone(),
        Arc::from("ws://127.0.0.1:1"),
        Arc::new(deliverer),
    );
    let principal = Principal {
        tenant_id: h.device.tenant_id.clone(),
        token_id: "tok_agent".into(),
        token_name: "agent".into(),
        role: Role::Agent,
        member_id: None,
        lease: TokenLease::unwatched(),
        expires_at: None,
        delegation: None,
        person_actor: None,
    };
    let (socket, peer) = channel_pair(64);
    let task = tokio::spawn(serve_socket(socket, state.clone(), principal));
    Agent { peer, task, state }
}

async fn ask(agent: &mut ChannelPeer, id: &str, method: &str, params: Value) {
    send(
        agent,
        &Frame::Request(RequestFrame::new(id, method, Some(params))),
    )
    .await;
}

/// The next answer on the agent socket (session events are skipped).
async fn answer(agent: &mut ChannelPeer) -> Frame {
    loop {
        match next_frame(agent).await {
            Frame::Event(_) => continue,
            frame => return frame,
        }
    }
}

async fn browser_request(device: &mut ChannelPeer, method: &str) -> RequestFrame {
    match next_frame(device).await {
        Frame::Request(r) if r.method == method => r,
        other => panic!("expected {method} at the browser, got {other:?}"),
    }
}

/// Start a session through the agent socket; its id.
async fn start_session(agent: &mut ChannelPeer, device: &mut ChannelPeer) -> String {
    // The start reads the browser's policy from the store first.
    let still = hold_time();
    ask(agent, "s1", "session.start", json!({})).await;
    let start = browser_request(device, SESSION_START).await;
    drop(still);
    let result = json!({ "agent_window_id": 7 });
    send(
        device,
        &Frame::Success(SuccessFrame {
            id: start.id,
            result,
        }),
    )
    .await;
    match answer(agent).await {
        Frame::Success(s) if s.id == "s1" => s.result["id"].as_str().expect("id").to_string(),
        other => panic!("session.start answered {other:?}"),
    }
}

fn error_of(frame: &Frame, id: &str) -> String {
    match frame {
        Frame::Error(e) if e.id == id => e.error.code.as_str().to_string(),
        other => panic!("expected an error for {id}, got {other:?}"),
    }
}

/// A device online, an agent socket with a session on it, and a `tool.click` (the
/// agent's id `c1`, with `extra` params) that the browser received and has not
/// answered yet.
struct Clicking {
    _h: Harness,
    _device_task: tokio::task::JoinHandle<()>,
    device: ChannelPeer,
    agent: Agent,
    click: RequestFrame,
}

async fn clicking(extra: Value) -> Clicking {
    let h = harness(|_| {}).await;
    let (device_task, mut device) = h.online().await;
    let mut agent = agent_socket(&h);
    let session = start_session(&mut agent.peer, &mut device).await;
    let mut params = json!({ "session_id": session, "ref": "e1" });
    if let (Some(p), Value::Object(more)) = (params.as_object_mut(), extra) {
        p.extend(more);
    }
    ask(&mut agent.peer, "c1", "tool.click", params).await;
    let click = browser_request(&mut device, "tool.click").await;
    Clicking {
        _h: h,
        _device_task: device_task,
        device,
        agent,
        click,
    }
}

impl Clicking {
    /// The browser was told to cancel the click.
    async fn cancelled_at_the_browser(&mut self) {
        let cancel = browser_request(&mut self.device, methods::CANCEL).await;
        assert_eq!(
            cancel.params.expect("params")["rpc_id"],
            Value::String(self.click.id.clone())
        );
    }

    /// The agent's answer to its request `id`: its result.
    async fn result_of(&mut self, id: &str) -> Value {
        match answer(&mut self.agent.peer).await {
            Frame::Success(s) if s.id == id => s.result,
            other => panic!("{id} answered {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_call_is_forwarded_and_its_answer_comes_back_under_the_agents_id() {
    let mut c = clicking(json!({})).await;
    assert_eq!(c.click.params.clone().expect("params")["ref"], "e1");
    let result = json!({ "tab_id": 3, "x": 1.5, "y": 2 });
    let id = c.click.id.clone();
    send(
        &mut c.device,
        &Frame::Success(SuccessFrame {
            id,
            result: result.clone(),
        }),
    )
    .await;
    assert_eq!(c.result_of("c1").await, result);
}

#[tokio::test]
async fn cancel_answers_the_call_once_and_reaches_the_browser() {
    let mut c = clicking(json!({})).await;
    ask(
        &mut c.agent.peer,
        "x1",
        methods::CANCEL,
        json!({ "rpc_id": "c1" }),
    )
    .await;
    assert_eq!(
        error_of(&answer(&mut c.agent.peer).await, "c1"),
        "cancelled"
    );
    assert_eq!(c.result_of("x1").await, json!({ "cancelled": true }));
    c.cancelled_at_the_browser().await;
    // The browser's late answer is not a second answer: a cancel of the same id
    // now finds nothing running.
    let id = c.click.id.clone();
    send(
        &mut c.device,
        &Frame::Success(SuccessFrame {
            id,
            result: json!({}),
        }),
    )
    .await;
    ask(
        &mut c.agent.peer,
        "x2",
        methods::CANCEL,
        json!({ "rpc_id": "c1" }),
    )
    .await;
    assert_eq!(c.result_of("x2").await, json!({ "cancelled": false }));
}

#[tokio::test]
async fn a_call_past_its_deadline_is_answered_timeout_and_cancelled_on_the_browser() {
    let mut c = clicking(json!({ "timeout_ms": 1_000 })).await;
    // No answer: paused time runs to the deadline.
    assert_eq!(error_of(&answer(&mut c.agent.peer).await, "c1"), "timeout");
    c.cancelled_at_the_browser().await;
}

#[tokio::test]
async fn an_agent_that_goes_away_cancels_its_calls_in_flight() {
    let mut c = clicking(json!({})).await;
    c.agent
        .peer
        .send
        .send(Ok(Inbound::Close))
        .await
        .expect("reading");
    (&mut c.agent.task).await.expect("the loop ends");
    c.cancelled_at_the_browser().await;
}

#[tokio::test]
async fn shutdown_answers_what_is_in_flight_and_closes_going_away() {
    let mut c = clicking(json!({})).await;
    c.agent.state.closing.cancel();
    let answered = answer(&mut c.agent.peer).await;
    assert_eq!(error_of(&answered, "c1"), "server_shutting_down");
    match next(&mut c.agent.peer).await {
        Some(Outbound::Close(code)) => assert_eq!(code, CloseCode::GoingAway),
        other => panic!("expected the close, got {other:?}"),
    }
}

#[tokio::test]
async fn a_frame_that_is_not_a_request_is_refused_and_the_socket_stays_open() {
    let h = harness(|_| {}).await;
    let (_device_task, _device) = h.online().await;
    let mut agent = agent_socket(&h);
    agent
        .peer
        .send
        .send(Ok(Inbound::Text("{not json".to_string().into())))
        .await
        .expect("reading");
    assert_eq!(
        error_of(&answer(&mut agent.peer).await, ""),
        "invalid_request"
    );
    // browser.list reads the store: paused time stands still meanwhile.
    let _still = hold_time();
    ask(&mut agent.peer, "b1", "browser.list", json!({})).await;
    match answer(&mut agent.peer).await {
        Frame::Success(s) => assert_eq!(s.id, "b1"),
        other => panic!("browser.list answered {other:?}"),
    }
}
