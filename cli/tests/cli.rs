//! The `latchkey` binary against the real server: every admin command, human and
//! `--json` output, profiles, and exit codes from the one table.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use common::latchkey;

use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, FakeExtension, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_end_to_end() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();

    // login saves a profile (mode 0600) that later commands use.
    let r = latchkey(
        cfg,
        &[],
        &["login", "--url", &url, "--token", &server.admin_token],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let saved = cfg.join("config.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&saved)
                .expect("config")
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }

    // pair → a link the real extension flow accepts.
    let r = latchkey(
        cfg,
        &[],
        &[
            "--json",
            "admin",
            "pair",
            "--label",
            "Alice laptop",
            "--ttl",
            "5m",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let link = r.json()["link"].as_str().expect("link").to_string();
    let mut ext = FakeExtension::from_link(&link, server.http.clone(), None).expect("link");
    let device = ext.pair().await.expect("pair").device_id;
    let mut socket = ext.connect_online().await.expect("online");

    // devices: JSON and human.
    let r = latchkey(cfg, &[], &["--json", "admin", "devices"]).await;
    assert_eq!(r.code, 0);
    let devices = r.json()["devices"].as_array().expect("devices").clone();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0]["label"], "Alice laptop");
    let r = latchkey(cfg, &[], &["admin", "devices"]).await;
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("Alice laptop")
            && r.stdout.contains(&device[..8])
            && r.stdout.contains("active"),
        "{}",
        r.stdout
    );

    // rename.
    let r = latchkey(
        cfg,
        &[],
        &["--json", "admin", "rename", &device[..6], "Alice desktop"],
    )
    .await;
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["label"], "Alice desktop");

    // tokens create / list / revoke.
    let r = latchkey(
        cfg,
        &[],
        &[
            "--json", "admin", "tokens", "create", "--name", "ci-agent", "--role", "agent",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let created = r.json();
    let token_id = created["id"].as_str().expect("id").to_string();
    assert!(created["token"].as_str().expect("token").starts_with("lk_"));
    let r = latchkey(cfg, &[], &["admin", "tokens", "list"]).await;
    assert!(
        r.stdout.contains("ci-agent") && r.stdout.contains("bootstrap"),
        "{}",
        r.stdout
    );
    let r = latchkey(
        cfg,
        &[],
        &["--json", "admin", "tokens", "revoke", &token_id],
    )
    .await;
    assert_eq!(r.code, 0);
    assert!(r.json()["revoked_at"].is_string());

    // revoke closes the live socket.
    let r = latchkey(cfg, &[], &["admin", "revoke", &device]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        socket.ended(Duration::from_secs(10)).await.expect("end"),
        Ended::Closed(CloseCode::Revoked.code())
    );
    let r = latchkey(cfg, &[], &["--json", "admin", "revoke", "--all"]).await;
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["revoked_devices"], 0);

    // audit.
    let r = latchkey(cfg, &[], &["--json", "admin", "audit", "--limit", "5"]).await;
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["events"].as_array().expect("events").len(), 5);
    assert!(r.json()["next_before"].is_i64());
    // Narrowed: the revocation above, by action, target and time.
    let target = format!("device:{device}");
    let r = latchkey(
        cfg,
        &[],
        &[
            "--json",
            "admin",
            "audit",
            "--action",
            "device.revoke",
            "--target",
            &target,
            "--since",
            "1h",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = r.json()["events"].as_array().cloned().expect("events");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["target"], target.as_str());
    let r = latchkey(
        cfg,
        &[],
        &[
            "--json", "admin", "audit", "--action", "device.*", "--until", "1h",
        ],
    )
    .await;
    assert_eq!(
        r.json()["events"].as_array().map(Vec::len),
        Some(0),
        "nothing is an hour old"
    );
    let r = latchkey(
        cfg,
        &[],
        &["--json", "admin", "audit", "--since", "yesterday"],
    )
    .await;
    assert_eq!(r.json()["error"]["data"]["field"], "since", "{}", r.stdout);

    // Errors: stable codes and exit codes, one JSON document with --json.
    let r = latchkey(
        cfg,
        &[],
        &[
            "--json",
            "admin",
            "revoke",
            "0123456789abcdef0123456789abcdef",
        ],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::NOT_FOUND));
    assert_eq!(r.json()["error"]["code"], "not_found");
    let r = latchkey(
        cfg,
        &[],
        &["--json", "--token", "lk_wrong", "admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::AUTH));
    assert_eq!(r.json()["error"]["code"], "unauthorized");
    // Over an hour is refused here, and by the server for a client that asks anyway.
    let r = latchkey(cfg, &[], &["--json", "admin", "pair", "--ttl", "2h"]).await;
    assert_eq!(r.code, i32::from(exit::USAGE));
    assert!(
        server
            .admin()
            .create_pairing(None, Some(7200))
            .await
            .is_err_and(|e| e.to_string().contains("invalid_params")),
        "the server refuses a 2 h link too"
    );
    let r = latchkey(cfg, &[], &["admin", "pair", "--ttl", "5w"]).await;
    assert_eq!(
        r.code,
        i32::from(exit::USAGE),
        "clap rejects a bad duration"
    );

    // The admin token never appears in any output.
    assert!(!r.stdout.contains(&server.admin_token) && !r.stderr.contains(&server.admin_token));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_and_connection_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = latchkey(dir.path(), &[], &["--json", "admin", "devices"]).await;
    assert_eq!(r.code, i32::from(exit::USAGE));
    assert_eq!(r.json()["error"]["code"], "config");

    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let r = latchkey(
        dir.path(),
        &[("LATCHKEY_URL", &url), ("LATCHKEY_TOKEN", "lk_x")],
        &["--json", "admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::CONNECTION), "{}", r.stdout);
    assert_eq!(r.json()["error"]["code"], "connection_failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_failed_and_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let refused = format!("http://127.0.0.1:{port}");
    let r = latchkey(
        cfg,
        &[("LATCHKEY_URL", &refused), ("LATCHKEY_TOKEN", "lk_x")],
        &["admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::CONNECTION));
    assert!(
        r.stderr.contains(&format!(
            "cannot reach latchkeyd at {refused} (profile \"default\")"
        )) && r
            .stderr
            .contains(&format!("Is latchkeyd running at {refused}?")),
        "{}",
        r.stderr
    );

    // A URL without its scheme is explained before anything is sent.
    let r = latchkey(
        cfg,
        &[
            ("LATCHKEY_URL", "127.0.0.1:52800"),
            ("LATCHKEY_TOKEN", "lk_x"),
        ],
        &["admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::USAGE));
    assert!(
        r.stderr.contains("did you mean http://127.0.0.1:52800?"),
        "{}",
        r.stderr
    );

    // A profile named that does not exist is not silently the environment's.
    let r = latchkey(
        cfg,
        &[("LATCHKEY_URL", &refused), ("LATCHKEY_TOKEN", "lk_x")],
        &["--profile", "nosuch", "admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::USAGE));
    assert!(
        r.stderr.contains("profile \"nosuch\" does not exist"),
        "{}",
        r.stderr
    );

    // Durations need a unit, and a pairing link lives at most an hour: refused here.
    for (ttl, says) in [("2h", "at most 1h"), ("10", "has no unit")] {
        let r = latchkey(cfg, &[], &["admin", "pair", "--ttl", ttl]).await;
        assert_eq!(r.code, i32::from(exit::USAGE), "{ttl}");
        assert!(r.stderr.contains(says), "{ttl}: {}", r.stderr);
    }

    // https:// against a plain server, and --quiet for scripts.
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let plain = server.http_base();
    let tls = plain.replacen("http://", "https://", 1);
    let admin = [("LATCHKEY_TOKEN", server.admin_token.as_str())];
    let r = latchkey(
        cfg,
        &[admin[0], ("LATCHKEY_URL", &tls)],
        &["admin", "devices"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::CONNECTION));
    assert!(
        r.stderr
            .contains(&format!("does not speak TLS there: try {plain}")),
        "{}",
        r.stderr
    );
    let env = [admin[0], ("LATCHKEY_URL", plain.as_str())];
    let r = latchkey(
        cfg,
        &env,
        &[
            "admin", "tokens", "create", "--name", "a", "--role", "agent", "--quiet",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let secret = r.stdout.trim();
    assert!(
        secret.starts_with("lk_") && !secret.contains(' '),
        "{}",
        r.stdout
    );
    let r = latchkey(
        cfg,
        &[("LATCHKEY_URL", &plain), ("LATCHKEY_TOKEN", secret)],
        &["browsers"],
    )
    .await;
    assert_eq!(r.code, 0, "the printed secret works: {}", r.stderr);
    let r = latchkey(cfg, &env, &["admin", "pair", "--quiet"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.trim().starts_with("ws") && r.stdout.trim().lines().count() == 1,
        "{}",
        r.stdout
    );
    server.stop().await;
}

/// Usage lines and help show what applies: not a flag the environment already
/// sets, not the agent's flags on an admin's command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_help_show_what_applies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let r = latchkey(
        cfg,
        &[("LATCHKEY_TOKEN", "lk_from_the_environment")],
        &["login"],
    )
    .await;
    assert_eq!(r.code, i32::from(exit::USAGE), "{}", r.stderr);
    assert!(
        r.stderr.contains("Usage: latchkey login --url <URL>\n"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("--token"), "{}", r.stderr);
    assert!(!r.stderr.contains("lk_from_the_environment"));
    let r = latchkey(cfg, &[], &["login"]).await;
    assert!(
        r.stderr.contains("--url <URL> --token <TOKEN>"),
        "{}",
        r.stderr
    );

    let r = latchkey(cfg, &[], &["admin", "devices", "--help"]).await;
    assert_eq!(r.code, 0);
    assert!(
        !r.stdout.contains("--session") && !r.stdout.contains("--timeout-ms"),
        "{}",
        r.stdout
    );
    let r = latchkey(cfg, &[], &["navigate", "--help"]).await;
    assert!(
        r.stdout.contains("--session") && r.stdout.contains("--timeout-ms"),
        "{}",
        r.stdout
    );
}
