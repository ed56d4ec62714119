//! A session core on real SQLite with one live device, device connections over
//! channel sockets, and tokio's time paused: the harness of the core's unit tests
//! (the connection task, the call pipeline, session start and stop).
//!
//! The store is set up before time is paused (SQLite's worker thread does not hold
//! tokio's auto-advance back); [`hold_time`] keeps paused time still while the core
//! commits, so timers fire only when a test lets time run.

#![allow(clippy::expect_used, clippy::panic)]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::handshake::{BrowserInfo, HandshakeParams};
use latchkey_protocol::{CloseCode, Frame, RequestFrame, methods};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::audit::Audit;
use crate::auth::bootstrap::create_tenant;
use crate::clock::Clock;
use crate::config::{Config, Limits};
use crate::core::Core;
use crate::devices::DeviceRegistry;
use crate::devices::connection::{Accepted, run};
use crate::sessions::SessionTable;
use crate::socket::{ChannelPeer, Inbound, Outbound, channel_pair};
use crate::store::{DeviceRecord, NewDevice, SqliteStore, Store};

pub(crate) const DEVICE_ID: &str = "0123456789abcdef0123456789abcdef";
pub(crate) const START_MS: i64 = 1_800_000_000_000;

pub(crate) struct Harness {
    pub(crate) core: Core,
    pub(crate) device: DeviceRecord,
    _dir: tempfile::TempDir,
}

/// A core on a fresh SQLite store with one live device; time is paused on return.
pub(crate) async fn harness(tune: impl FnOnce(&mut Limits)) -> Harness {
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
    let audit_keys = crate::audit_keys::AuditKeys::load(store.as_ref(), None, START_MS)
        .await
        .expect("audit keys");
    tokio::time::pause();
    let clock = Clock::following_tokio(START_MS);
    let core = Core {
        audit_keys,
        audit: Audit::new(store.clone(), clock.clone()),
        store,
        config: Arc::new(config),
        clock,
        registry: DeviceRegistry::default(),
        sessions: SessionTable::default(),
        shutdown: CancellationToken::new(),
        closing: CancellationToken::new(),
        calls: TaskTracker::new(),
        team_names: Default::default(),
        peers: Default::default(),
    };
    Harness {
        core,
        device,
        _dir: dir,
    }
}

impl Harness {
    /// A new connection of the device, as the upgrade hands it over.
    pub(crate) fn connect(&self) -> (tokio::task::JoinHandle<()>, ChannelPeer) {
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
    pub(crate) async fn online(&self) -> (tokio::task::JoinHandle<()>, ChannelPeer) {
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

    pub(crate) fn link(&self) -> Arc<dyn crate::devices::link::Link> {
        self.core.registry.link(&self.device.id).expect("online")
    }
}

pub(crate) fn handshake() -> Frame {
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
        latchkey_features: None,
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
pub(crate) struct HoldTime(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

pub(crate) fn hold_time() -> HoldTime {
    let (release, released) = std::sync::mpsc::channel::<()>();
    tokio::task::spawn_blocking(move || {
        let _ = released.recv();
    });
    HoldTime(release)
}

pub(crate) async fn send(peer: &mut ChannelPeer, frame: &Frame) {
    peer.send
        .send(Ok(Inbound::Text(frame.to_text().into())))
        .await
        .expect("core is reading");
}

/// The next thing the core sends; `None` when it dropped the socket.
pub(crate) async fn next(peer: &mut ChannelPeer) -> Option<Outbound> {
    peer.recv.next().await
}

pub(crate) async fn next_frame(peer: &mut ChannelPeer) -> Frame {
    match next(peer).await {
        Some(Outbound::Text(text)) => Frame::parse(&text).expect("a frame"),
        other => panic!("expected a frame, got {other:?}"),
    }
}

/// The close the core sent, skipping pings; answered with a Close, as a browser does.
pub(crate) async fn closed_with(peer: &mut ChannelPeer) -> CloseCode {
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
