//! Where secrets rest: answers that carry one are never cached (`Cache-Control:
//! no-store` on every answer, the new token and the pairing link included), and the
//! data directory (0700) and the SQLite files (0600), which hold every token hash and
//! the audit trail, are private to the gateway's user whatever its umask. An outside
//! review found the directory and files as the umask left them.

#![allow(clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use latchkey_protocol::api::Role;
use latchkey_testkit::Daemon;
use latchkey_testkit::reqwest::Method;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_not_cached_and_the_store_is_private_under_umask_000() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // The real binary, started by a shell whose umask lets everyone read and write.
    let serve = Daemon::serve_command(Path::new(env!("CARGO_BIN_EXE_latchkeyd")), dir.path(), "")
        .expect("command");
    let serve = serve.as_std();
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(serve.get_program())
        .args(serve.get_args())
        .env("LATCHKEY_LOG", "warn");
    let daemon = Daemon::spawn(command, std::process::Stdio::null())
        .await
        .expect("latchkeyd");
    let http = latchkey_testkit::http_client();
    let admin = daemon.admin(&http).expect("admin");
    // Answers with a secret in them, and any other.
    admin
        .create_token("agent", Role::Agent)
        .await
        .expect("token");
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/admin/tokens",
            Some(serde_json::json!({"name": "x", "role": "agent"})),
        ),
        (
            Method::POST,
            "/v1/admin/pairings",
            Some(serde_json::json!({})),
        ),
        (Method::GET, "/v1/admin/devices", None),
        (Method::GET, "/healthz", None),
    ] {
        let mut request = http
            .request(method, format!("{}{path}", daemon.http_base()))
            .bearer_auth(daemon.bootstrap_token.as_deref().expect("token"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("answer");
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        assert_eq!(
            answer
                .headers()
                .get("cache-control")
                .and_then(|v| v.to_str().ok()),
            Some("no-store"),
            "{path}"
        );
    }
    assert_eq!(mode(&data), 0o700, "data directory");
    let db = data.join(latchkey_server::store::SQLITE_FILE);
    assert_eq!(mode(&db), 0o600, "database");
    for suffix in ["-wal", "-shm"] {
        let file = data.join(format!("{}{suffix}", latchkey_server::store::SQLITE_FILE));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    assert_eq!(mode(&data.join("bootstrap-admin-token")), 0o600);
}
