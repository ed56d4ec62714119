//! Every agent command of the `latchkey` CLI against the real server and a scripted
//! extension: what reached the browser, and what the CLI printed.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use base64::Engine;
use common::latchkey;
use latchkey_protocol::error_code::exit;
use latchkey_protocol::{ErrorBody, ErrorCode};
use latchkey_testkit::{Action, Backend, TestServer};
use serde_json::{Value, json};

/// A tiny valid PNG header plus bytes, standing in for a screenshot.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n-latchkey-test-image-";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_commands_reach_the_browser() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let png_b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let script = Arc::new(
        move |r: &latchkey_protocol::RequestFrame| match r.method.as_str() {
            "tool.snapshot" => Some(Action::Reply(
                json!({"text": "- heading \"Welcome\"\n- button \"Sign in\" @e1", "ref_count": 1, "tab_id": 3}),
            )),
            "tool.get_html" => Some(Action::Reply(
                json!({"html": "<p>Hi\u{1b}[31m there</p>", "truncated": true, "byte_size": 9000, "tab_id": 3}),
            )),
            "tool.screenshot" => Some(Action::Reply(
                json!({"image_base64": png_b64, "width": 8, "height": 6, "format": "png", "tab_id": 3}),
            )),
            "tool.hover" if r.params.as_ref().is_some_and(|p| p["ref"] == "e9") => {
                Some(Action::Error(ErrorBody {
                    code: ErrorCode::NotFound,
                    message: "ref e9 is not in the current snapshot".into(),
                    data: Some(json!({"reason": "ref_not_found"})),
                }))
            }
            _ => None,
        },
    );
    let (device, browser) = server.new_browser(script).await.expect("browser");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", agent.token.as_str()),
    ];

    let r = latchkey(cfg, &env, &["--json", "browsers"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["browsers"][0]["id"], device.as_str());
    let r = latchkey(cfg, &env, &["browsers"]).await;
    assert!(
        r.stdout.contains(&device[..8]) && r.stdout.contains("online"),
        "{}",
        r.stdout
    );

    let r = latchkey(
        cfg,
        &env,
        &["session", "start", "--width", "1280", "--height", "800"],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let session = r.stdout.trim().to_string();
    assert_eq!(session.len(), 32);
    let start = browser
        .received()
        .into_iter()
        .find(|f| f.method == "tool.session_start")
        .expect("start");
    let params = start.params.expect("params");
    assert_eq!(params["width"], 1280);
    assert_eq!(
        params["focused"], false,
        "behind the person's window unless asked"
    );
    // --focus asks for the front.
    let r = latchkey(cfg, &env, &["session", "start", "--focus"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let focused = browser
        .received()
        .into_iter()
        .filter(|f| f.method == "tool.session_start")
        .nth(1)
        .and_then(|f| f.params)
        .expect("second start");
    assert_eq!(focused["focused"], true);
    let r = latchkey(cfg, &env, &["session", "stop", r.stdout.trim()]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);

    let mut env_s: Vec<(&str, &str)> = env.to_vec();
    env_s.push(("LATCHKEY_SESSION", session.as_str()));
    let shot = cfg.join("shot.png");
    let shot_s = shot.to_str().expect("path").to_string();
    // (args, method, expected params subset)
    let cases: Vec<(Vec<&str>, &str, Value)> = vec![
        (
            vec!["tab", "list", "--scope", "user"],
            "tool.tab_list",
            json!({"scope": "user"}),
        ),
        (
            vec!["tab", "create", "http://127.0.0.1/a", "--background"],
            "tool.tab_create",
            json!({"url": "http://127.0.0.1/a", "active": false}),
        ),
        (
            vec!["tab", "select", "7"],
            "tool.tab_select",
            json!({"tab_id": 7}),
        ),
        (
            vec!["tab", "borrow", "9"],
            "tool.tab_borrow",
            json!({"tab_id": 9}),
        ),
        (
            vec!["tab", "return", "9"],
            "tool.tab_return",
            json!({"tab_id": 9}),
        ),
        (
            vec!["tab", "close", "7"],
            "tool.tab_close",
            json!({"tab_id": 7}),
        ),
        (
            vec![
                "navigate",
                "http://127.0.0.1/b",
                "--wait-until",
                "domcontentloaded",
            ],
            "tool.navigate",
            json!({"url": "http://127.0.0.1/b", "wait_until": "domcontentloaded"}),
        ),
        (vec!["back"], "tool.navigate_back", json!({})),
        (vec!["forward"], "tool.navigate_forward", json!({})),
        (
            vec!["reload", "--hard"],
            "tool.reload",
            json!({"hard": true}),
        ),
        (vec!["click", "@e12"], "tool.click", json!({"ref": "e12"})),
        (
            vec!["click", "#submit"],
            "tool.click",
            json!({"selector": "#submit"}),
        ),
        (
            vec!["fill", "e4", "alice@example.com"],
            "tool.fill",
            json!({"ref": "e4", "value": "alice@example.com"}),
        ),
        (
            vec!["press", "Enter", "--target", "e4"],
            "tool.press",
            json!({"key": "Enter", "ref": "e4"}),
        ),
        (
            vec!["select", "e5", "red", "blue"],
            "tool.select",
            json!({"ref": "e5", "values": ["red", "blue"]}),
        ),
        (vec!["hover", "e6"], "tool.hover", json!({"ref": "e6"})),
        (
            vec!["evaluate", "document.title"],
            "tool.evaluate",
            json!({"expression": "document.title"}),
        ),
        (
            vec!["wait-for-navigation", "--wait-until", "load"],
            "tool.wait_for_navigation",
            json!({"wait_until": "load"}),
        ),
        (
            vec!["request-help", "--reason", "Please solve the CAPTCHA"],
            "tool.request_help",
            json!({"prompt": "Please solve the CAPTCHA"}),
        ),
        (
            vec!["call", "tool.console", "--params", "{\"limit\": 5}"],
            "tool.console",
            json!({"limit": 5}),
        ),
        (
            vec!["html", "--target", "@e7", "--max-bytes", "4096"],
            "tool.get_html",
            json!({"ref": "e7", "max_bytes": 4096}),
        ),
        (
            vec!["screenshot", "--out", shot_s.as_str()],
            "tool.screenshot",
            json!({}),
        ),
    ];
    for (args, method, expected) in cases {
        let mut full = vec!["--json"];
        full.extend(args.iter().copied());
        let r = latchkey(cfg, &env_s, &full).await;
        assert_eq!(r.code, 0, "{args:?}: {} {}", r.stderr, r.stdout);
        let _ = r.json();
        let sent = browser
            .received()
            .into_iter()
            .rev()
            .find(|f| f.method == method)
            .unwrap_or_else(|| panic!("{method} not sent"));
        let params = sent.params.expect("params");
        assert_eq!(params["session_id"], session.as_str());
        for (k, v) in expected.as_object().expect("object") {
            assert_eq!(&params[k], v, "{args:?}: param {k}");
        }
    }
    assert_eq!(std::fs::read(&shot).expect("png written"), PNG);

    // Human snapshot output is the page text.
    let r = latchkey(cfg, &env_s, &["snapshot"]).await;
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("button \"Sign in\" @e1"), "{}", r.stdout);

    // Human html output is the HTML, made safe for a terminal, with a note on
    // stderr when it was cut; a selector is refused before anything is sent.
    let r = latchkey(cfg, &env_s, &["html"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("<p>Hi"), "{}", r.stdout);
    assert!(!r.stdout.contains('\u{1b}'), "{:?}", r.stdout);
    assert!(
        r.stderr.contains("cut at the limit (9000 bytes"),
        "{}",
        r.stderr
    );
    let sent = browser.received().len();
    let r = latchkey(cfg, &env_s, &["html", "--target", "#main"]).await;
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("takes an element ref"), "{}", r.stderr);
    assert_eq!(browser.received().len(), sent, "nothing was sent");

    // The browser's detail (`data.reason`) reaches the agent, in JSON and in text.
    let r = latchkey(cfg, &env_s, &["--json", "hover", "e9"]).await;
    assert_eq!(r.code, i32::from(exit::NOT_FOUND));
    assert_eq!(
        r.json()["error"],
        json!({"code": "not_found", "message": "ref e9 is not in the current snapshot", "data": {"reason": "ref_not_found"}})
    );
    let r = latchkey(cfg, &env_s, &["hover", "e9"]).await;
    assert!(
        r.stderr.contains("not_found (ref_not_found): ref e9"),
        "{}",
        r.stderr
    );

    // Session list and stop.
    let r = latchkey(cfg, &env, &["--json", "session", "list"]).await;
    assert_eq!(r.json()["sessions"][0]["id"], session.as_str());
    let r = latchkey(cfg, &env, &["session", "stop", &session]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A stopped session says why, with the not-found exit code.
    let r = latchkey(cfg, &env_s, &["--json", "snapshot"]).await;
    assert_eq!(r.code, i32::from(exit::NOT_FOUND));
    assert_eq!(r.json()["error"]["code"], "session_ended");
    assert_eq!(r.json()["error"]["data"]["reason"], "stopped");
    let r = latchkey(cfg, &env_s, &["snapshot"]).await;
    assert!(
        r.stderr.contains("the session ended: its agent stopped it"),
        "{}",
        r.stderr
    );

    // Usage errors.
    let r = latchkey(cfg, &env, &["--json", "snapshot"]).await;
    assert_eq!(r.code, i32::from(exit::USAGE), "no session");
    let r = latchkey(cfg, &env_s, &["call", "tool.x", "--params", "[1]"]).await;
    assert_eq!(r.code, i32::from(exit::USAGE));
    server.stop().await;
}
