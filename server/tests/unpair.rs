//! "Forget this server" in our extension ends the device on the server too
//! (docs/protocol.md, "Latchkey's additions"), on the real server, both
//! backends: the device's own credential revokes it like an admin would (its
//! socket closes with 4001, the list shows it revoked), the trail says its owner
//! removed it, and any other credential gets the authorize endpoint's 401.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::{Ended, handshake_params};
use latchkey_testkit::{Backend, TestServer, backend_tests};

const DEADLINE: Duration = Duration::from_secs(10);

async fn forgetting_the_server_revokes_the_device_by_its_own_credential(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let pairing = admin
        .create_pairing(Some("Alice laptop"), None)
        .await
        .expect("pairing");
    let mut ext = server
        .extension_from_link(&pairing.link)
        .expect("extension");
    let grant = ext.pair().await.expect("pair");
    let mut socket = ext.connect().await.expect("connect").expect("upgrade");
    let mut params = handshake_params();
    params.latchkey_features = Some(vec!["agent_info".into()]);
    let answer = socket.handshake_with(&params).await.expect("handshake");
    let result = match answer {
        latchkey_protocol::Frame::Success(s) => s.result,
        other => panic!("handshake refused: {other:?}"),
    };
    // The extension learns the name the team knows it by, and that it may unpair.
    assert_eq!(result["latchkey_device"]["label"], "Alice laptop");
    // And the name of its team: each browser hears its own.
    assert_eq!(result["latchkey_device"]["team"], "default");
    let acme = server.admin_with(&server.new_tenant("acme").await.expect("team"));
    let link = acme.create_pairing(None, None).await.expect("pairing");
    let mut theirs = server.extension_from_link(&link.link).expect("extension");
    theirs.pair().await.expect("pair");
    let mut their_socket = theirs.connect().await.expect("connect").expect("upgrade");
    match their_socket
        .handshake_with(&params)
        .await
        .expect("handshake")
    {
        latchkey_protocol::Frame::Success(s) => {
            assert_eq!(s.result["latchkey_device"]["team"], "acme", "{}", s.result);
        }
        other => panic!("handshake refused: {other:?}"),
    }
    assert!(
        result["latchkey_features"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "unpair")),
        "{result}"
    );

    let revoked = || async {
        admin
            .device(&grant.device_id)
            .await
            .expect("device")
            .revoked_at
            .is_some()
    };
    let url = format!("{}/extension/device", server.http_base());
    let token = ext.token.clone().expect("a credential");
    let http = server.http.clone();
    let delete = |bearer: Option<String>| {
        let mut r = http.delete(&url);
        if let Some(b) = bearer {
            r = r.bearer_auth(b);
        }
        r.send()
    };
    // Anything but the device's own live credential: the authorize endpoint's 401.
    for bearer in [None, Some("x".repeat(43)), Some("short".into())] {
        let r = delete(bearer).await.expect("answer");
        assert_eq!(r.status(), 401);
        let body: serde_json::Value = r.json().await.expect("json");
        assert_eq!(body, serde_json::json!({"error": "invalid_authorization"}));
    }
    assert!(!revoked().await, "not revoked by a refused request");

    let r = delete(Some(token.clone())).await.expect("answer");
    assert_eq!(r.status(), 204);
    assert_eq!(
        socket.ended(DEADLINE).await.expect("end"),
        Ended::Closed(latchkey_protocol::CloseCode::Revoked.code())
    );
    assert!(revoked().await, "revoked on the server");
    let device_ref = format!("device:{}", grant.device_id);
    assert!(
        admin
            .audit_has(
                DEADLINE,
                &["device.unpair", &device_ref, "forgotten by its owner"]
            )
            .await
    );
    // Once is enough: the credential is dead now.
    let again = delete(Some(token)).await.expect("answer");
    assert_eq!(again.status(), 401);
}
backend_tests!(
    unpair,
    forgetting_the_server_revokes_the_device_by_its_own_credential
);
