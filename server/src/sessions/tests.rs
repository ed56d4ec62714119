//! Session start and stop, and calls on a session, over a channel socket with
//! tokio's time paused (harness: `crate::core_testing`): what reaches the browser,
//! what the agent is answered, the rollback of a start that answers too late, and
//! the busy rule.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::EndReason;
use std::sync::Arc;

use latchkey_protocol::agent::StartSessionRequest;
use latchkey_protocol::api::Role;
use latchkey_protocol::effect::{SESSION_START, SESSION_STOP};
use latchkey_protocol::{Frame, RequestFrame, SuccessFrame, methods};
use serde_json::{Map, Value, json};

use crate::auth::principal::Principal;
use crate::auth::token_watch::TokenLease;
use crate::core_error::CoreError;
use crate::core_testing::{Harness, harness, hold_time, next_frame, send};
use crate::sessions::calls::{ToolCall, call};
use crate::sessions::start_stop::{start, stop};
use crate::sessions::table::Session;
use crate::socket::ChannelPeer;

fn agent(h: &Harness) -> Principal {
    Principal {
        tenant_id: h.device.tenant_id.clone(),
        token_id: "tok_agent".into(),
        token_name: "agent".into(),
        role: Role::Agent,
        member_id: None,
        lease: TokenLease::unwatched(),
        expires_at: None,
        delegation: None,
        person_actor: None,
    }
}

async fn request(peer: &mut ChannelPeer, method: &str) -> RequestFrame {
    match next_frame(peer).await {
        Frame::Request(r) if r.method == method => r,
        other => panic!("expected {method}, got {other:?}"),
    }
}

async fn answer(peer: &mut ChannelPeer, id: String, result: Value) {
    send(peer, &Frame::Success(SuccessFrame { id, result })).await;
}

/// A started session whose Agent Window is 7.
async fn started(h: &Harness, peer: &mut ChannelPeer) -> Arc<Session> {
    let core = h.core.clone();
    let principal = agent(h);
    // The start reads the browser's policy from the store first.
    let still = hold_time();
    let pending =
        tokio::spawn(async move { start(&core, &principal, StartSessionRequest::default()).await });
    let request = request(peer, SESSION_START).await;
    drop(still);
    answer(peer, request.id, json!({ "agent_window_id": 7 })).await;
    pending.await.expect("join").expect("started")
}

#[tokio::test]
async fn a_session_starts_in_its_own_window_and_stops_with_its_tabs_returned() {
    let h = harness(|_| {}).await;
    let (_task, mut peer) = h.online().await;
    let session = started(&h, &mut peer).await;
    assert_eq!(session.view().agent_window_id, Some(7));
    assert!(
        h.core
            .sessions
            .get_on_device(&h.device.id, &session.id)
            .is_some()
    );

    let core = h.core.clone();
    let stopping = session.clone();
    let pending = tokio::spawn(async move { stop(&core, &stopping, EndReason::Stopped).await });
    let request = request(&mut peer, SESSION_STOP).await;
    assert_eq!(
        request.params.and_then(|p| p.get("session_id").cloned()),
        Some(Value::String(session.id.clone()))
    );
    answer(&mut peer, request.id, json!({ "returned_tab_ids": [3] })).await;
    let stopped = pending.await.expect("join").expect("stopped");
    assert!(stopped.stopped);
    assert_eq!(stopped.returned_tab_ids, vec![3]);
    assert!(
        h.core
            .sessions
            .get_on_device(&h.device.id, &session.id)
            .is_none()
    );
}

#[tokio::test]
async fn a_start_past_its_deadline_is_cancelled_and_a_late_window_is_closed_again() {
    let h = harness(|l| l.session_start_timeout_ms = 10_000).await;
    let (_task, mut peer) = h.online().await;
    let core = h.core.clone();
    let principal = agent(&h);
    let still = hold_time();
    let pending =
        tokio::spawn(async move { start(&core, &principal, StartSessionRequest::default()).await });
    let start_request = request(&mut peer, SESSION_START).await;
    drop(still);
    // No answer within the deadline: cancelled on the device.
    let cancel = request(&mut peer, methods::CANCEL).await;
    assert_eq!(
        cancel.params.and_then(|p| p.get("rpc_id").cloned()),
        Some(Value::String(start_request.id.clone()))
    );
    // The window opens anyway, within the cancel grace: it is closed again.
    answer(&mut peer, start_request.id, json!({ "agent_window_id": 9 })).await;
    let rollback = request(&mut peer, SESSION_STOP).await;
    answer(&mut peer, rollback.id, json!({})).await;
    let refused = pending.await.expect("join");
    assert_eq!(
        refused.map(|s| s.id.clone()),
        Err(CoreError::Deadline {
            what: "session start",
            ms: 10_000
        })
    );
    assert!(h.core.sessions.list(|_| true).is_empty());
}

#[tokio::test]
async fn a_second_call_on_a_busy_session_is_refused_at_once_and_the_session_frees_with_the_answer()
{
    let h = harness(|_| {}).await;
    let (_task, mut peer) = h.online().await;
    let session = started(&h, &mut peer).await;
    let first = {
        let (core, session) = (h.core.clone(), session.clone());
        tokio::spawn(async move {
            let click = ToolCall {
                method: "tool.click".into(),
                params: Map::from_iter([("ref".to_string(), json!("e1"))]),
                timeout_ms: None,
                limit: None,
            };
            call(&core, &session, click).await
        })
    };
    let click = request(&mut peer, "tool.click").await;
    let snapshot = ToolCall {
        method: "tool.snapshot".into(),
        params: Map::new(),
        timeout_ms: None,
        limit: None,
    };
    let refused = call(&h.core, &session, snapshot).await;
    assert_eq!(refused.map(|_| ()), Err(CoreError::SessionBusy));
    answer(&mut peer, click.id, json!({ "clicked": true })).await;
    assert!(first.await.expect("join").is_ok());
    // Free again: the stop goes through.
    let core = h.core.clone();
    let stopping = session.clone();
    let pending = tokio::spawn(async move { stop(&core, &stopping, EndReason::Stopped).await });
    let request = request(&mut peer, SESSION_STOP).await;
    answer(&mut peer, request.id, json!({})).await;
    assert!(pending.await.expect("join").expect("stopped").stopped);
}
