//! Liveness (docs/protocol.md, "Liveness"): Ping is answered; a device that heartbeated and then
//! went silent is dropped with `idle_timeout`; one that never heartbeated is not reaped.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::CloseCode;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::tokio_tungstenite::tungstenite::Message;
use latchkey_testkit::{Backend, TestServer, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_after_a_heartbeat_is_dropped_and_ping_is_answered() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.liveness_timeout_ms = 600;
            l.reaper_interval_ms = 100;
        })
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");

    // Ping → Pong.
    let mut socket = ext.connect_online().await.expect("online");
    socket
        .ws
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .expect("ping");
    let pong = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.ws.next().await {
                Some(Ok(Message::Pong(p))) => return p,
                Some(Ok(_)) => continue,
                other => panic!("socket ended: {other:?}"),
            }
        }
    })
    .await
    .expect("pong in time");
    assert_eq!(&pong[..], b"are you there");

    // Device A never heartbeats; device B heartbeats once, then falls silent.
    // B is dropped with idle_timeout after the window; A, silent just as long, is kept.
    let mut other = server.new_extension().await.expect("ext");
    other.pair().await.expect("pair");
    let mut silent_after_heartbeat = other.connect_online().await.expect("online");
    silent_after_heartbeat.heartbeat().await.expect("heartbeat");
    assert_eq!(
        silent_after_heartbeat
            .ended(Duration::from_secs(10))
            .await
            .expect("end"),
        Ended::Closed(CloseCode::IdleTimeout.code())
    );
    let device = ext.device_id.clone().expect("id");
    assert!(
        server
            .state()
            .registry
            .status(&device)
            .is_some_and(|(online, _)| online),
        "a device that never heartbeated is not reaped"
    );
    let other_id = other.device_id.clone().expect("id");
    assert!(
        wait_until(Duration::from_secs(5), || async {
            server.state().registry.status(&other_id).is_none()
        })
        .await
    );
    server.stop().await;
}

/// A device that never heartbeats is still pinged: one whose browser answers (the
/// WebSocket layer does, on its own) stays; one that answers nothing at all, as a
/// peer behind a dead connection, is dropped after `silent_peer_timeout_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peers_are_pinged_and_the_dead_ones_dropped() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.liveness_timeout_ms = 600;
            l.reaper_interval_ms = 100;
            l.ping_after_ms = 200;
            l.silent_peer_timeout_ms = 1_000;
        })
        .start()
        .await
        .expect("server");
    // Answers pings (its socket is read), never heartbeats.
    let (alive, _browser) = server
        .new_browser(std::sync::Arc::new(|_| None))
        .await
        .expect("browser");
    // Never read: no Pong ever goes back.
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");
    let mut dead = ext.connect_online().await.expect("online");
    let dead_id = ext.device_id.clone().expect("id");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            server.state().registry.status(&dead_id).is_none()
        })
        .await,
        "a peer that answers nothing is dropped"
    );
    assert!(
        server
            .state()
            .registry
            .status(&alive)
            .is_some_and(|(online, _)| online),
        "a peer that answers pings stays, heartbeat or not"
    );
    // Its Close (4005) may be preceded by pings this client now tries to answer on a
    // socket the server already shut, so it may also just see the connection drop.
    let ended = dead.ended(Duration::from_secs(10)).await.expect("end");
    assert!(
        matches!(ended, Ended::Dropped) || ended == Ended::Closed(CloseCode::IdleTimeout.code()),
        "{ended:?}"
    );
    server.stop().await;
}
