//! Requests that are not valid WebSocket upgrades (RFC 6455, section 4.2.1), sent
//! as raw HTTP to a real server: each is refused with 400 and its surface's error
//! body, and never switches protocols; a valid one does, with the accept key that
//! proves the server read the client's.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::extension::TEST_EXTENSION_ORIGIN;
use latchkey_testkit::{Backend, TestServer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// Send `GET path` with these header lines (each `name: value`); return the
/// status line and headers, and the body (read to its `Content-Length`).
async fn send(server: &TestServer, path: &str, headers: &[String]) -> (String, String) {
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", server.addr());
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.expect("head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_string())
        })
        .map_or(0, |v| v.parse::<usize>().expect("length"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("body");
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// A browser's upgrade headers, without the header named `without` and with `extra`.
fn upgrade_headers(without: &str, extra: &[String]) -> Vec<String> {
    let mut headers: Vec<String> = [
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", KEY),
    ]
    .iter()
    .filter(|(name, _)| !name.eq_ignore_ascii_case(without))
    .map(|(name, value)| format!("{name}: {value}"))
    .collect();
    headers.extend_from_slice(extra);
    headers
}

/// One way a request can fail to be an upgrade. A method other than GET never
/// reaches the upgrade: the router answers it first.
struct Broken {
    case: &'static str,
    /// The browser's header left out.
    without: &'static str,
    /// A header line sent instead.
    instead: Option<&'static str>,
    /// What the agent socket's message names.
    names: &'static str,
}

const BROKEN: &[Broken] = &[
    Broken {
        case: "no Connection",
        without: "connection",
        instead: None,
        names: "Connection",
    },
    Broken {
        case: "no Upgrade",
        without: "upgrade",
        instead: None,
        names: "Upgrade",
    },
    Broken {
        case: "no version",
        without: "sec-websocket-version",
        instead: None,
        names: "Sec-WebSocket-Version",
    },
    Broken {
        case: "version 8",
        without: "sec-websocket-version",
        instead: Some("Sec-WebSocket-Version: 8"),
        names: "Sec-WebSocket-Version",
    },
    Broken {
        case: "no key",
        without: "sec-websocket-key",
        instead: None,
        names: "Sec-WebSocket-Key",
    },
    Broken {
        case: "short key",
        without: "sec-websocket-key",
        instead: Some("Sec-WebSocket-Key: c2hvcnQ="),
        names: "Sec-WebSocket-Key",
    },
];

/// Each broken upgrade sent to `path` with the surface's credentials `auth`, its
/// answer checked to be a 400: the case with the answer's body, for the surface's
/// own checks.
async fn refusals(
    server: &TestServer,
    path: &str,
    auth: &[String],
) -> Vec<(&'static Broken, String)> {
    let mut answers = Vec::with_capacity(BROKEN.len());
    for b in BROKEN {
        let extra: Vec<String> = auth
            .iter()
            .cloned()
            .chain(b.instead.map(str::to_string))
            .collect();
        let (head, body) = send(server, path, &upgrade_headers(b.without, &extra)).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{}: {head}", b.case);
        answers.push((b, body));
    }
    answers
}

#[tokio::test]
async fn the_agent_socket_names_what_is_wrong() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let auth = format!("Authorization: Bearer {}", agent.token);
    for (b, body) in refusals(&server, "/v1/agent", std::slice::from_ref(&auth)).await {
        let body: Value = serde_json::from_str(&body).expect("json body");
        assert_eq!(
            body["error"]["code"], "invalid_request",
            "{}: {body}",
            b.case
        );
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains(b.names), "{}: {message}", b.case);
    }
    let (head, _) = send(&server, "/v1/agent", &upgrade_headers("", &[auth])).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        "{head}"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_extension_socket_answers_invalid_upgrade() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    let token = ext.token.clone().expect("token");
    let auth = [
        format!("Origin: {TEST_EXTENSION_ORIGIN}"),
        format!("Sec-WebSocket-Protocol: bsk-auth.{token}"),
    ];
    for (b, body) in refusals(&server, "/extension", &auth).await {
        assert_eq!(body, r#"{"error":"invalid_upgrade"}"#, "{}", b.case);
    }
    let (head, _) = send(&server, "/extension", &upgrade_headers("", &auth)).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.contains(&format!("sec-websocket-protocol: bsk-auth.{token}")),
        "{head}"
    );
    server.stop().await;
}
