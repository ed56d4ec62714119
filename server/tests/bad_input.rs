//! Every rejection on the extension endpoints, table-driven: the exact status and
//! body, the bsk headers, and that nothing changed (no device appeared, the link
//! still works afterwards).

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::{Ended, HttpAnswer, TEST_EXTENSION_ORIGIN, new_token};
use latchkey_testkit::{Backend, FakeExtension, TestServer, backend_tests, logs};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Extra request headers of one table row.
type Headers<'a> = Vec<(&'a str, &'a str)>;

const UNAUTHORIZED: &str = r#"{"error":"invalid_authorization"}"#;
const INVALID: &str = r#"{"error":"invalid_request"}"#;
const NOT_FOUND: &str = r#"{"error":"not_found"}"#;

fn assert_refusal(case: &str, answer: &HttpAnswer, status: u16, body: &str) {
    assert_eq!(answer.status, status, "{case}: {}", answer.body);
    assert_eq!(answer.body, body, "{case}");
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(
        header("cache-control").as_deref(),
        Some("no-store"),
        "{case}"
    );
    assert_eq!(
        header("content-type").as_deref(),
        Some("application/json"),
        "{case}"
    );
    assert_eq!(header("connection").as_deref(), Some("close"), "{case}");
}

/// POST to the authorize URL with full control of headers and body.
async fn post(
    server: &TestServer,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<latchkey_testkit::reqwest::Body>,
) -> HttpAnswer {
    let mut req = server.http.post(url).body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("request");
    HttpAnswer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.expect("body"),
    }
}

