//! Upgrades read their grants together (`store::token_reads`), on SQLite and on the
//! machine's PostgreSQL: the batch query returns each known hash's device once and
//! nothing for unknown ones, across chunk and padding boundaries; upgrades queued
//! while the reader is busy share one query, at most `TOKEN_BATCH` each, and every
//! one gets its own device; and on the real server, devices connecting together each
//! come online while revoked and unknown tokens among them are refused.

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::join_all;
use latchkey_server::store::token_reads::TokenReads;
use latchkey_server::store::{NewDevice, Store, TOKEN_BATCH, TenantRecord};
use latchkey_server::telemetry::metrics::TOKEN_READ_BATCH;
use latchkey_testkit::database::{postgres_store, sqlite_store};
use latchkey_testkit::{Backend, TestServer, backend_tests};
use tokio::task::unconstrained;

const DEVICES: usize = 150;

fn hash(n: usize) -> String {
    format!("{n:064x}")
}

fn unknown(n: usize) -> String {
    format!("{:064x}", 1_000_000 + n)
}

async fn seed(store: &dyn Store) {
    store.migrate().await.expect("migrate");
    store
        .create_tenant(&TenantRecord {
            id: "t1".into(),
            name: "t1-name".into(),
            created_at: 1,
        })
        .await
        .expect("tenant");
    for n in 0..DEVICES {
        store
            .ensure_local_device(
                "t1",
                &NewDevice {
                    id: format!("d{n:04}"),
                    label: "lab".into(),
                    token_hash: hash(n),
                    created_at: 1,
                    expires_at: i64::MAX / 2,
                    renew_after: i64::MAX / 4,
                },
            )
            .await
            .expect("device");
    }
}

/// The store's batch read: more hashes than one query takes, known, unknown and
/// repeated ones mixed, and sizes that are not powers of two.
async fn batch_query(store: &dyn Store) {
    assert!(
        store
            .devices_by_token_hash(&[])
            .await
            .expect("empty")
            .is_empty()
    );
    for size in [1, 3, TOKEN_BATCH - 1, TOKEN_BATCH, TOKEN_BATCH + 1, DEVICES] {
        let mut asked: Vec<String> = (0..size).map(hash).collect();
        asked.extend((0..size / 3 + 1).map(unknown));
        asked.extend((0..size / 5).map(hash));
        let found = store.devices_by_token_hash(&asked).await.expect("read");
        let ids: HashSet<&str> = found.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(found.len(), size, "size {size}: one row per known hash");
        assert_eq!(ids.len(), size, "size {size}: no device twice");
        for d in &found {
            let n: usize = d.id[1..].parse().expect("id");
            assert_eq!(
                d.token_hash,
                hash(n),
                "size {size}: {} has its own hash",
                d.id
            );
            assert!(n < size);
        }
    }
    assert_eq!(
        store
            .device_by_token_hash(&hash(7))
            .await
            .expect("one")
            .map(|d| d.id),
        Some("d0007".to_string())
    );
    assert!(
        store
            .device_by_token_hash(&unknown(7))
            .await
            .expect("none")
            .is_none()
    );
}

/// Reads of the batch-size histogram from a recorder local to this thread.
fn batches(handle: &metrics_exporter_prometheus::PrometheusHandle) -> (f64, f64) {
    let text = handle.render();
    let metrics = latchkey_testkit::metrics::parse(&text);
    let get = |suffix: &str| {
        metrics
            .get(&format!("{TOKEN_READ_BATCH}_{suffix}"))
            .copied()
            .unwrap_or(0.0)
    };
    (get("count"), get("sum"))
}

