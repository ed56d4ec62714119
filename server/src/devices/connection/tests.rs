//! The connection task and the call pipeline over a channel socket, with tokio's
//! time paused: handshake timeout, heartbeat silence, pings, the in-flight cap, the
//! cancel on a deadline, a disconnect or revocation failing calls in flight, and
//! replacement. They run in milliseconds; the real-server tests over TCP and TLS
//! (server/tests/) stay beside them.
//!
//! The harness (a core on real SQLite, channel sockets, paused time) is
//! `crate::core_testing`.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt;
use latchkey_protocol::{CloseCode, EventFrame, Frame, SuccessFrame, methods};
use serde_json::{Map, Value, json};

use crate::core_error::CoreError;
use crate::core_testing::{DEVICE_ID, closed_with, harness, hold_time, next, next_frame, send};
use crate::sessions::calls::forward;
use crate::socket::{Outbound, ReadError};

fn call(
    link: Arc<dyn crate::devices::link::Link>,
    deadline: Duration,
) -> tokio::task::JoinHandle<Result<crate::devices::link::RawResult, CoreError>> {
    tokio::spawn(
        async move { forward(link, None, "tool.snapshot", Map::new(), deadline, None).await },
    )
}

#[tokio::test]
async fn a_device_that_never_shakes_hands_is_closed_at_the_handshake_timeout() {
    let h = harness(|l| l.handshake_timeout_ms = 5_000).await;
    let (task, mut peer) = h.connect();
    let started = tokio::time::Instant::now();
    assert_eq!(closed_with(&mut peer).await, CloseCode::PolicyViolation);
    let waited = started.elapsed();
    // Timers fire on the millisecond after their deadline.
    assert!(
        (Duration::from_secs(5)..=Duration::from_millis(5_010)).contains(&waited),
        "closed after {waited:?}"
    );
    task.await.expect("task");
    assert!(h.core.registry.status(DEVICE_ID).is_none());
}

#[tokio::test]
async fn silence_after_a_heartbeat_closes_idle_and_quiet_peers_are_pinged_first() {
    let h = harness(|l| {
        l.reaper_interval_ms = 1_000;
        l.ping_after_ms = 30_000;
        l.liveness_timeout_ms = 60_000;
    })
    .await;
    let (task, mut peer) = h.online().await;
    let heartbeat = Frame::Event(EventFrame {
        event: methods::EVENT_HEARTBEAT.into(),
        payload: json!({}),
    });
    send(&mut peer, &heartbeat).await;
    let quiet_from = tokio::time::Instant::now();
    // Quiet for ping_after_ms: the gateway asks for a sign of life.
    assert_eq!(next(&mut peer).await, Some(Outbound::Ping));
    let waited = quiet_from.elapsed();
    assert!(
        (Duration::from_secs(30)..=Duration::from_secs(31)).contains(&waited),
        "pinged after {waited:?}"
    );
    // Still no answer: closed once the liveness window is over, not before.
    assert_eq!(closed_with(&mut peer).await, CloseCode::IdleTimeout);
    let waited = quiet_from.elapsed();
    assert!(
        (Duration::from_secs(60)..=Duration::from_secs(61)).contains(&waited),
        "closed after {waited:?}"
    );
    task.await.expect("task");
}

#[tokio::test]
async fn a_call_past_its_deadline_is_answered_timeout_and_cancelled_on_the_device() {
    let h = harness(|_| {}).await;
    let (_task, mut peer) = h.online().await;
    let pending = call(h.link(), Duration::from_secs(3));
    let request = match next_frame(&mut peer).await {
        Frame::Request(r) => r,
        other => panic!("expected the call, got {other:?}"),
    };
    assert_eq!(request.method, "tool.snapshot");
    let answer = pending.await.expect("join");
    assert_eq!(
        answer.map(|_| ()),
        Err(CoreError::Deadline {
            what: "tool RPC",
            ms: 3_000
        })
    );
    match next_frame(&mut peer).await {
        Frame::Request(cancel) => {
            assert_eq!(cancel.method, methods::CANCEL);
            assert_eq!(
                cancel.params.and_then(|p| p.get("rpc_id").cloned()),
                Some(Value::String(request.id))
            );
        }
        other => panic!("expected the cancel, got {other:?}"),
    }
}

#[tokio::test]
async fn an_answer_is_relayed_to_its_caller() {
    let h = harness(|_| {}).await;
    let (_task, mut peer) = h.online().await;
    let pending = call(h.link(), Duration::from_secs(3));
    let Frame::Request(request) = next_frame(&mut peer).await else {
        panic!("expected the call");
    };
    let answer = Frame::Success(SuccessFrame {
        id: request.id,
        result: json!({"tree": "…"}),
    });
    send(&mut peer, &answer).await;
    let result = pending.await.expect("join").expect("answered");
    assert_eq!(result.get(), r#"{"tree":"…"}"#);
}

#[tokio::test]
async fn calls_beyond_the_in_flight_cap_are_refused_before_reaching_the_device() {
    let h = harness(|l| l.max_calls_in_flight_per_device = 2).await;
    let (_task, mut peer) = h.online().await;
    let first = call(h.link(), Duration::from_secs(30));
    let second = call(h.link(), Duration::from_secs(30));
    next_frame(&mut peer).await;
    next_frame(&mut peer).await;
    let third = call(h.link(), Duration::from_secs(30)).await.expect("join");
    assert_eq!(third.map(|_| ()), Err(CoreError::CallsInFlight));
    first.abort();
    second.abort();
}

#[tokio::test]
async fn a_device_gone_fails_its_calls_in_flight_as_disconnected() {
    let h = harness(|_| {}).await;
    let (task, mut peer) = h.online().await;
    let pending = call(h.link(), Duration::from_secs(30));
    next_frame(&mut peer).await;
    peer.send.send(Err(ReadError::Gone)).await.expect("send");
    let answer = pending.await.expect("join");
    assert_eq!(answer.map(|_| ()), Err(CoreError::BrowserDisconnected));
    task.await.expect("task");
    assert!(h.core.registry.status(DEVICE_ID).is_none());
}

#[tokio::test]
async fn a_revocation_closes_4001_and_fails_calls_in_flight_as_revoked() {
    let h = harness(|_| {}).await;
    let (task, mut peer) = h.online().await;
    let pending = call(h.link(), Duration::from_secs(30));
    next_frame(&mut peer).await;
    assert!(h.core.registry.close(DEVICE_ID, CloseCode::Revoked));
    assert_eq!(closed_with(&mut peer).await, CloseCode::Revoked);
    let answer = pending.await.expect("join");
    assert_eq!(answer.map(|_| ()), Err(CoreError::DeviceRevoked));
    task.await.expect("task");
}

#[tokio::test]
async fn a_new_connection_of_the_device_replaces_the_old_one() {
    let h = harness(|_| {}).await;
    let (old_task, mut old) = h.online().await;
    let pending = call(h.link(), Duration::from_secs(30));
    next_frame(&mut old).await;
    let (_new_task, _new) = h.online().await;
    // The old connection's end is committed while the new one waits.
    let _still = hold_time();
    assert_eq!(closed_with(&mut old).await, CloseCode::Replaced);
    // The old socket's call cannot be answered any more.
    let answer = pending.await.expect("join");
    assert_eq!(answer.map(|_| ()), Err(CoreError::BrowserDisconnected));
    old_task.await.expect("task");
    assert!(
        h.core.registry.status(DEVICE_ID).is_some(),
        "the new one stays"
    );
}
