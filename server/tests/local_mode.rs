//! Local mode: unpaired extensions from loopback at `/` and `/extension`, into the
//! default tenant, one device per browser profile (extension id and handshake
//! `instance_id`); revocable like any device, and a revoked one stays exactly as it
//! was however often it retries; two copies of one device cannot knock each other
//! offline forever. Off by default.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::Frame;
use latchkey_testkit::extension::{
    Ended, ExtensionSocket, TEST_EXTENSION_ORIGIN, handshake_params,
};
use latchkey_testkit::{Backend, FakeBrowser, FakeExtension, TestServer, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

async fn local_server(edit: impl FnOnce(&mut latchkey_server::config::Limits)) -> TestServer {
    TestServer::builder(Backend::Sqlite)
        .config(|c| c.local = true)
        .limits(edit)
        .start()
        .await
        .expect("server")
}

/// A local connection (upgraded: the device is known only from the handshake) that
/// sends the default handshake without reading the answer: how it ended (a
/// refusal is a Close).
async fn closed_after_handshake(ext: &FakeExtension) -> Ended {
    let mut socket = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
        .await
        .expect("request")
        .expect("upgraded");
    let params = serde_json::to_value(handshake_params()).expect("params");
    let request = latchkey_protocol::RequestFrame::new("hs-1", "system.handshake", Some(params));
    socket
        .send_frame(&Frame::Request(request))
        .await
        .expect("send");
    socket.ended(DEADLINE).await.expect("closed")
}

/// A local connection of `instance_id` (with this label), its handshake answered.
async fn profile(ext: &FakeExtension, instance_id: &str, label: &str) -> ExtensionSocket {
    let mut socket = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
        .await
        .expect("request")
        .unwrap_or_else(|a| panic!("refused {a:?}"));
    let mut params = handshake_params();
    params.instance_id = instance_id.to_string();
    params.label = label.to_string();
    match socket.handshake_with(&params).await.expect("handshake") {
        Frame::Success(_) => socket,
        other => panic!("handshake refused: {other:?}"),
    }
}

fn unpaired(server: &TestServer) -> FakeExtension {
    let link = format!("ws://{}/extension#{}", server.addr(), "x".repeat(43));
    FakeExtension::from_link(&link, server.http.clone(), None).expect("link")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_extensions_need_no_pairing() {
    let server = TestServer::builder(Backend::Sqlite)
        .config(|c| c.local = true)
        .start()
        .await
        .expect("server");
    let ext = unpaired(&server);
    let root = format!("ws://{}/", server.addr());
    for url in [root.as_str(), ext.ws_url.as_str()] {
        let mut socket = ext
            .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], Some(url))
            .await
            .expect("request")
            .unwrap_or_else(|a| panic!("{url}: refused {a:?}"));
        assert!(socket.protocol.is_none());
        socket.handshake().await.expect("handshake");
    }
    // The local browser is a device of the default tenant: agents use it.
    let mut socket = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
        .await
        .expect("request")
        .expect("upgrade");
    socket.handshake().await.expect("handshake");
    let _browser = FakeBrowser::serve_default(socket);
    let agent = server.new_agent().await.expect("agent");
    let session = agent
        .start(None)
        .await
        .expect("session on the local browser");
    assert!(
        agent
            .call(&session.id, "tool.snapshot", json!({}))
            .await
            .expect("call")
            .is_ok()
    );
    let devices = server.admin().devices().await.expect("devices");
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].created_by, "local");
    assert_eq!(devices[0].owner, None);
    // Still an extension Origin only, and revocation holds.
    let web = ext
        .connect_with(&[("origin", "http://localhost")], None)
        .await
        .expect("request");
    assert_eq!(web.expect_err("web origin").status, 403);
    server.admin().revoke(&devices[0].id).await.expect("revoke");
    // The handshake names the device; a revoked one is closed with 4001.
    assert_eq!(closed_after_handshake(&ext).await, Ended::Closed(4001));
    server.stop().await;
}

/// Two browser profiles with the same extension are two devices: both stay online,
/// neither replaces the other (an outside review saw 942 replacements in 34 s when
/// local devices were keyed on the extension id alone). Each takes its label from
/// its handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_profiles_of_one_extension_are_two_devices() {
    let server = local_server(|_| {}).await;
    let ext = unpaired(&server);
    let mut work = FakeBrowser::serve_default(profile(&ext, "a1b2c3d4", "Work profile").await);
    let mut home =
        FakeBrowser::serve_default(profile(&ext, "e5f6a7b8", "Home \u{202E}profile").await);
    let devices = server.admin().devices().await.expect("devices");
    let mut labels: Vec<&str> = devices.iter().map(|d| d.label.as_str()).collect();
    labels.sort_unstable();
    assert_eq!(labels, ["Home profile", "Work profile"]);
    assert!(devices.iter().all(|d| d.online));
    // Neither socket was replaced.
    assert!(work.ended(Duration::from_millis(200)).await.is_err());
    assert!(home.ended(Duration::from_millis(200)).await.is_err());
    server.stop().await;
}

