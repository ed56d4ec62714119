//! A store made by the first schema, holding a team's data, is migrated by this
//! build on both backends: nothing is lost, the old rows read as before (no owner,
//! no person behind a token), and the new tables and rules work on it. This is the
//! path every running deployment takes on upgrade.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use latchkey_server::store::{
    ApiTokenRecord, MemberRecord, PostgresStore, SQLITE_FILE, SqliteStore, Store,
};
use latchkey_testkit::{Backend, ScratchDatabase, backend_tests};
use sqlx::migrate::Migrator;

/// The rows of a team as the first schema stored them.
const V1_ROWS: &[&str] = &[
    "INSERT INTO tenant (id, name, created_at) VALUES ('ten_1', 'default', 1)",
    "INSERT INTO api_token (id, tenant_id, name, role, token_hash, created_at) \
     VALUES ('tok_0000000000000001', 'ten_1', 'bootstrap', 'admin', 'aa', 1)",
    "INSERT INTO api_token (id, tenant_id, name, role, token_hash, created_at, expires_at) \
     VALUES ('tok_0000000000000002', 'ten_1', 'ci', 'agent', 'bb', 2, 9000000000000)",
    "INSERT INTO pairing (id, tenant_id, secret_hash, label, created_by, created_at, expires_at) \
     VALUES ('pair_1', 'ten_1', 'cc', 'laptop', 'bootstrap', 3, 9000000000000)",
    "INSERT INTO device (id, tenant_id, label, created_by, created_at, token_hash, expires_at, renew_after) \
     VALUES ('0123456789abcdef0123456789abcdef', 'ten_1', 'laptop', 'bootstrap', 4, 'dd', 9000000000000, 8000000000000)",
    "INSERT INTO audit_event (tenant_id, at, actor, action, target, outcome) \
     VALUES ('ten_1', 5, 'token:bootstrap', 'device.pair', 'device:0123', 'ok')",
];

/// The first migration only, as a deployment of the first schema ran it.
async fn first_schema(dir: &str) -> Migrator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dir);
    let mut migrator = Migrator::new(path).await.expect("migrations");
    let all = migrator.migrations.to_vec();
    assert!(all.len() >= 2, "this test is about an upgrade");
    migrator.migrations = all[..1].to_vec().into();
    migrator
}

async fn v1_store(backend: &Backend, dir: &Path) -> (Arc<dyn Store>, Option<ScratchDatabase>) {
    match backend {
        Backend::Sqlite => {
            let url = format!("sqlite://{}?mode=rwc", dir.join(SQLITE_FILE).display());
            let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
            first_schema("sqlite").await.run(&pool).await.expect("v1");
            for row in V1_ROWS {
                sqlx::query(sqlx::AssertSqlSafe(*row))
                    .execute(&pool)
                    .await
                    .expect(row);
            }
            pool.close().await;
            let store = SqliteStore::open(dir, Duration::from_secs(5))
                .await
                .expect("open");
            (Arc::new(store), None)
        }
        Backend::Postgres { admin_url } => {
            let db = ScratchDatabase::create(admin_url).await.expect("database");
            let pool = sqlx::PgPool::connect(&db.url).await.expect("postgres");
            first_schema("postgres").await.run(&pool).await.expect("v1");
            for row in V1_ROWS {
                sqlx::query(sqlx::AssertSqlSafe(*row))
                    .execute(&pool)
                    .await
                    .expect(row);
            }
            pool.close().await;
            let store = PostgresStore::connect(&db.url, Duration::from_secs(5))
                .await
                .expect("connect");
            (Arc::new(store), Some(db))
        }
    }
}

async fn a_first_schema_store_upgrades_with_its_data(backend: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, db) = v1_store(&backend, dir.path()).await;
    store.migrate().await.expect("the upgrade applies");

    // The old rows read as before: no person behind the tokens, no owner.
    let tokens = store.list_api_tokens("ten_1").await.expect("tokens");
    assert_eq!(tokens.len(), 2);
    assert!(tokens.iter().all(|t| t.member_id.is_none()));
    assert_eq!(tokens[1].expires_at, Some(9_000_000_000_000));
    let token = store
        .api_token_by_hash("bb")
        .await
        .expect("read")
        .expect("kept");
    assert_eq!((token.name.as_str(), token.role.as_str()), ("ci", "agent"));
    let devices = store.list_devices("ten_1").await.expect("devices");
    assert_eq!(devices.len(), 1);
    assert_eq!(
        (devices[0].label.as_str(), devices[0].owner_id.as_deref()),
        ("laptop", None)
    );
    assert_eq!(
        store
            .list_audit("ten_1", &Default::default(), 10)
            .await
            .expect("audit")
            .len(),
        1
    );
    // The old audit row joined the hash chain, which new rows extend.
    assert_eq!(
        latchkey_server::audit_chain::verify(
            store.as_ref(),
            "ten_1",
            &latchkey_server::audit_chain::VerifyingKeys::default()
        )
        .await
        .expect("store")
        .map(|s| s.rows),
        Ok(1)
    );

    // The new rules hold on the upgraded store.
    let alice = MemberRecord {
        id: "mem_0000000000000001".into(),
        tenant_id: "ten_1".into(),
        display_name: "Alice".into(),
        email: "alice@example.com".into(),
        role: "member".into(),
        created_at: 10,
        removed_at: None,
    };
    store.insert_member(&alice).await.expect("member");
    let own = ApiTokenRecord {
        id: "tok_0000000000000003".into(),
        tenant_id: "ten_1".into(),
        name: "alice".into(),
        role: "member".into(),
        token_hash: "ee".into(),
        created_at: 11,
        expires_at: None,
        revoked_at: None,
        last_used_at: None,
        member_id: Some(alice.id.clone()),
    };
    assert!(store.insert_member_token(&own).await.expect("token"));
    // A member token with no member is refused by the schema itself.
    let orphan = ApiTokenRecord {
        id: "tok_0000000000000004".into(),
        token_hash: "ff".into(),
        member_id: None,
        ..own.clone()
    };
    assert!(store.insert_api_token(&orphan).await.is_err());
    // The old unique rule on token hashes survived the rebuild.
    let twin = ApiTokenRecord {
        id: "tok_0000000000000005".into(),
        role: "agent".into(),
        token_hash: "bb".into(),
        member_id: None,
        ..own
    };
    assert!(store.insert_api_token(&twin).await.is_err());
    if let Some(db) = db {
        db.drop_database().await;
    }
}

backend_tests!(schema_v1, a_first_schema_store_upgrades_with_its_data);
