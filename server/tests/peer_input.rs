//! Everything a peer sends is bounded and cleaned before it is stored or shown
//! (docs/security.md, "What a peer can make the gateway store"). An outside review
//! grew the SQLite file from 2.7 MB to 51 MB with five handshakes carrying multi-MiB
//! fields, and stored terminal escapes and a right-to-left override as sent.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::text;
use latchkey_protocol::{ErrorCode, Frame};
use latchkey_testkit::extension::{Ended, handshake_params};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

async fn audit_details(server: &TestServer) -> Vec<String> {
    let (_, body) = server
        .admin()
        .raw(Method::GET, "/v1/admin/audit?limit=1000", None)
        .await
        .expect("audit");
    body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e.to_string())
        .collect()
}

async fn handshake_fields_are_bounded_and_cleaned(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let grant = ext.pair().await.expect("pair");

    // A SemVer pre-release of 1 MiB: refused with the field named, nothing stored.
    let mut socket = ext.connect().await.expect("request").expect("upgrade");
    let mut huge = handshake_params();
    huge.version = format!("1.0.0-{}", "a".repeat(1 << 20));
    match socket.handshake_with(&huge).await.expect("answer") {
        Frame::Error(e) => {
            assert_eq!(e.error.code, ErrorCode::InvalidParams);
            assert_eq!(e.error.data.expect("data")["field"], "version");
        }
        other => panic!("accepted: {other:?}"),
    }
    assert_eq!(
        socket.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(1008)
    );
    for field in ["browser.name", "browser.version", "label", "client"] {
        let mut socket = ext.connect().await.expect("request").expect("upgrade");
        let mut p = handshake_params();
        let long = "x".repeat(text::MAX_LABEL_CHARS + 1);
        match field {
            "browser.name" => p.browser.name = long,
            "browser.version" => p.browser.version = long,
            "label" => p.label = long,
            _ => p.client = long,
        }
        match socket.handshake_with(&p).await.expect("answer") {
            Frame::Error(e) => assert_eq!(e.error.data.expect("data")["field"], field),
            other => panic!("{field} accepted: {other:?}"),
        }
    }
    let device = server
        .admin()
        .device(&grant.device_id)
        .await
        .expect("device");
    assert_eq!(
        device.browser_name, None,
        "a refused handshake stored nothing"
    );

    // Within the bounds, but hostile: stored without controls or overrides.
    let mut socket = ext.connect().await.expect("request").expect("upgrade");
    let mut p = handshake_params();
    p.browser.name = "chrome\u{1b}]0;owned\u{7}\u{1b}[31m\u{202E}exe".into();
    p.browser.version = "1\u{2066}2\u{0}".into();
    p.protocol_version = "1.0.\u{1b}[2J".into();
    assert!(matches!(
        socket.handshake_with(&p).await.expect("answer"),
        Frame::Success(_)
    ));
    drop(socket);
    let device = server
        .admin()
        .device(&grant.device_id)
        .await
        .expect("device");
    let stored = format!("{:?}{:?}", device.browser_name, device.browser_version);
    assert!(!stored.chars().any(text::is_unsafe), "{stored}");
    assert_eq!(
        device.browser_name.as_deref(),
        Some("chrome]0;owned[31mexe")
    );
    for row in audit_details(&server).await {
        assert!(
            !row.contains("\\u001b") && !row.contains('\u{202E}'),
            "{row}"
        );
    }
    server.stop().await;
}

backend_tests!(handshake_fields, handshake_fields_are_bounded_and_cleaned);

async fn admin_input_is_bounded_and_cleaned(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    // Over the limit: refused with the field named, nothing created.
    let (status, body) = admin
        .raw(
            Method::POST,
            "/v1/admin/tokens",
            Some(json!({"name": "n".repeat(65), "role": "agent"})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, body["error"]["data"]["field"].as_str()),
        (400, Some("name"))
    );
    let (status, body) = admin
        .raw(
            Method::POST,
            "/v1/admin/pairings",
            Some(json!({"label": "l".repeat(101)})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, body["error"]["data"]["max_chars"].as_u64()),
        (400, Some(100))
    );
    // Within it: cleaned of controls and bidirectional overrides.
    let (status, body) = admin
        .raw(
            Method::POST,
            "/v1/admin/tokens",
            Some(json!({"name": "ops\u{202E}nimda\u{1b}[0m", "role": "agent"})),
        )
        .await
        .expect("answer");
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "opsnimda[0m");
    let mut ext = server.new_extension().await.expect("extension");
    let grant = ext.pair().await.expect("pair");
    let (status, body) = admin
        .raw(
            Method::PATCH,
            &format!("/v1/admin/devices/{}", grant.device_id),
            Some(json!({"label": "Alice\u{2066} laptop\u{85}"})),
        )
        .await
        .expect("answer");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["label"], "Alice laptop");
    server.stop().await;
}

backend_tests!(admin_input, admin_input_is_bounded_and_cleaned);
