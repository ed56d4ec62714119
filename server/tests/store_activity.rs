//! The group commit's store write (`Store::record_activity`) on SQLite and on the
//! machine's PostgreSQL: a batch larger than one statement, holding a device's
//! reconnect and its disconnect in the order the audit writer queues them (urgent
//! first), leaves each device as the latest event says, touches no other tenant's
//! device, and keeps every audit row in order.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;

use latchkey_server::store::{
    DeviceSeen, ExpiryNoticeStore, MemberStore, NewAuditEvent, NewDevice, PostgresStore, Store,
    StoreError, TenantRecord,
};
use latchkey_testkit::Backend;
use latchkey_testkit::database::{postgres_store, sqlite_store};
use latchkey_testkit::server::ScratchDatabase;

/// More devices than one statement carries (`ROWS_PER_STATEMENT` is 256).
const DEVICES: usize = 300;

/// A migrated store with the tenants `ids`.
async fn with_tenants(store: &dyn Store, ids: &[&str]) {
    store.migrate().await.expect("migrate");
    for t in ids {
        store
            .create_tenant(&TenantRecord {
                id: (*t).into(),
                name: format!("{t}-name"),
                created_at: 1,
            })
            .await
            .expect("tenant");
    }
}

/// Device `id` of tenant `t1`, its token hash made from `n`.
async fn add_device(store: &dyn Store, id: String, n: usize) {
    store
        .ensure_local_device(
            "t1",
            &NewDevice {
                id,
                label: "lab".into(),
                token_hash: format!("{n:064x}"),
                created_at: 1,
                expires_at: i64::MAX / 2,
                renew_after: i64::MAX / 4,
            },
        )
        .await
        .expect("device");
}

async fn exercise(store: Arc<dyn Store>) {
    with_tenants(store.as_ref(), &["t1", "t2"]).await;
    let device = |n: usize| format!("d{n:04}");
    for n in 0..DEVICES {
        add_device(store.as_ref(), device(n), n).await;
    }
    let seen = |n: usize, at: i64, browser: Option<&str>| DeviceSeen {
        tenant_id: "t1".into(),
        device_id: device(n),
        at,
        browser: browser.map(|b| (b.to_string(), format!("{b}-1"))),
    };
    // The reconnect (urgent, with its browser) is queued ahead of the disconnect
    // that came before it.
    let mut rows = Vec::new();
    for n in 0..DEVICES {
        rows.push(seen(n, 2_000 + n as i64, Some("Chromium")));
    }
    for n in 0..DEVICES {
        rows.push(seen(n, 1_000 + n as i64, None));
    }
    // The same device id named under another tenant changes nothing.
    rows.push(DeviceSeen {
        tenant_id: "t2".into(),
        ..seen(0, 9_999, Some("Foreign"))
    });
    let events: Vec<NewAuditEvent> = (0..DEVICES)
        .map(|n| NewAuditEvent {
            tenant_id: "t1".into(),
            at: 3_000 + n as i64,
            actor: format!("device:{}", device(n)),
            action: "device.connect".into(),
            target: format!("device:{}", device(n)),
            outcome: "ok".into(),
            detail: (n % 2 == 0).then(|| format!("detail {n}")),
        })
        .collect();
    store
        .record_activity(&rows, &events)
        .await
        .expect("one batch");

    let devices = store.list_devices("t1").await.expect("list");
    assert_eq!(devices.len(), DEVICES);
    for d in &devices {
        let n: usize = d.id[1..].parse().expect("number");
        assert_eq!(d.last_seen_at, Some(2_000 + n as i64), "{}", d.id);
        assert_eq!(d.browser_name.as_deref(), Some("Chromium"), "{}", d.id);
        assert_eq!(d.browser_version.as_deref(), Some("Chromium-1"), "{}", d.id);
    }
    // A later row without a browser keeps the stored one.
    store
        .record_activity(&[seen(7, 5_000, None)], &[])
        .await
        .expect("second batch");
    let d7 = store
        .device("t1", &device(7))
        .await
        .expect("read")
        .expect("d7");
    assert_eq!(d7.last_seen_at, Some(5_000));
    assert_eq!(d7.browser_name.as_deref(), Some("Chromium"));

    let audit = store
        .list_audit("t1", &Default::default(), 1_000)
        .await
        .expect("audit");
    assert_eq!(audit.len(), DEVICES);
    // Newest first: the rows were written in the order given.
    let ats: Vec<i64> = audit.iter().rev().map(|r| r.at).collect();
    assert_eq!(
        ats,
        (0..DEVICES).map(|n| 3_000 + n as i64).collect::<Vec<_>>()
    );
    let last = audit.first().expect("a row");
    assert_eq!(last.detail, None);
    assert_eq!(audit[1].detail.as_deref(), Some("detail 298"));
    assert!(
        store
            .list_audit("t2", &Default::default(), 10)
            .await
            .expect("t2")
            .is_empty()
    );
}

