//! The CLI never prints a control character or a bidirectional override it
//! received, never panics on what it prints, and ends quietly when its reader goes
//! away (docs/cli.md, "Output"). An outside review made `latchkey browsers` and
//! `latchkey admin audit` panic with a value over 65,535 characters, saw an
//! `ESC ] 0 ;` title change printed raw, and got a backtrace from
//! `latchkey snapshot | head -3`. The hostile values are written straight into the
//! store, as an older gateway could have stored them.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::latchkey;
use latchkey_protocol::text;
use latchkey_server::store::{DeviceSeen, NewAuditEvent};
use latchkey_testkit::{Action, Backend, TestServer};
use serde_json::json;

const HOSTILE: &str = "Chrome\u{1b}]0;owned\u{7}\u{1b}[31m\u{202E}exe.txt\u{9b}2J";

fn assert_printable(what: &str, out: &str) {
    let bad: Vec<char> = out
        .chars()
        .filter(|c| text::is_unsafe(*c) && *c != '\n')
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_values_print_safely_and_long_ones_do_not_panic() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let grant = ext.pair().await.expect("pair");
    let tenant = server
        .state()
        .store
        .tenant_by_name("default")
        .await
        .expect("store")
        .expect("tenant");
    let huge = format!("{HOSTILE}{}", "x".repeat(70_000));
    server
        .state()
        .store
        .record_activity(
            &[DeviceSeen {
                tenant_id: tenant.id.clone(),
                device_id: grant.device_id.clone(),
                at: server.clock().now_ms(),
                browser: Some((huge.clone(), HOSTILE.to_string())),
            }],
            &[NewAuditEvent {
                tenant_id: tenant.id.clone(),
                at: server.clock().now_ms(),
                actor: HOSTILE.into(),
                action: "device.connect".into(),
                target: huge.clone(),
                outcome: "ok".into(),
                detail: Some(huge),
            }],
        )
        .await
        .expect("hostile rows");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.http_base();
    let agent = server.new_agent().await.expect("agent");
    for (token, args) in [
        (agent.token.as_str(), vec!["browsers"]),
        (server.admin_token.as_str(), vec!["admin", "devices"]),
        (server.admin_token.as_str(), vec!["admin", "audit"]),
        (
            server.admin_token.as_str(),
            vec!["--json", "admin", "audit"],
        ),
    ] {
        let env = [("LATCHKEY_URL", url.as_str()), ("LATCHKEY_TOKEN", token)];
        let r = latchkey(dir.path(), &env, &args).await;
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
        assert_printable(&format!("{args:?}"), &r.stdout);
        if args[0] != "--json" {
            assert!(
                r.stdout.lines().all(|l| l.chars().count() < 1_000),
                "{args:?}: a line of {} characters",
                r.stdout
                    .lines()
                    .map(|l| l.chars().count())
                    .max()
                    .unwrap_or(0)
            );
        }
    }
    server.stop().await;
}

/// `latchkey snapshot | head -3`: the reader takes three lines and goes away; the
/// CLI ends with status 0 and says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_goes_away_ends_the_cli_quietly() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let page: String = (0..20_000).map(|i| format!("- line {i} @e{i}\n")).collect();
    let script = Arc::new(move |r: &latchkey_protocol::RequestFrame| {
        (r.method == "tool.snapshot")
            .then(|| Action::Reply(json!({"text": page, "ref_count": 20_000, "tab_id": 1})))
    });
    let (_device, _browser) = server.new_browser(script).await.expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("session").id;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.http_base();
    let token = agent.token.clone();
    let status = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .env_clear()
            .env("LATCHKEY_CONFIG_DIR", dir.path())
            .env("LATCHKEY_URL", url)
            .env("LATCHKEY_TOKEN", token)
            .env("LATCHKEY_SESSION", session)
            .arg("snapshot")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("latchkey");
        let stdout = child.stdout.take().expect("stdout");
        let lines: Vec<String> = BufReader::new(stdout)
            .lines()
            .take(3)
            .map(|l| l.expect("line"))
            .collect();
        assert_eq!(lines.len(), 3);
        // The pipe closes here, with most of the page still to print.
        let output = child.wait_with_output().expect("wait");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    })
    .await
    .expect("join");
    assert_eq!(status.0, Some(0), "stderr: {}", status.1);
    assert!(status.1.is_empty(), "stderr: {}", status.1);
    server.stop().await;
}

/// A screenshot is cropped to an element ref only: a CSS selector is refused by the
/// CLI instead of being silently ignored by the extension (a full page reported as
/// the element).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshot_targets_are_refs_only() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let (_device, browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("session").id;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.http_base();
    let out = dir.path().join("shot.png");
    let out = out.to_str().expect("path");
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", agent.token.as_str()),
        ("LATCHKEY_SESSION", session.as_str()),
    ];
    let r = latchkey(
        dir.path(),
        &env,
        &["screenshot", "--out", out, "--target", "h1"],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("element ref"), "{}", r.stderr);
    assert!(
        browser.first("tool.screenshot").is_none(),
        "nothing was sent"
    );
    // A bad --wait-until is refused by the CLI itself, naming the choices.
    let r = latchkey(
        dir.path(),
        &env,
        &["navigate", "http://127.0.0.1/", "--wait-until", "bogus"],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("networkidle"), "{}", r.stderr);
    assert!(browser.first("tool.navigate").is_none(), "nothing was sent");
    server.stop().await;
}