async fn authorize_rejections(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let ext = server.new_extension().await.expect("ext");
    let url = ext.authorize_url.clone();
    let secret = ext.pairing_secret.clone();
    let bearer = format!("Bearer {secret}");
    let json_ct = ("content-type", "application/json");
    let good = json!({"action": "pair", "next_token": new_token()}).to_string();

    // (case, headers, body, status, expected body)
    let big =
        json!({"action": "pair", "next_token": new_token(), "label": "x".repeat(5000)}).to_string();
    let cases: Vec<(&str, Headers, String, u16, &str)> = vec![
        (
            "unknown secret",
            vec![
                (
                    "authorization",
                    "Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                ),
                json_ct,
            ],
            good.clone(),
            401,
            UNAUTHORIZED,
        ),
        ("no bearer", vec![json_ct], good.clone(), 401, UNAUTHORIZED),
        (
            "basic auth",
            vec![("authorization", "Basic Zm9vOmJhcg=="), json_ct],
            good.clone(),
            401,
            UNAUTHORIZED,
        ),
        (
            "two bearers",
            vec![
                ("authorization", &bearer),
                ("authorization", &bearer),
                json_ct,
            ],
            good.clone(),
            401,
            UNAUTHORIZED,
        ),
        (
            "short secret",
            vec![("authorization", "Bearer abc"), json_ct],
            good.clone(),
            401,
            UNAUTHORIZED,
        ),
        (
            "body over 4 KiB",
            vec![("authorization", &bearer), json_ct],
            big,
            400,
            INVALID,
        ),
        (
            "not JSON",
            vec![("authorization", &bearer), json_ct],
            "{nope".into(),
            400,
            INVALID,
        ),
        (
            "wrong content type",
            vec![("authorization", &bearer), ("content-type", "text/plain")],
            good.clone(),
            400,
            INVALID,
        ),
        (
            "unknown key",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "pair", "next_token": new_token(), "extra": 1}).to_string(),
            400,
            INVALID,
        ),
        (
            "unknown action",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "steal", "next_token": new_token()}).to_string(),
            400,
            INVALID,
        ),
        (
            "next_token 42 chars",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "pair", "next_token": "a".repeat(42)}).to_string(),
            400,
            INVALID,
        ),
        (
            "next_token 44 chars",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "pair", "next_token": "a".repeat(44)}).to_string(),
            400,
            INVALID,
        ),
        (
            "next_token padded",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "pair", "next_token": format!("{}=", "a".repeat(42))}).to_string(),
            400,
            INVALID,
        ),
        (
            "next_token missing",
            vec![("authorization", &bearer), json_ct],
            json!({"action": "pair"}).to_string(),
            400,
            INVALID,
        ),
    ];
    for (case, headers, body, status, expected) in cases {
        let answer = post(&server, &url, &headers, body).await;
        assert_refusal(case, &answer, status, expected);
    }

    // Any query string → 401, even with a valid secret.
    let answer = post(
        &server,
        &format!("{url}?x=1"),
        &[("authorization", &bearer), json_ct],
        good.clone(),
    )
    .await;
    assert_refusal("query string", &answer, 401, UNAUTHORIZED);

    // Other methods and paths → 404.
    let resp = server.http.get(&url).send().await.expect("get");
    let answer = HttpAnswer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.expect("body"),
    };
    assert_refusal("GET authorize", &answer, 404, NOT_FOUND);
    let other = url.replace("/extension/authorize", "/extension/other");
    let resp = server.http.post(&other).send().await.expect("post");
    assert_eq!(resp.status().as_u16(), 404, "other path");

    // Nothing changed: no device, and the link still pairs.
    assert!(server.admin().devices().await.expect("list").is_empty());
    let mut ext = ext;
    ext.pair()
        .await
        .expect("the link still works after every refusal");

    // Used and expired secrets answer exactly like unknown ones.
    let used = ext
        .pair_with(&new_token())
        .await
        .expect("request")
        .expect_err("used");
    assert_refusal("used secret", &used, 401, UNAUTHORIZED);
    let expired_link = server
        .admin()
        .create_pairing(None, Some(1))
        .await
        .expect("pairing");
    server.clock().advance(Duration::from_secs(2));
    let mut expired =
        FakeExtension::from_link(&expired_link.link, server.http.clone(), None).expect("link");
    let answer = expired
        .pair_with(&new_token())
        .await
        .expect("request")
        .expect_err("expired");
    assert_refusal("expired secret", &answer, 401, UNAUTHORIZED);
    // An unknown device token on renew, too.
    let answer = ext
        .renew_raw(&new_token(), &new_token())
        .await
        .expect("renew");
    assert_refusal("unknown token", &answer, 401, UNAUTHORIZED);
    // Renewing to the same token.
    let current = ext.token.clone().expect("token");
    let answer = ext.renew_raw(&current, &current).await.expect("renew");
    assert_refusal("same successor", &answer, 401, UNAUTHORIZED);

    logs::assert_no_secrets(&[&secret, &current]);
    server.stop().await;
}

backend_tests!(authorize, authorize_rejections);

/// A body that never finishes arriving is refused after the body timeout.
#[tokio::test]
async fn slow_body_is_refused() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.body_timeout_ms = 300)
        .start()
        .await
        .expect("server");
    let ext = server.new_extension().await.expect("ext");
    let mut tcp = tokio::net::TcpStream::connect(server.addr())
        .await
        .expect("tcp");
    let head = format!(
        "POST /extension/authorize HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 200\r\n\r\n{{\"action\":",
        ext.pairing_secret
    );
    tcp.write_all(head.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut response)).await;
    assert!(read.is_ok(), "the server must answer and close");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.ends_with(INVALID), "{text}");
    server.stop().await;
}