#[tokio::test]
async fn activity_batches_on_sqlite() {
    let (store, _dir) = sqlite_store().await;
    exercise(store).await;
}

#[tokio::test]
async fn activity_batches_on_postgres() {
    let Some((store, db)) = postgres_store().await else {
        return;
    };
    exercise(store).await;
    db.drop_database().await;
}

/// On PostgreSQL, with another transaction holding device `b`, `op` (given a
/// store where `b` comes first on disk) must already hold device `a`, which
/// sorts before it, while it waits for `b`: it takes device rows in the one
/// order every writer uses, (tenant, id), so no two writers wait on each other
/// in a cycle (which PostgreSQL breaks only after its deadlock_timeout, 1 s, by
/// failing one).
async fn takes_devices_in_order<F, Fut>(prepare: &[&'static str], op: F)
where
    F: FnOnce(Arc<PostgresStore>) -> Fut,
    Fut: std::future::Future<Output = Result<(), StoreError>> + Send + 'static,
{
    let Some(Backend::Postgres { admin_url }) = Backend::postgres().await else {
        return;
    };
    let db = ScratchDatabase::create(&admin_url).await.expect("database");
    let store = Arc::new(
        PostgresStore::connect(&db.url, Duration::from_secs(5))
            .await
            .expect("connect"),
    );
    with_tenants(store.as_ref(), &["t1"]).await;
    // `b` is written first, so it comes first on disk.
    for (n, id) in ["b", "a"].iter().enumerate() {
        add_device(store.as_ref(), (*id).into(), n).await;
    }
    let mut holder = sqlx::PgConnection::connect(&db.url).await.expect("holder");
    for statement in prepare {
        sqlx::query(*statement)
            .execute(&mut holder)
            .await
            .expect("prepare");
    }
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM device WHERE id = 'b' FOR UPDATE")
        .execute(&mut holder)
        .await
        .expect("lock b");
    let writer = tokio::spawn(op(store.clone()));
    let watcher = sqlx::PgPool::connect(&db.url).await.expect("watcher");
    let waits = latchkey_testkit::wait_until(Duration::from_secs(10), || {
        let watcher = watcher.clone();
        async move {
            let (n,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&watcher)
            .await
            .expect("activity");
            n == 1
        }
    })
    .await;
    assert!(waits, "the writer waits for b");
    let taken = sqlx::query("SELECT 1 FROM device WHERE id = 'a' FOR UPDATE NOWAIT")
        .execute(&mut holder)
        .await;
    let code = match &taken {
        Err(sqlx::Error::Database(e)) => e.code().map(|c| c.into_owned()),
        _ => None,
    };
    assert_eq!(code.as_deref(), Some("55P03"), "a was free: {taken:?}");
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("rollback");
    writer
        .await
        .expect("join")
        .expect("written once b was free");
    watcher.close().await;
    db.drop_database().await;
}

/// Two replicas' group commits update the last-seen times of devices that moved
/// between them (a rolling restart); this one is given `b` before `a`.
#[tokio::test]
async fn the_group_commit_takes_devices_in_order_on_postgres() {
    let seen = |id: &str| DeviceSeen {
        tenant_id: "t1".into(),
        device_id: id.into(),
        at: 5,
        browser: None,
    };
    takes_devices_in_order(&[], |store| async move {
        store.record_activity(&[seen("b"), seen("a")], &[]).await
    })
    .await;
}

/// Revoke-all against a replica's group commit: were revoke-all the one
/// PostgreSQL failed, the team's browsers would keep their grants.
#[tokio::test]
async fn revoke_all_takes_devices_in_order_on_postgres() {
    takes_devices_in_order(&[], |store| async move {
        store.revoke_all_devices("t1", 10).await.map(|_| ())
    })
    .await;
}

/// A member's removal revokes their devices: in the same order.
#[tokio::test]
async fn a_members_removal_takes_devices_in_order_on_postgres() {
    let prepare = [
        "INSERT INTO member (id, tenant_id, display_name, email, role, created_at) \
         VALUES ('mem_1', 't1', 'M', 'm@example.com', 'member', 1)",
        "UPDATE device SET owner_id = 'mem_1' WHERE tenant_id = 't1'",
    ];
    takes_devices_in_order(&prepare, |store| async move {
        let removed = store.remove_member("t1", "mem_1", 10).await?;
        assert!(removed.is_some(), "the member was removed");
        Ok(())
    })
    .await;
}

/// The expiry notices' claim marks the devices it tells of: in the same order.
#[tokio::test]
async fn the_expiry_claim_takes_devices_in_order_on_postgres() {
    let prepare = ["UPDATE device SET expires_at = 1000 WHERE tenant_id = 't1'"];
    takes_devices_in_order(&prepare, |store| async move {
        let claimed = store
            .claim_expiry_notices(500, 1000, 1, |_, _| "expiring".to_string())
            .await?;
        assert_eq!(claimed.len(), 2, "both devices claimed");
        Ok(())
    })
    .await;
}
