//! The connection task and the call pipeline over a channel socket, with tokio's
//! time paused: handshake timeout, heartbeat silence, pings, the in-flight cap, the
//! cancel on a deadline, a disconnect or revocation failing calls in flight, and
//! replacement. They run in milliseconds; the real-server tests over TCP and TLS
//! (server/tests/) stay beside them.
//!
//! The store is real SQLite in a temporary directory, set up before time is paused
//! (its worker thread does not hold tokio's auto-advance back). The connection
//! reads it only at its start and end, never while a test measures time.

#![allow(clippy::expect_used, clippy::panic)]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::handshake::{BrowserInfo, HandshakeParams};
use latchkey_protocol::{CloseCode, EventFrame, Frame, RequestFrame, SuccessFrame, methods};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Accepted, run};
use crate::audit::Audit;
use crate::auth::bootstrap::create_tenant;
use crate::clock::Clock;
use crate::config::{Config, Limits};
use crate::core::Core;
use crate::core_error::CoreError;
use crate::devices::DeviceRegistry;
use crate::devices::socket::{ChannelPeer, Inbound, Outbound, ReadError, channel_pair};
use crate::sessions::SessionTable;
use crate::sessions::calls::forward;
use crate::store::{DeviceRecord, NewDevice, SqliteStore, Store};

const DEVICE_ID: &str = "0123456789abcdef0123456789abcdef";
const START_MS: i64 = 1_800_000_000_000;

struct Harness {
    core: Core,
    device: DeviceRecord,
    _dir: tempfile::TempDir,
}

/// A core on a fresh SQLite store with one live device; time is paused on return.
async fn harness(tune: impl FnOnce(&mut Limits)) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config {
        data_dir: dir.path().to_path_buf(),
        ..Config::default()
    };
    tune(&mut config.limits);
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path(), Duration::from_secs(5))
            .await
            .expect("sqlite"),
    );
    store.migrate().await.expect("migrate");
    let tenant = create_tenant(store.as_ref(), "team", START_MS)
        .await
        .expect("tenant");
    let device = store
        .ensure_local_device(
            &tenant.tenant.id,
            &NewDevice {
                id: DEVICE_ID.into(),
                label: "test".into(),
                token_hash: "0".repeat(64),
                created_at: START_MS,
                expires_at: START_MS + 86_400_000,
                renew_after: START_MS + 3_600_000,
            },
        )
        .await
        .expect("device");
    tokio::time::pause();
    let clock = Clock::following_tokio(START_MS);
    let core = Core {
        audit: Audit::new(store.clone(), clock.clone()),
        store,
        config: Arc::new(config),
        clock,
        registry: DeviceRegistry::default(),
        sessions: SessionTable::default(),
        shutdown: CancellationToken::new(),
        closing: CancellationToken::new(),
        calls: TaskTracker::new(),
    };
    Harness {
        core,
        device,
        _dir: dir,
    }
}

impl Harness {
    /// A new connection of the device, as the upgrade hands it over.
    fn connect(&self) -> (tokio::task::JoinHandle<()>, ChannelPeer) {
        let (socket, peer) = channel_pair(64);
        let accepted = Box::new(Accepted {
            core: self.core.clone(),
            device: self.device.clone(),
            peer: IpAddr::from([127, 0, 0, 1]),
            grant_changes: self.core.registry.grant_changes(),
            guard_key: self.device.id.clone(),
            first_frame: None,
        });
        (tokio::spawn(run(socket, accepted)), peer)
    }

    /// A connection that completed the handshake.
    async fn online(&self) -> (tokio::task::JoinHandle<()>, ChannelPeer) {
        // The connect is committed (browser, audit row) before the answer.
        let _still = hold_time();
        let (task, mut peer) = self.connect();
        send(&mut peer, &handshake()).await;
        match next_frame(&mut peer).await {
            Frame::Success(s) => assert_eq!(s.id, "hs-1"),
            other => panic!("handshake answered {other:?}"),
        }
        (task, peer)
    }

    fn link(&self) -> Arc<crate::devices::link::DeviceLink> {
        self.core.registry.link(&self.device.id).expect("online")
    }
}

fn handshake() -> Frame {
    let params = HandshakeParams {
        client: methods::HANDSHAKE_CLIENT_NAME.into(),
        version: "0.4.2".into(),
        protocol_version: "1.0".into(),
        instance_id: "a1b2c3d4".into(),
        browser: BrowserInfo {
            name: "chromium".into(),
            version: "156.0".into(),
        },
        label: String::new(),
        min_compatible_peer: None,
        min_compatible_protocol: None,
        audit_enabled: None,
    };
    Frame::Request(RequestFrame::new(
        "hs-1",
        methods::SYSTEM_HANDSHAKE,
        Some(serde_json::to_value(params).expect("params")),
    ))
}

/// Holds tokio's paused clock still (no auto-advance) until dropped: a blocking
/// task that waits for the drop, which tokio counts as work in progress. Store
/// work runs on SQLite's own thread, and while the runtime waits for it, paused
/// time would otherwise run ahead to the next timer (pings, liveness, expiry).
struct HoldTime(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

fn hold_time() -> HoldTime {
    let (release, released) = std::sync::mpsc::channel::<()>();
    tokio::task::spawn_blocking(move || {
        let _ = released.recv();
    });
    HoldTime(release)
}

async fn send(peer: &mut ChannelPeer, frame: &Frame) {
    peer.send
        .send(Ok(Inbound::Text(frame.to_text().into())))
        .await
        .expect("core is reading");
}

/// The next thing the core sends; `None` when it dropped the socket.
async fn next(peer: &mut ChannelPeer) -> Option<Outbound> {
    peer.recv.next().await
}

async fn next_frame(peer: &mut ChannelPeer) -> Frame {
    match next(peer).await {
        Some(Outbound::Text(text)) => Frame::parse(&text).expect("a frame"),
        other => panic!("expected a frame, got {other:?}"),
    }
}

/// The close the core sent, skipping pings; answered with a Close, as a browser does.
async fn closed_with(peer: &mut ChannelPeer) -> CloseCode {
    loop {
        match next(peer).await {
            Some(Outbound::Close(code)) => {
                let _ = peer.send.send(Ok(Inbound::Close)).await;
                return code;
            }
            Some(Outbound::Ping) => continue,
            other => panic!("expected a close, got {other:?}"),
        }
    }
}

fn call(
    link: Arc<crate::devices::link::DeviceLink>,
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
