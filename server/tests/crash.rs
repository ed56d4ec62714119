//! Durability across a crash: the `latchkeyd` process is killed (abort, as `kill -9`)
//! between committing a renewal and replying. After a restart the extension's exact
//! retry gets the committed grant, and the old credential is never revived. And
//! 1,000 renewals with `kill -9` at random points: every acknowledged renewal
//! survives, and no grant is ever torn (exactly one token of the device works).

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::new_token;
use latchkey_testkit::{Backend, Daemon, FakeExtension, ScratchDatabase, backend_tests};

/// Start `latchkeyd serve` on port 0 in `dir` with these failpoints. Renewals are
/// not rate limited here (per peer or per device): the tests renew far faster than
/// an extension would.
async fn start(dir: &std::path::Path, database_url: Option<&str>, failpoints: &str) -> Daemon {
    let mut command = Daemon::serve_command(
        std::path::Path::new(env!("CARGO_BIN_EXE_latchkeyd")),
        dir,
        "authorize_per_minute = 60000\nrenewals_per_minute_per_device = 60000",
    )
    .expect("command");
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

/// A database of its own for a PostgreSQL run (the daemon is restarted on it).
async fn scratch_database(backend: &Backend) -> Option<ScratchDatabase> {
    match backend {
        Backend::Sqlite => None,
        Backend::Postgres { admin_url } => {
            Some(ScratchDatabase::create(admin_url).await.expect("database"))
        }
    }
}

async fn renewal_committed_before_a_crash_survives_it(backend: Backend) {
    latchkey_testkit::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch = scratch_database(&backend).await;
    let db = scratch.as_ref().map(|s| s.url.as_str());
    let http = latchkey_testkit::http_client();

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

/// Whether `token` is the device's current credential on `daemon` (a renewal from it
/// to a fresh successor is accepted; the device then holds that successor).
async fn renew_from(ext: &FakeExtension, token: &str) -> Option<String> {
    let next = new_token();
    let answer = ext.renew_raw(token, &next).await.ok()?;
    (answer.status == 200).then_some(next)
}

async fn renewals_with_random_kills(backend: Backend) {
    use rand::Rng;
    const RENEWALS: usize = 1_000;
    const KILLS: usize = 5;
    latchkey_testkit::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch = scratch_database(&backend).await;
    let db = scratch.as_ref().map(|s| s.url.as_str());
    let http = latchkey_testkit::http_client();
    let mut daemon = start(dir.path(), db, "").await;
    let admin = daemon.admin(&http).expect("admin");
    let pairing = admin.create_pairing(None, None).await.expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("link");
    ext.pair().await.expect("pair");
    let mut current = ext.token.clone().expect("token");

    let mut rng = rand::rng();
    let mut kill_at: Vec<usize> = (0..KILLS).map(|_| rng.random_range(1..RENEWALS)).collect();
    kill_at.sort_unstable();
    let (mut acknowledged, mut lost) = (0, 0);
    for i in 0..RENEWALS {
        let here = at(&daemon, &ext, &http);
        let next = new_token();
        if kill_at.contains(&i) {
            // Fire the renewal and kill -9 at a random instant while it runs.
            let (old, successor) = (current.clone(), next.clone());
            let request = tokio::spawn(async move { here.renew_raw(&old, &successor).await });
            tokio::time::sleep(Duration::from_micros(rng.random_range(0..3_000))).await;
            daemon.child.kill().await.expect("kill -9");
            let answered = request.await.expect("task").is_ok_and(|a| a.status == 200);
            daemon = start(dir.path(), db, "").await;
            let restarted = at(&daemon, &ext, &http);
            if answered {
                // Acknowledged before the kill: the successor must be the credential.
                acknowledged += 1;
                current = next;
            } else {
                // Unacknowledged: the extension retries exactly (docs/protocol.md, "Pairing and
                // renewal"); the retry succeeds whether or not the first attempt committed.
                lost += 1;
                let retry = restarted.renew_raw(&current, &next).await.expect("retry");
                assert_eq!(
                    retry.status, 200,
                    "exact retry after a crash: {}",
                    retry.body
                );
                current = next;
            }
            // Not torn: exactly the current token works; the previous one does not.
            let successor = renew_from(&restarted, &current)
                .await
                .unwrap_or_else(|| panic!("renewal {i}: the surviving token does not work"));
            current = successor;
            continue;
        }
        let answer = here.renew_raw(&current, &next).await.expect("renew");
        assert_eq!(answer.status, 200, "renewal {i}: {}", answer.body);
        acknowledged += 1;
        current = next;
    }
    // After everything, the last acknowledged token connects.
    let mut last = at(&daemon, &ext, &http);
    last.token = Some(current);
    last.connect_online()
        .await
        .expect("the last token connects");
    assert_eq!(acknowledged + lost, RENEWALS);
    drop(daemon);
    if let Some(s) = scratch {
        s.drop_database().await;
    }
}

backend_tests!(thousand_renewals_with_kills, renewals_with_random_kills);