async fn upgrade_rejections(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    let secret = ext.pairing_secret.clone();
    ext.pair().await.expect("pair");
    let token = ext.token.clone().expect("token");
    let proto = format!("bsk-auth.{token}");
    let other_ext = format!("chrome-extension://{}", "p".repeat(32));
    let bad_id = format!("chrome-extension://{}", "z".repeat(32));
    let trailing = format!("{TEST_EXTENSION_ORIGIN}/");
    let two = format!("{proto}, chat");
    let secret_proto = format!("bsk-auth.{secret}");
    let long_proto = format!("bsk-auth.{}", "a".repeat(8192));
    let origin = ("origin", TEST_EXTENSION_ORIGIN);
    let sp = "sec-websocket-protocol";

    let cases: Vec<(&str, Headers, Option<String>, u16, &str)> = vec![
        (
            "missing origin",
            vec![(sp, &proto)],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "two origins",
            vec![(sp, &proto), origin, origin],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "web origin",
            vec![(sp, &proto), ("origin", "http://localhost")],
            None,
            403,
            UNAUTHORIZED,
        ),
        (
            "null origin",
            vec![(sp, &proto), ("origin", "null")],
            None,
            403,
            UNAUTHORIZED,
        ),
        (
            "bad extension id",
            vec![(sp, &proto), ("origin", &bad_id)],
            None,
            403,
            UNAUTHORIZED,
        ),
        (
            "trailing slash",
            vec![(sp, &proto), ("origin", &trailing)],
            None,
            403,
            UNAUTHORIZED,
        ),
        ("no subprotocol", vec![origin], None, 401, UNAUTHORIZED),
        (
            "two subprotocols",
            vec![(sp, &two), origin],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "duplicate subprotocol headers",
            vec![(sp, &proto), (sp, &proto), origin],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "pairing secret as token",
            vec![(sp, &secret_proto), origin],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "8 KiB subprotocol",
            vec![(sp, &long_proto), origin],
            None,
            401,
            UNAUTHORIZED,
        ),
        (
            "query string",
            vec![(sp, &proto), origin],
            Some(format!("{}?a=b", ext.ws_url)),
            401,
            UNAUTHORIZED,
        ),
    ];
    for (case, headers, url, status, body) in cases {
        let answer = ext
            .connect_with(&headers, url.as_deref())
            .await
            .expect("request")
            .expect_err(case);
        assert_eq!(answer.status, status, "{case}");
        assert_eq!(answer.body, body, "{case}");
    }
    // Another (well-formed) extension id is fine without an allow-list.
    let ok = ext
        .connect_with(&[(sp, &proto), ("origin", &other_ext)], None)
        .await
        .expect("request");
    assert!(
        ok.is_ok(),
        "any extension id connects when no allow-list is set"
    );
    logs::assert_no_secrets(&[&token, &secret]);
    server.stop().await;
}

backend_tests!(upgrade, upgrade_rejections);

