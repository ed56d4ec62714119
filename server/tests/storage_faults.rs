//! Storage faults (issue 6): a SQLite writer lock held past the busy timeout, a
//! PostgreSQL server that goes away, and a PostgreSQL primary demoted to read-only.
//! Each answers 503 with a stable code and `Retry-After` (never a 500, never
//! "database is locked"), changes nothing, and recovers without a restart.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use latchkey_server::store::SQLITE_FILE;
use latchkey_testkit::extension::new_token;
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
    let path = server.config().data_dir.join(SQLITE_FILE);
    let mut holder = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open the database");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .expect("take the writer lock");

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

    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("release");
    holder.close().await.expect("close");
    // Nothing changed: the link was not consumed and pairs now.
    let grant = ext.pair().await.expect("pairs after the lock is released");
    assert_eq!(server.admin().devices().await.expect("devices").len(), 1);
    assert!(!grant.device_id.is_empty());
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