/// One profile that keeps coming back on two sockets (two copies of one device,
/// each reconnecting at once after the other replaces it) is refused at the upgrade
/// with 429 and `Retry-After` once it has been replaced more than the limit within a
/// minute, so a compatible extension backs off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_loop_is_refused_at_the_upgrade() {
    let server = local_server(|l| l.max_replacements_per_minute = 3).await;
    let ext = unpaired(&server);
    let mut sockets = vec![profile(&ext, "a1b2c3d4", "").await];
    let refused = loop {
        assert!(sockets.len() <= 10, "never held back");
        let attempt = ext
            .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
            .await
            .expect("request");
        match attempt {
            Ok(mut socket) => {
                socket.handshake().await.expect("handshake");
                sockets.push(socket);
            }
            Err(answer) => break answer,
        }
    };
    assert_eq!(refused.status, 429, "{}", refused.body);
    let wait: u64 = refused
        .retry_after()
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(
        sockets.len(),
        5,
        "the first and four replacements (one over 3)"
    );
    // Every socket but the newest was closed as replaced.
    let newest = sockets.pop().expect("newest");
    for mut old in sockets {
        assert_eq!(
            old.ended(DEADLINE).await.expect("closed"),
            Ended::Closed(4003)
        );
    }
    drop(newest);
    server.stop().await;
}

/// A revoked local browser that keeps trying changes nothing (its grant is not
/// extended, one audit row a minute at most), and comes back only once an admin
/// forgets it: then its next connection makes a new device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_local_browser_stays_revoked_until_forgotten() {
    let server = local_server(|_| {}).await;
    let ext = unpaired(&server);
    drop(profile(&ext, "a1b2c3d4", "Laptop").await);
    let device = server.admin().devices().await.expect("devices").remove(0);
    assert!(
        wait_until(DEADLINE, || async {
            !server
                .admin()
                .device(&device.id)
                .await
                .expect("device")
                .online
        })
        .await
    );
    server.admin().revoke(&device.id).await.expect("revoke");
    let revoked = server.admin().device(&device.id).await.expect("device");
    let audit_rows = || async {
        server
            .admin()
            .raw(
                latchkey_testkit::reqwest::Method::GET,
                "/v1/admin/audit?limit=1000",
                None,
            )
            .await
            .expect("audit")
            .1["events"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0)
    };
    let rows_before = audit_rows().await;
    for _ in 0..5 {
        server.clock().advance(Duration::from_secs(1));
        assert_eq!(closed_after_handshake(&ext).await, Ended::Closed(4001));
    }
    assert_eq!(
        server.admin().device(&device.id).await.expect("device"),
        revoked,
        "refused attempts changed the revoked device"
    );
    assert_eq!(
        audit_rows().await,
        rows_before + 1,
        "one refusal row a minute"
    );

    // Forgetting a live device is refused; a revoked one goes, and the browser
    // comes back as a new device.
    let (status, _) = server
        .admin()
        .raw(
            latchkey_testkit::reqwest::Method::POST,
            &format!("/v1/admin/devices/{}/forget", device.id),
            None,
        )
        .await
        .expect("forget");
    assert_eq!(status, 200);
    assert!(server.admin().devices().await.expect("devices").is_empty());
    let _back = FakeBrowser::serve_default(profile(&ext, "a1b2c3d4", "Laptop").await);
    let devices = server.admin().devices().await.expect("devices");
    assert_eq!(devices.len(), 1);
    assert_eq!(
        devices[0].status,
        latchkey_protocol::api::DeviceStatus::Active
    );
    let (status, body) = server
        .admin()
        .raw(
            latchkey_testkit::reqwest::Method::POST,
            &format!("/v1/admin/devices/{}/forget", devices[0].id),
            None,
        )
        .await
        .expect("forget");
    assert_eq!(status, 400, "a live device is not forgotten: {body}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_local_mode_pairing_is_required() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let ext = unpaired(&server);
    let refused = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
        .await
        .expect("request");
    assert_eq!(refused.expect_err("no credential").status, 401);
    let root = format!("ws://{}/", server.addr());
    let refused = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], Some(&root))
        .await
        .expect("request");
    assert_eq!(refused.expect_err("no local root").status, 404);
    server.stop().await;
}
