//! Tenant isolation: another tenant's ids answer exactly like unknown ones.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests, logs};
use serde_json::json;

async fn foreign_ids_look_unknown(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let a = server.admin();
    let mut ext = server.new_extension().await.expect("ext");
    let device = ext.pair().await.expect("pair").device_id;
    // Online while tenant B tries: a revocation closes a socket before its commit,
    // so a foreign id must not reach the socket either.
    let _online = ext.connect_online().await.expect("online");
    let a_token = a
        .create_token("a-agent", latchkey_protocol::api::Role::Agent)
        .await
        .expect("token");

    let beta_token = server.new_tenant("beta").await.expect("tenant beta");
    let b = server.admin_with(&beta_token);
    assert!(
        b.devices().await.expect("list").is_empty(),
        "beta sees none of default's devices"
    );

    let unknown = "0123456789abcdef0123456789abcdef";
    let cases = [
        (Method::GET, "/v1/admin/devices/{}", None),
        (
            Method::PATCH,
            "/v1/admin/devices/{}",
            Some(json!({"label": "mine now"})),
        ),
        (Method::DELETE, "/v1/admin/devices/{}", None),
    ];
    for (method, path, body) in cases {
        let foreign = b
            .raw(method.clone(), &path.replace("{}", &device), body.clone())
            .await
            .expect("req");
        let missing = b
            .raw(method.clone(), &path.replace("{}", unknown), body.clone())
            .await
            .expect("req");
        assert_eq!(foreign, missing, "{method} {path}");
        assert_eq!(foreign.0, 404);
    }
    let foreign = b
        .raw(
            Method::DELETE,
            &format!("/v1/admin/tokens/{}", a_token.view.id),
            None,
        )
        .await
        .expect("req");
    let missing = b
        .raw(
            Method::DELETE,
            "/v1/admin/tokens/tok_0000000000000000",
            None,
        )
        .await
        .expect("req");
    assert_eq!(foreign, missing);

    // Nothing of tenant A changed, and B's revoke-all touched nothing of A's.
    let revoked = b.revoke_all().await.expect("revoke all");
    assert_eq!(revoked.revoked_devices, 0);
    // A close is signalled synchronously, before any answer: had either of B's
    // revocations reached A's socket, its link would be closed by now.
    let link = server
        .state()
        .registry
        .link(&device)
        .expect("A's device online");
    assert!(!link.is_closed(), "B's revocations closed A's socket");
    let view = a.device(&device).await.expect("device");
    assert_eq!(view.status, latchkey_protocol::api::DeviceStatus::Active);
    assert_ne!(view.label, "mine now");
    ext.connect_online()
        .await
        .expect("A's device still connects");
    let device_token = ext.token.clone().expect("token");
    logs::assert_no_secrets(&[
        &beta_token,
        &a_token.token,
        &device_token,
        &server.admin_token,
    ]);
    server.stop().await;
}

backend_tests!(cross_tenant, foreign_ids_look_unknown);
