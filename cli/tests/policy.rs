//! `latchkey admin policy …` and `latchkey me policy …` against the real server
//! (docs/policy.md): a team policy and a browser's set from flags and from a
//! file, shown with the effective limits and where they came from, human and
//! `--json`; the server's refusal of a bad pattern reaches the exit code.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use common::latchkey;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::{Backend, TestServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_and_browser_policies_from_the_command_line() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let admin = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];
    let mut ext = server.new_extension().await.expect("ext");
    let device = ext.pair().await.expect("pair").device_id;

    // Agents named by unique prefixes of their token ids; consent asked.
    let agent = server
        .admin()
        .create_token("only-agent", latchkey_protocol::api::Role::Agent)
        .await
        .expect("agent")
        .view
        .id;
    let args = [
        "--json",
        "admin",
        "policy",
        "set",
        "--agents",
        &agent[..10],
        "--consent",
        "ask",
        "--capabilities",
        "read,input,navigate",
        "--block-sites",
        "*.bank.test",
        "--max-session",
        "2h",
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["policy"],
        json!({"agents": [agent], "consent": "ask", "block_sites": ["*.bank.test"], "capabilities": ["read", "input", "navigate"], "max_session_minutes": 120})
    );

    let file = cfg.join("laptop.json");
    std::fs::write(
        &file,
        r#"{"capabilities": ["read", "script"], "allow_sites": ["*.shop.test"]}"#,
    )
    .expect("write");
    let path = file.to_string_lossy().to_string();
    let args = [
        "admin", "policy", "set", "--device", &device, "--file", &path,
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("policy of browser {device}")),
        "{}",
        r.stdout
    );

    let args = [
        "admin",
        "policy",
        "show",
        "--device",
        &device,
        "--effective",
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        "capabilities   session, read  [team and device]",
        "allow sites    one of *.shop.test  [device]",
        "block sites    *.bank.test  [team]",
        "max session    120 min  [team]",
        "schemes        http, https  [default]",
    ] {
        assert!(r.stdout.contains(line), "{line:?} in\n{}", r.stdout);
    }
    let args = [
        "--json",
        "admin",
        "policy",
        "show",
        "--device",
        &device,
        "--effective",
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(
        r.json()["effective"]["capabilities"],
        json!({"value": ["session", "read"], "from": ["team", "device"]})
    );

    // A bad pattern is the server's refusal, with its field and exit code.
    let args = [
        "admin",
        "policy",
        "set",
        "--allow-sites",
        "ok.test,b*d.test",
    ];
    let r = latchkey(cfg, &admin, &args).await;
    assert_eq!(r.code, i32::from(exit::INVALID), "{}", r.stderr);
    assert!(r.stderr.contains("allow_sites[1]"), "{}", r.stderr);
    let r = latchkey(cfg, &admin, &["--json", "admin", "policy", "show"]).await;
    assert_eq!(r.json()["policy"]["max_session_minutes"], 120, "unchanged");

    // Clearing is setting nothing.
    let r = latchkey(cfg, &admin, &["--json", "admin", "policy", "set"]).await;
    assert_eq!(r.json()["policy"], json!({}));
}
