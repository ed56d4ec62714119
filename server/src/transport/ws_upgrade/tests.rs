use axum::http::Request;

use super::*;
use crate::config::Limits;
use crate::transport::{WS_READ_CHUNK, WS_WRITE_SLACK, websocket_config};

/// The request a browser sends (RFC 6455, section 1.3's key), with `edit` applied.
fn request(edit: impl FnOnce(&mut Request<()>)) -> Parts {
    let mut request = Request::get("/extension")
        .header("host", "gateway.test")
        .header("connection", "keep-alive, Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .body(())
        .expect("request");
    // What hyper puts on a request whose connection can be upgraded.
    let on_upgrade = hyper::upgrade::on(Request::new(()));
    request.extensions_mut().insert(on_upgrade);
    edit(&mut request);
    request.into_parts().0
}

async fn extract(mut parts: Parts) -> Result<WsUpgrade, NotAnUpgrade> {
    WsUpgrade::from_request_parts(&mut parts, &()).await
}

fn set(name: &'static str, value: &'static str) -> impl FnOnce(&mut Request<()>) {
    move |r| {
        r.headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
}

#[tokio::test]
async fn a_browser_upgrade_is_accepted() {
    assert!(extract(request(|_| {})).await.is_ok());
    // Tokens compare without case; lists may repeat the header.
    let lenient = request(|r| {
        let h = r.headers_mut();
        h.insert("connection", HeaderValue::from_static("UPGRADE"));
        h.insert("upgrade", HeaderValue::from_static("WebSocket"));
        h.append("connection", HeaderValue::from_static("keep-alive"));
    });
    assert!(extract(lenient).await.is_ok());
}

#[tokio::test]
async fn each_missing_or_wrong_part_is_named() {
    let cases: Vec<(Parts, NotAnUpgrade)> = vec![
        (
            request(|r| *r.method_mut() = Method::POST),
            NotAnUpgrade::MethodNotGet,
        ),
        (
            request(|r| drop(r.headers_mut().remove("connection"))),
            NotAnUpgrade::ConnectionHeader,
        ),
        // A substring is not the token.
        (
            request(set("connection", "upgraded")),
            NotAnUpgrade::ConnectionHeader,
        ),
        (request(set("upgrade", "h2c")), NotAnUpgrade::UpgradeHeader),
        (
            request(set("upgrade", "websocketx")),
            NotAnUpgrade::UpgradeHeader,
        ),
        (
            request(set("sec-websocket-version", "8")),
            NotAnUpgrade::VersionHeader,
        ),
        (
            request(|r| {
                r.headers_mut()
                    .append("sec-websocket-version", HeaderValue::from_static("13"));
            }),
            NotAnUpgrade::VersionHeader,
        ),
        (
            request(|r| drop(r.headers_mut().remove("sec-websocket-key"))),
            NotAnUpgrade::KeyHeader,
        ),
        (
            request(set("sec-websocket-key", "not base64!")),
            NotAnUpgrade::KeyHeader,
        ),
        // Valid base64 of 15 bytes.
        (
            request(set("sec-websocket-key", "dGhlIHNhbXBsZSBub25j")),
            NotAnUpgrade::KeyHeader,
        ),
        (
            request(|r| drop(r.extensions_mut().remove::<OnUpgrade>())),
            NotAnUpgrade::NotUpgradable,
        ),
    ];
    for (parts, expected) in cases {
        let headers = format!("{:?}", parts.headers);
        assert_eq!(extract(parts).await.err(), Some(expected), "{headers}");
    }
}

#[tokio::test]
async fn a_refusal_says_what_is_wrong() {
    let response = NotAnUpgrade::ConnectionHeader.into_response();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let response = NotAnUpgrade::VersionHeader.into_response();
    assert_eq!(response.status(), StatusCode::UPGRADE_REQUIRED);
    assert_eq!(response.headers()[header::SEC_WEBSOCKET_VERSION], "13");
}

#[test]
fn the_101_proves_the_key_and_selects_the_protocol() {
    let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
    let response = switching_protocols(&key, Some(HeaderValue::from_static("bsk-auth.x")));
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    let h = response.headers();
    // RFC 6455, section 1.3.
    assert_eq!(
        h[header::SEC_WEBSOCKET_ACCEPT],
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
    assert_eq!(h[header::CONNECTION], "upgrade");
    assert_eq!(h[header::UPGRADE], "websocket");
    assert_eq!(h[header::SEC_WEBSOCKET_PROTOCOL], "bsk-auth.x");
    let none = switching_protocols(&key, None);
    assert!(!none.headers().contains_key(header::SEC_WEBSOCKET_PROTOCOL));
}

#[test]
fn the_settings_hold_our_limits() {
    let limits = Limits::default();
    let config = websocket_config(&limits);
    assert_eq!(config.read_buffer_size, WS_READ_CHUNK);
    assert_eq!(config.max_message_size, Some(limits.max_message_bytes));
    assert_eq!(config.max_frame_size, Some(limits.max_message_bytes));
    assert_eq!(
        config.max_write_buffer_size,
        limits.max_message_bytes + WS_WRITE_SLACK
    );
}
