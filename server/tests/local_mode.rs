//! Local mode: unpaired extensions from loopback at `/` and `/extension`, into the
//! default tenant; revocable like any device. Off by default.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::extension::TEST_EXTENSION_ORIGIN;
use latchkey_testkit::{Backend, FakeBrowser, FakeExtension, TestServer};
use serde_json::json;

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
    assert_eq!(devices[0].owner, "local");
    // Still an extension Origin only, and revocation holds.
    let web = ext
        .connect_with(&[("origin", "http://localhost")], None)
        .await
        .expect("request");
    assert_eq!(web.expect_err("web origin").status, 403);
    server.admin().revoke(&devices[0].id).await.expect("revoke");
    let refused = ext
        .connect_with(&[("origin", TEST_EXTENSION_ORIGIN)], None)
        .await
        .expect("request");
    assert_eq!(refused.expect_err("revoked").status, 401);
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