/// The handshake rules of docs/protocol.md, "Handshake".
#[tokio::test]
async fn handshake_rejections() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.handshake_timeout_ms = 300)
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");
    let deadline = Duration::from_secs(10);
    let policy = latchkey_protocol::CloseCode::PolicyViolation.code();

    // Nothing sent: closed after the first-frame limit.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    assert_eq!(s.ended(deadline).await.expect("end"), Ended::Closed(policy));

    // Non-SemVer version: closed without a reply.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    let mut params = latchkey_testkit::extension::handshake_params();
    params.version = "1.2".into();
    let req = latchkey_protocol::RequestFrame::new(
        "hs-1",
        "system.handshake",
        Some(serde_json::to_value(&params).expect("json")),
    );
    s.send_frame(&latchkey_protocol::Frame::Request(req))
        .await
        .expect("send");
    assert_eq!(s.ended(deadline).await.expect("end"), Ended::Closed(policy));

    // Incompatible protocol: `version_too_old` with the protocol's data, then closed.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    let mut params = latchkey_testkit::extension::handshake_params();
    params.protocol_version = "2.0".into();
    match s.handshake_with(&params).await.expect("reply") {
        latchkey_protocol::Frame::Error(e) => {
            assert_eq!(e.error.code, latchkey_protocol::ErrorCode::VersionTooOld);
            let data = e.error.data.expect("data");
            assert_eq!(data["peer_protocol_version"], "2.0");
            assert_eq!(data["daemon_protocol_version"], "1.0");
            assert_eq!(data["min_compatible_protocol"], "1.0");
        }
        other => panic!("expected version_too_old, got {other:?}"),
    }
    assert_eq!(s.ended(deadline).await.expect("end"), Ended::Closed(policy));

    // A 1.3 extension is accepted.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    let mut params = latchkey_testkit::extension::handshake_params();
    params.protocol_version = "1.3".into();
    assert!(matches!(
        s.handshake_with(&params).await.expect("reply"),
        latchkey_protocol::Frame::Success(_)
    ));

    // Another request first: protocol_error, then closed.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    s.send_text(r#"{"id":"x1","method":"tool.tab_list","params":{}}"#)
        .await
        .expect("send");
    match s.next_frame().await.expect("reply") {
        latchkey_protocol::Frame::Error(e) => {
            assert_eq!(e.error.code, latchkey_protocol::ErrorCode::ProtocolError);
            assert_eq!(e.error.message, "first frame must be system.handshake");
        }
        other => panic!("expected protocol_error, got {other:?}"),
    }
    assert_eq!(s.ended(deadline).await.expect("end"), Ended::Closed(policy));

    // Non-JSON first frame: closed without a reply.
    let mut s = ext.connect().await.expect("c").expect("upgrade");
    s.send_text("hello").await.expect("send");
    assert_eq!(s.ended(deadline).await.expect("end"), Ended::Closed(policy));

    // After the handshake: junk is ignored, unknown requests get unknown_method,
    // and the socket stays usable.
    let mut s = ext.connect_online().await.expect("online");
    s.send_text("not json").await.expect("send");
    s.send_text(r#"{"id":"a1","result":{}}"#)
        .await
        .expect("send");
    s.send_text(r#"{"event":"future.event","payload":{"x":1}}"#)
        .await
        .expect("send");
    s.send_text(r#"{"id":"r1","method":"audit.request","params":{}}"#)
        .await
        .expect("send");
    match s.next_frame().await.expect("reply") {
        latchkey_protocol::Frame::Error(e) => {
            assert_eq!(e.id, "r1");
            assert_eq!(e.error.code, latchkey_protocol::ErrorCode::UnknownMethod);
        }
        other => panic!("expected unknown_method, got {other:?}"),
    }
    server.stop().await;
}

/// Admin API refusals carry the stable code table's status and body.
#[tokio::test]
async fn admin_api_rejections() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let admin = server.admin();
    let no_token = server.admin_with("lk_nope");
    let (status, body) = no_token
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/devices",
            None,
        )
        .await
        .expect("req");
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthorized");

    let agent = admin
        .create_token("agent-1", latchkey_protocol::api::Role::Agent)
        .await
        .expect("token");
    let (status, body) = server
        .admin_with(&agent.token)
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/devices",
            None,
        )
        .await
        .expect("req");
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "permission_denied");

    let cases: Vec<(&str, Value, &str)> = vec![
        ("ttl 0", json!({"ttl_secs": 0}), "invalid_params"),
        (
            "ttl over an hour",
            json!({"ttl_secs": 3601}),
            "invalid_params",
        ),
        ("empty label", json!({"label": "  "}), "invalid_params"),
        ("unknown key", json!({"nope": 1}), "invalid_request"),
    ];
    for (case, body, code) in cases {
        let (status, answer) = admin
            .raw(
                latchkey_testkit::reqwest::Method::POST,
                "/v1/admin/pairings",
                Some(body),
            )
            .await
            .expect("req");
        assert_eq!(status, 400, "{case}");
        assert_eq!(answer["error"]["code"], code, "{case}");
    }
    let (status, body) = admin
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/audit?limit=0",
            None,
        )
        .await
        .expect("req");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_params"))
    );
    let (status, body) = admin
        .raw(latchkey_testkit::reqwest::Method::GET, "/v1/nowhere", None)
        .await
        .expect("req");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    server.stop().await;
}
