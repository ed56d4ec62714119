//! Storage faults: a SQLite writer lock held past the busy timeout, a PostgreSQL server
//! that goes away, and a PostgreSQL primary demoted to read-only. Each answers 503 with
//! a stable code and `Retry-After` (never a 500, never "database is locked"), changes
//! nothing, and recovers without a restart.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use latchkey_protocol::CloseCode;
use latchkey_protocol::api::DeviceStatus;
use latchkey_server::store::SQLITE_FILE;
use latchkey_testkit::extension::{Ended, new_token};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, wait_until};
use serde_json::{Value, json};
use sqlx::Connection;

const DEADLINE: Duration = Duration::from_secs(20);

async fn create_pairing(server: &TestServer) -> (u16, Value) {
    server
        .admin()
        .raw(
            Method::POST,
            "/v1/admin/pairings",
            Some(json!({ "label": "fault" })),
        )
        .await
        .expect("answer")
}

fn assert_store_unavailable(case: &str, (status, body): &(u16, Value)) {
    assert_eq!(*status, 503, "{case}: {body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{case}: {body}");
}

/// A PostgreSQL test server that gives up on an unreachable database after 2 s.
async fn postgres_server() -> TestServer {
    let Some(backend) = Backend::postgres().await else {
        panic!("PostgreSQL is required for this test (LATCHKEY_TEST_PG_URL)");
    };
    TestServer::builder(backend)
        .limits(|l| l.pg_acquire_timeout_ms = 2_000)
        .start()
        .await
        .expect("server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writer_lock_past_the_busy_timeout_is_503_and_changes_nothing() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let holder = hold_writer_lock(&server).await;

    // Pairing while another writer holds the lock: 503 + Retry-After: 1, bsk's tag.
    ext.clone()
        .pair_with(&new_token())
        .await
        .expect("answer")
        .expect_err("no grant while the store is locked")
        .assert_store_busy();
    // The admin API: 503 store_unavailable with Retry-After.
    assert_store_unavailable("create pairing", &create_pairing(&server).await);
    // Reads still work in WAL mode.
    assert!(server.admin().devices().await.expect("devices").is_empty());

    release_writer_lock(holder).await;
    // Nothing changed: the link was not consumed and pairs now.
    let grant = ext.pair().await.expect("pairs after the lock is released");
    assert_eq!(server.admin().devices().await.expect("devices").len(), 1);
    assert!(!grant.device_id.is_empty());
    server.stop().await;
}

/// Take SQLite's writer lock from a connection of the test's own, as another
/// writer would: every write of the server waits on it (up to its busy timeout).
async fn hold_writer_lock(server: &TestServer) -> sqlx::SqliteConnection {
    let path = server.config().data_dir.join(SQLITE_FILE);
    let mut holder = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open the database");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .expect("take the writer lock");
    holder
}

async fn release_writer_lock(mut holder: sqlx::SqliteConnection) {
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("release");
    holder.close().await.expect("close");
}

/// A revocation closes the live socket before its commit, which can wait on the
/// disk: here the commit cannot even start until the socket has closed, because
/// the lock it waits on is released only then. Without the early close the socket
/// stays open and this test fails at the deadline. Once committed, the device is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_closes_the_socket_before_its_commit() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.sqlite_busy_timeout_ms = 30_000)
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let device = ext.pair().await.expect("pair").device_id;
    let mut socket = ext.connect_online().await.expect("online");
    let holder = hold_writer_lock(&server).await;

    let admin = server.admin();
    let answered = std::sync::atomic::AtomicBool::new(false);
    let revoke = async {
        let answer = admin
            .raw(Method::DELETE, &format!("/v1/admin/devices/{device}"), None)
            .await
            .expect("answer");
        answered.store(true, std::sync::atomic::Ordering::SeqCst);
        answer
    };
    let closed_first = async {
        let ended = socket.ended(DEADLINE).await;
        let answered_before_close = answered.load(std::sync::atomic::Ordering::SeqCst);
        release_writer_lock(holder).await;
        (ended, answered_before_close)
    };
    let ((status, body), (ended, answered_before_close)) = tokio::join!(revoke, closed_first);
    assert_eq!(
        ended.expect("the socket closes while the commit waits"),
        Ended::Closed(CloseCode::Revoked.code())
    );
    assert!(
        !answered_before_close,
        "the revoke cannot commit before the lock is released"
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "revoked", "{body}");
    let refused = ext.connect().await.expect("connect").expect_err("refused");
    assert_eq!(refused.status, 401);
    server.stop().await;
}

/// A revocation whose commit fails has closed the socket, and changed nothing else:
/// the admin gets 503 to retry, and the device, whose grant stands, comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_that_cannot_commit_leaves_the_grant_and_the_device_reconnects() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let device = ext.pair().await.expect("pair").device_id;
    // A single revocation, then revoke-all: each closes first, and each failed
    // commit leaves the grant.
    let revocations = [
        (Method::DELETE, format!("/v1/admin/devices/{device}")),
        (Method::POST, "/v1/admin/devices/revoke-all".to_string()),
    ];
    for (method, path) in revocations {
        let mut socket = ext.connect_online().await.expect("online");
        let holder = hold_writer_lock(&server).await;
        let admin = server.admin();
        let (answer, ended) = tokio::join!(
            admin.raw(method.clone(), &path, None),
            socket.ended(DEADLINE)
        );
        assert_store_unavailable(&format!("{method} {path}"), &answer.expect("answer"));
        assert_eq!(
            ended.expect("closed"),
            Ended::Closed(CloseCode::Revoked.code()),
            "{method} {path}"
        );
        release_writer_lock(holder).await;
        let view = admin.device(&device).await.expect("device");
        assert_eq!(view.status, DeviceStatus::Active, "{method} {path}");
    }
    ext.connect_online()
        .await
        .expect("the grant stands: the device comes back");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_is_503_within_the_acquire_timeout_and_recovers() {
    let server = postgres_server().await;
    server.set_database_reachable(false).await.expect("cut off");
    let asked = Instant::now();
    let answer = create_pairing(&server).await;
    let waited = asked.elapsed();
    assert_store_unavailable("database down", &answer);
    // Bounded by the acquire timeout, not sqlx's 30 s default (generous upper bound:
    // this checks the bound exists, not how fast it is).
    assert!(
        waited < Duration::from_secs(15),
        "answered after {waited:?}"
    );
    server.set_database_reachable(true).await.expect("restore");
    assert!(
        wait_until(DEADLINE, || async {
            (200..300).contains(&create_pairing(&server).await.0)
        })
        .await,
        "writes recover without a restart"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_postgres_primary_has_its_connections_evicted() {
    let server = postgres_server().await;
    let before = server.admin().devices().await.expect("devices").len();
    server.set_database_read_only(true).await.expect("demote");
    // The pool reconnects to a read-only server: writes are 503, reads still work.
    assert!(
        wait_until(DEADLINE, || async {
            let answer = create_pairing(&server).await;
            answer.0 == 503 && answer.1["error"]["code"] == "store_unavailable"
        })
        .await,
        "writes on a read-only primary answer 503 store_unavailable"
    );
    assert_eq!(server.admin().devices().await.expect("reads").len(), before);
    // Writable again for new sessions only: the pooled read-only connections must
    // be evicted for writes to work, without a restart.
    server.set_database_read_only(false).await.expect("promote");
    assert!(
        wait_until(DEADLINE, || async {
            (200..300).contains(&create_pairing(&server).await.0)
        })
        .await,
        "read-only connections were not evicted"
    );
    server.stop().await;
}
