//! Time-based rules with an injected clock: the pairing TTL boundary, a grant's
//! expiry closing a live socket, and renewal after expiry.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_protocol::api::DeviceStatus;
use latchkey_testkit::extension::{Ended, new_token};
use latchkey_testkit::{Backend, FakeExtension, TestServer, backend_tests, logs};

const DAY: Duration = Duration::from_secs(86_400);

async fn pairing_ttl_boundary(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let inside = admin.create_pairing(None, Some(60)).await.expect("pairing");
    let outside = admin.create_pairing(None, Some(60)).await.expect("pairing");
    server.clock().advance(Duration::from_secs(59));
    let mut a = FakeExtension::from_link(&inside.link, server.http.clone(), None).expect("link");
    a.pair().await.expect("59 s into a 60 s link still pairs");
    server.clock().advance(Duration::from_secs(2));
    let mut b = FakeExtension::from_link(&outside.link, server.http.clone(), None).expect("link");
    let refused = b
        .pair_with(&new_token())
        .await
        .expect("request")
        .expect_err("61 s is too late");
    assert_eq!(refused.status, 401);
    server.stop().await;
}

backend_tests!(pairing_ttl, pairing_ttl_boundary);

async fn grant_expiry(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    let grant = ext.pair().await.expect("pair");
    let mut socket = ext.connect_online().await.expect("online");

    // Renewal at day 31 re-bases the grant: the socket survives day 91.
    server.clock().advance(31 * DAY);
    ext.renew().await.expect("renew after 31 days");
    server.clock().advance(60 * DAY);
    socket.heartbeat().await.expect("still open at day 91");
    let view = server
        .admin()
        .device(&grant.device_id)
        .await
        .expect("device");
    assert_eq!(view.status, DeviceStatus::Active);

    // Past the renewed grant's end: the live socket closes with `expired`.
    server.clock().advance(31 * DAY);
    assert_eq!(
        socket.ended(Duration::from_secs(10)).await.expect("socket"),
        Ended::Closed(CloseCode::Expired.code())
    );
    let token = ext.token.clone().expect("token");
    assert_eq!(
        ext.renew_raw(&token, &new_token())
            .await
            .expect("renew")
            .status,
        401
    );
    assert_eq!(
        ext.connect()
            .await
            .expect("connect")
            .expect_err("expired")
            .status,
        401
    );
    let view = server
        .admin()
        .device(&grant.device_id)
        .await
        .expect("device");
    assert_eq!(view.status, DeviceStatus::Expired);
    logs::assert_no_secrets(&[&ext.pairing_secret, &token, &server.admin_token]);
    server.stop().await;
}

backend_tests!(expiry, grant_expiry);