/// Upgrades queued together: on a current-thread runtime every request below is
/// queued before the reader first runs, so the batches are exact. The joins run
/// unconstrained by tokio's cooperative budget (128 operations per poll): with the
/// budget, the 129th request would yield the test's task and let the reader start
/// on a partial queue, and how the rest split depended on the machine's load.
async fn coalesced(store: Arc<dyn Store>) {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let reads = TokenReads::new(store);

    // 30 known and 10 unknown hashes at once: one query.
    let asked: Vec<(usize, bool)> = (0..30)
        .map(|n| (n, true))
        .chain((0..10).map(|n| (n, false)))
        .collect();
    let answers =
        unconstrained(join_all(asked.iter().map(|&(n, known)| {
            reads.device(if known { hash(n) } else { unknown(n) })
        })))
        .await;
    for (&(n, known), answer) in asked.iter().zip(answers) {
        let device = answer.expect("read");
        if known {
            assert_eq!(device.map(|d| d.id), Some(format!("d{n:04}")));
        } else {
            assert!(device.is_none(), "unknown hash {n} found a device");
        }
    }
    assert_eq!(batches(&handle), (1.0, 40.0), "40 upgrades, one query");

    // More than a query takes: full batches, then the rest.
    let answers = unconstrained(join_all((0..DEVICES).map(|n| reads.device(hash(n))))).await;
    for (n, answer) in answers.into_iter().enumerate() {
        assert_eq!(
            answer.expect("read").map(|d| d.id),
            Some(format!("d{n:04}"))
        );
    }
    let queries = DEVICES.div_ceil(TOKEN_BATCH) as f64;
    assert_eq!(batches(&handle), (1.0 + queries, 40.0 + DEVICES as f64));

    // A lone upgrade is read at once, on its own.
    let one = reads.device(hash(3)).await.expect("read");
    assert_eq!(one.map(|d| d.id), Some("d0003".to_string()));
    assert_eq!(batches(&handle), (2.0 + queries, 41.0 + DEVICES as f64));
}

#[tokio::test]
async fn token_reads_on_sqlite() {
    let (store, _dir) = sqlite_store().await;
    seed(store.as_ref()).await;
    batch_query(store.as_ref()).await;
    coalesced(store).await;
}

#[tokio::test]
async fn token_reads_on_postgres() {
    let Some((store, db)) = postgres_store().await else {
        return;
    };
    seed(store.as_ref()).await;
    batch_query(store.as_ref()).await;
    coalesced(store).await;
    db.drop_database().await;
}

// Devices connecting together on the real server: each comes online as itself,
// and the revoked and never-paired ones among them are refused.
backend_tests!(connecting_together, |backend: Backend| async move {
    let server = TestServer::builder(backend).start().await.expect("server");
    let paired = || async {
        let mut ext = server.new_extension().await.expect("extension");
        ext.pair().await.expect("pair");
        ext
    };
    let mut live = Vec::new();
    for _ in 0..40 {
        live.push(paired().await);
    }
    let mut revoked = Vec::new();
    for _ in 0..10 {
        revoked.push(paired().await);
    }
    let admin = server.admin();
    for ext in &revoked {
        admin
            .revoke(ext.device_id.as_deref().expect("device id"))
            .await
            .expect("revoke");
    }
    let mut strangers = Vec::new();
    for _ in 0..10 {
        let mut ext = server.new_extension().await.expect("extension");
        ext.token = Some(format!("{:043}", 0));
        strangers.push(ext);
    }

    let online = join_all(live.iter().map(|ext| async move {
        let socket = ext.connect_online().await.expect("online");
        (ext.device_id.clone().expect("device id"), socket)
    }));
    let refused = join_all(revoked.iter().chain(&strangers).map(|ext| async move {
        match ext.connect().await.expect("connect") {
            Ok(_) => panic!("a revoked or unknown token was let in"),
            Err(answer) => answer.status,
        }
    }));
    let (online, refused) = tokio::join!(online, refused);
    assert_eq!(refused, vec![401; 20]);
    let (online, _sockets): (HashSet<String>, Vec<_>) = online.into_iter().unzip();
    assert_eq!(online.len(), 40);
    let listed = admin.devices().await.expect("list");
    let connected: HashSet<String> = listed
        .iter()
        .filter(|d| d.online)
        .map(|d| d.id.clone())
        .collect();
    assert_eq!(
        connected, online,
        "exactly the live devices are online, each as itself"
    );
    server.stop().await;
});
