//! `latchkey admin audit export | keys | retention` against the real server, and
//! `latchkey audit verify-file` offline (docs/operations.md, "Export"): the file
//! the CLI wrote verifies with the keys it printed; an edited, a removed and an
//! appended line are each named with `audit_broken` (exit 1); so is a file checked
//! against another gateway's keys.

#![allow(clippy::expect_used, clippy::panic)]

mod common;

use common::latchkey;
use latchkey_protocol::api::Role;
use latchkey_protocol::error_code::exit;
use latchkey_testkit::{Backend, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_verifies_offline_and_every_edit_is_named() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let admin = server.admin();
    for n in 0..3 {
        admin
            .create_token(&format!("agent-{n}"), Role::Agent)
            .await
            .expect("token");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path();
    let url = server.http_base();
    let env = [
        ("LATCHKEY_URL", url.as_str()),
        ("LATCHKEY_TOKEN", server.admin_token.as_str()),
    ];

    let export = latchkey(cfg, &env, &["admin", "audit", "export", "--since", "30d"]).await;
    assert_eq!(export.code, 0, "{}", export.stderr);
    let keys = latchkey(cfg, &env, &["admin", "audit", "keys"]).await;
    assert_eq!(keys.code, 0, "{}", keys.stderr);
    let file = dir.path().join("audit.jsonl");
    let key_file = dir.path().join("keys.json");
    std::fs::write(&file, &export.stdout).expect("write");
    std::fs::write(&key_file, &keys.stdout).expect("write");

    // Offline: no URL, no token.
    let verify = |path: std::path::PathBuf, keys: std::path::PathBuf| async move {
        let (file, keys) = (path.display().to_string(), keys.display().to_string());
        latchkey(cfg, &[], &["audit", "verify-file", &file, "--keys", &keys]).await
    };
    let ok = verify(file.clone(), key_file.clone()).await;
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(ok.stdout.contains("team default:"), "{}", ok.stdout);
    assert!(ok.stdout.contains("chain intact"), "{}", ok.stdout);
    assert!(ok.stdout.contains("1 signed checkpoint,"), "{}", ok.stdout);
    assert!(
        !ok.stdout.contains("not signed"),
        "every row is signed: {}",
        ok.stdout
    );

    let broken = |text: String, name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let lines: Vec<&str> = export.stdout.lines().collect();
    let edited = broken(
        export
            .stdout
            .replacen("\"role agent\"", "\"role admin\"", 1),
        "edited.jsonl",
    );
    let removed = broken(
        [&lines[..2], &lines[3..]].concat().join("\n"),
        "removed.jsonl",
    );
    let appended = broken(
        format!("{}{}\n", export.stdout, lines[lines.len() - 2]),
        "appended.jsonl",
    );
    for (path, says) in [
        (edited, "was changed"),
        (removed, "are missing"),
        (appended, "is out of place"),
    ] {
        let r = verify(path.clone(), key_file.clone()).await;
        assert_eq!(r.code, i32::from(exit::FAILURE), "{path:?}: {}", r.stdout);
        assert!(r.stderr.contains("audit_broken"), "{}", r.stderr);
        assert!(r.stderr.contains(says), "{path:?}: {}", r.stderr);
    }

    // Another gateway's keys do not vouch for this one's checkpoints.
    let other = TestServer::start(Backend::Sqlite).await.expect("server");
    let other_url = other.http_base();
    let other_env = [
        ("LATCHKEY_URL", other_url.as_str()),
        ("LATCHKEY_TOKEN", other.admin_token.as_str()),
    ];
    let other_keys = latchkey(cfg, &other_env, &["admin", "audit", "keys"]).await;
    let other_file = broken(other_keys.stdout, "other-keys.json");
    let r = verify(file.clone(), other_file).await;
    assert_eq!(r.code, i32::from(exit::FAILURE), "{}", r.stdout);
    assert!(
        r.stderr.contains("not among the keys given"),
        "{}",
        r.stderr
    );
    other.stop().await;

    // Not an export at all, and keys that are not a key set.
    let r = verify(key_file.clone(), key_file.clone()).await;
    assert_eq!(r.code, i32::from(exit::FAILURE), "{}", r.stderr);
    assert!(r.stderr.contains("line 1"), "{}", r.stderr);
    let r = verify(file.clone(), file.clone()).await;
    assert_eq!(r.code, i32::from(exit::USAGE), "{}", r.stderr);

    // Retention: read, set, back to the default, refused when out of range.
    let r = latchkey(cfg, &env, &["admin", "audit", "retention"]).await;
    assert_eq!(
        r.stdout.trim(),
        "audit rows are kept 180 days (the gateway's default)"
    );
    let r = latchkey(cfg, &env, &["admin", "audit", "retention", "30"]).await;
    assert_eq!(
        r.stdout.trim(),
        "audit rows are kept 30 days",
        "{}",
        r.stderr
    );
    let r = latchkey(cfg, &env, &["admin", "audit", "retention", "0"]).await;
    assert_eq!(r.code, i32::from(exit::INVALID), "{}", r.stderr);
    assert!(r.stderr.contains("invalid_params"), "{}", r.stderr);
    let r = latchkey(cfg, &env, &["admin", "audit", "retention", "default"]).await;
    assert!(r.stdout.contains("180 days"), "{}", r.stderr);
    // The listing still works beside the subcommands.
    let r = latchkey(cfg, &env, &["admin", "audit", "--action", "audit.*"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("audit.retention"), "{}", r.stdout);
    assert!(r.stdout.contains("audit.export"), "{}", r.stdout);
    server.stop().await;
}
