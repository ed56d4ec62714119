//! The upgrade's Origin and subprotocol rules under abuse (docs/protocol.md, "The upgrade"):
//! a table of 20 Origins against an allow-list, where exactly the allowed one upgrades; and
//! abusive `Sec-WebSocket-Protocol` offers, each refused with nothing echoed back and
//! nothing of the offered value in the logs.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::extension::TEST_EXTENSION_ORIGIN;
use latchkey_testkit::{Backend, TestServer, logs};

const UNAUTHORIZED: &str = r#"{"error":"invalid_authorization"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_allowed_origin_upgrades() {
    let allowed_id = TEST_EXTENSION_ORIGIN
        .strip_prefix("chrome-extension://")
        .expect("test origin")
        .to_string();
    let server = TestServer::builder(Backend::Sqlite)
        .config(move |c| c.allowed_extension_ids = vec![allowed_id])
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    let protocol = format!("bsk-auth.{}", ext.token.clone().expect("token"));
    let id = "abcdefghijklmnopabcdefghijklmnop";
    let upper = id.to_uppercase();
    let mixed = format!("{}{}", &upper[..16], &id[16..]);
    let origins: Vec<(String, Option<u16>)> = vec![
        (TEST_EXTENSION_ORIGIN.to_string(), None),
        (format!("CHROME-EXTENSION://{id}"), Some(403)),
        (format!("chrome-extension://{upper}"), Some(403)),
        (format!("chrome-extension://{mixed}"), Some(403)),
        (format!("chrome-extension://{id}/"), Some(403)),
        (format!("chrome-extension://{id}:443"), Some(403)),
        (format!("chrome-extension://{id}/popup.html"), Some(403)),
        (format!("chrome-extension://{id}#"), Some(403)),
        ("null".to_string(), Some(403)),
        (format!("chrome-extension://{}", "p".repeat(32)), Some(403)),
        ("http://localhost".to_string(), Some(403)),
        ("http://127.0.0.1:52800".to_string(), Some(403)),
        (format!("https://{id}"), Some(403)),
        (format!("moz-extension://{id}"), Some(403)),
        (format!("chrome-extension://{}", &id[..31]), Some(403)),
        (format!("chrome-extension://{id}a"), Some(403)),
        (format!("chrome-extension://{}q", &id[..31]), Some(403)),
        (format!("chrome-extension:/{id}"), Some(403)),
        ("chrome-extension://".to_string(), Some(403)),
        (format!("chrome-extension://user@{id}"), Some(403)),
    ];
    assert_eq!(origins.len(), 20);
    for (origin, refusal) in &origins {
        let answer = ext
            .connect_with(
                &[
                    ("sec-websocket-protocol", protocol.as_str()),
                    ("origin", origin.as_str()),
                ],
                None,
            )
            .await
            .expect("request");
        match (answer, refusal) {
            (Ok(_), None) => {}
            (Ok(_), Some(status)) => panic!("{origin}: upgraded, expected {status}"),
            (Err(a), None) => panic!("{origin}: refused {} {}", a.status, a.body),
            (Err(a), Some(status)) => {
                assert_eq!(a.status, *status, "{origin}");
                assert_eq!(a.body, UNAUTHORIZED, "{origin}");
                assert!(a.headers.get("sec-websocket-protocol").is_none());
            }
        }
    }
    // Missing and repeated Origins: 401.
    for headers in [
        vec![("sec-websocket-protocol", protocol.as_str())],
        vec![
            ("sec-websocket-protocol", protocol.as_str()),
            ("origin", TEST_EXTENSION_ORIGIN),
            ("origin", TEST_EXTENSION_ORIGIN),
        ],
    ] {
        let refused = ext
            .connect_with(&headers, None)
            .await
            .expect("request")
            .expect_err("no single Origin");
        assert_eq!(refused.status, 401);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abusive_subprotocol_offers_are_refused_echoing_and_logging_nothing() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    let token = ext.token.clone().expect("token");
    let good = format!("bsk-auth.{token}");
    let long = format!("bsk-auth.{}", "a".repeat(8192));
    let offers: Vec<Vec<String>> = vec![
        vec![format!("{good}, chat")],
        vec![format!("chat, {good}")],
        vec![format!("{good}, {good}")],
        vec![good.clone(), good.clone()],
        vec![good.clone(), "chat".to_string()],
        vec![long.clone()],
        vec![format!("bsk-auth.{}!", &token[..42])],
        vec![format!("bsk-auth.{}=", &token[..42])],
        vec![format!("bsk-auth.{}", &token[..42])],
        vec![format!("{good}a")],
        vec!["bsk-auth.".to_string()],
        vec![format!("BSK-AUTH.{token}")],
        vec![format!("bsk-auth-{token}")],
        vec![token.clone()],
        vec![",,,".to_string()],
        vec![format!("bsk-auth.{token};q=1")],
    ];
    for offer in &offers {
        let mut headers: Vec<(&str, &str)> = vec![("origin", TEST_EXTENSION_ORIGIN)];
        headers.extend(offer.iter().map(|o| ("sec-websocket-protocol", o.as_str())));
        let refused = ext.connect_with(&headers, None).await.expect("request");
        let Err(refused) = refused else {
            panic!("{offer:?} upgraded");
        };
        assert_eq!(refused.status, 401, "{offer:?}");
        assert_eq!(refused.body, UNAUTHORIZED, "{offer:?}");
        assert!(
            refused.headers.get("sec-websocket-protocol").is_none(),
            "{offer:?}: a refusal echoes nothing"
        );
    }
    // The token still works, and none of it (or the long value) reached the logs.
    ext.connect_online()
        .await
        .expect("the real offer still upgrades");
    logs::assert_no_secrets(&[&token, &long[9..]]);
    server.stop().await;
}
