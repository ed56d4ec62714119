//! Durability across a crash: the `latchkeyd` process is killed (abort, as `kill -9`)
//! between committing a renewal and replying. After a restart the extension's exact
//! retry gets the committed grant, and the old credential is never revived.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::new_token;
use latchkey_testkit::{Backend, Daemon, FakeExtension, ScratchDatabase, backend_tests};
use tokio::process::Command;

/// Start `latchkeyd serve` on port 0 with these failpoints.
async fn start(data_dir: &std::path::Path, database_url: Option<&str>, failpoints: &str) -> Daemon {
    let mut command = Command::new(env!("CARGO_BIN_EXE_latchkeyd"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data_dir);
    if let Some(url) = database_url {
        command.env("LATCHKEY_DATABASE_URL", url);
    }
    command
        .env("LATCHKEY_FAILPOINTS", failpoints)
        .env("LATCHKEY_LOG", "warn");
    Daemon::spawn(command, std::process::Stdio::null())
        .await
        .expect("latchkeyd")
}

async fn renewal_committed_before_a_crash_survives_it(backend: Backend) {
    latchkey_testkit::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch = match &backend {
        Backend::Sqlite => None,
        Backend::Postgres { admin_url } => {
            Some(ScratchDatabase::create(admin_url).await.expect("database"))
        }
    };
    let db = scratch.as_ref().map(|s| s.url.as_str());
    let http = latchkey_testkit::reqwest::Client::new();

    // First life: bootstrap, pair.
    let mut daemon = start(dir.path(), db, "").await;
    let token = daemon
        .bootstrap_token
        .clone()
        .expect("first start prints the admin token");
    let admin = latchkey_testkit::AdminClient::new(
        http.clone(),
        format!("http://{}", daemon.addr),
        token.clone(),
    );
    let pairing = admin.create_pairing(None, None).await.expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("link");
    let grant = ext.pair().await.expect("pair");
    daemon.child.kill().await.expect("kill");

    let old = ext.token.clone().expect("token");
    let next = new_token();

    // Second life: the renewal commits, then the process dies before replying.
    let daemon = start(dir.path(), db, "authorize.after_commit").await;
    assert!(
        daemon.bootstrap_token.is_none(),
        "the token is printed on the first start only"
    );
    let ext2 = at(&daemon, &ext, &http);
    let lost = ext2.renew_raw(&old, &next).await;
    assert!(lost.is_err(), "the reply must be lost: {lost:?}");
    let mut child = daemon.child;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit")
        .expect("wait");
    assert!(!status.success(), "the failpoint aborts the process");

    // Third life: the exact retry returns the committed grant; nothing else works.
    let daemon = start(dir.path(), db, "").await;
    let mut ext3 = at(&daemon, &ext, &http);
    let retry = ext3.renew_raw(&old, &next).await.expect("retry");
    assert_eq!(retry.status, 200, "{}", retry.body);
    let retried: latchkey_protocol::authorize::AuthorizeGrant =
        serde_json::from_str(&retry.body).expect("grant");
    assert_eq!(retried.device_id, grant.device_id);
    assert_eq!(
        ext3.renew_raw(&old, &new_token())
            .await
            .expect("renew")
            .status,
        401
    );
    ext3.token = Some(old);
    assert_eq!(
        ext3.connect()
            .await
            .expect("connect")
            .expect_err("old token")
            .status,
        401
    );
    ext3.token = Some(next);
    ext3.connect_online()
        .await
        .expect("the committed successor connects");
    drop(daemon);
    if let Some(s) = scratch {
        s.drop_database().await;
    }
}

backend_tests!(
    renewal_survives_kill,
    renewal_committed_before_a_crash_survives_it
);

/// The same extension, pointed at a restarted daemon's new address.
fn at(
    daemon: &Daemon,
    ext: &FakeExtension,
    http: &latchkey_testkit::reqwest::Client,
) -> FakeExtension {
    let link = format!("ws://{}/extension#{}", daemon.addr, ext.pairing_secret);
    let mut moved = FakeExtension::from_link(&link, http.clone(), None).expect("link");
    moved.token = ext.token.clone();
    moved.device_id = ext.device_id.clone();
    moved
}
