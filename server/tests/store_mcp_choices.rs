//! MCP callers' choices in the store (`McpChoiceStore`), on SQLite and on the
//! machine's PostgreSQL: a write names the version it read and loses to one
//! that came first; callers are kept apart by tenant, token and key; a token
//! keeps at most `MAX_CHOICES_PER_TOKEN` callers, the least recently changed
//! going first; pruning forgets what nobody changed since the cut.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use latchkey_server::store::{
    ChoiceKey, MAX_CHOICES_PER_TOKEN, McpChoiceRecord, Store, TenantRecord,
};
use latchkey_testkit::database::{postgres_store, sqlite_store};

fn key<'a>(tenant_id: &'a str, token_id: &'a str, caller_key: &'a str) -> ChoiceKey<'a> {
    ChoiceKey {
        tenant_id,
        token_id,
        caller_key,
    }
}

fn on(device: &str, session: Option<&str>) -> McpChoiceRecord {
    McpChoiceRecord {
        device_id: Some(device.into()),
        session_id: session.map(str::to_string),
        halted: None,
        version: 0,
    }
}

async fn exercise(store: Arc<dyn Store>) {
    store.migrate().await.expect("migrate");
    for t in ["t1", "t2"] {
        store
            .create_tenant(&TenantRecord {
                id: t.into(),
                name: format!("{t}-name"),
                created_at: 1,
            })
            .await
            .expect("tenant");
    }
    let alice = key("t1", "tok", "");
    assert_eq!(store.mcp_choice(alice).await.expect("read"), None);

    // The first write creates version 1; a second "first" write loses.
    assert!(
        store
            .put_mcp_choice(alice, &on("d1", Some("s1")), None, 10)
            .await
            .expect("put")
    );
    assert!(
        !store
            .put_mcp_choice(alice, &on("d2", Some("s2")), None, 11)
            .await
            .expect("put")
    );
    let read = store.mcp_choice(alice).await.expect("read").expect("row");
    assert_eq!((read.session_id.as_deref(), read.version), (Some("s1"), 1));

    // A write at the version read wins once; the same version again loses.
    let halted = McpChoiceRecord {
        halted: Some("user_stopped".into()),
        ..on("d1", None)
    };
    assert!(
        store
            .put_mcp_choice(alice, &halted, Some(1), 12)
            .await
            .expect("put")
    );
    assert!(
        !store
            .put_mcp_choice(alice, &on("d3", Some("s3")), Some(1), 13)
            .await
            .expect("put")
    );
    let read = store.mcp_choice(alice).await.expect("read").expect("row");
    assert_eq!(
        read,
        McpChoiceRecord {
            version: 2,
            ..halted
        }
    );

    // Another tenant, token or key is another caller.
    for other in [
        key("t2", "tok", ""),
        key("t1", "tok2", ""),
        key("t1", "tok", "k"),
    ] {
        assert_eq!(
            store.mcp_choice(other).await.expect("read"),
            None,
            "{other:?}"
        );
    }
    assert!(
        store
            .put_mcp_choice(key("t2", "tok", ""), &on("x", None), None, 14)
            .await
            .expect("put")
    );
    assert_eq!(
        store
            .mcp_choice(alice)
            .await
            .expect("read")
            .expect("row")
            .version,
        2
    );

    // A token keeps its most recently changed callers; alice's is the oldest.
    let keys: Vec<String> = (0..MAX_CHOICES_PER_TOKEN)
        .map(|n| format!("k{n}"))
        .collect();
    for (n, k) in keys.iter().enumerate() {
        let at = 100 + i64::try_from(n).expect("small");
        assert!(
            store
                .put_mcp_choice(key("t1", "tok", k), &on("d", None), None, at)
                .await
                .expect("put")
        );
    }
    assert_eq!(
        store.mcp_choice(alice).await.expect("read"),
        None,
        "the oldest went"
    );
    assert!(
        store
            .mcp_choice(key("t1", "tok", "k0"))
            .await
            .expect("read")
            .is_some()
    );
    assert!(
        store
            .mcp_choice(key("t2", "tok", ""))
            .await
            .expect("read")
            .is_some(),
        "another tenant's stays"
    );

    // Pruning takes what was last changed before the cut, nothing after.
    let gone = store.prune_mcp_choices(100).await.expect("prune");
    assert_eq!(gone, 1, "t2's row, written at 14");
    assert!(
        store
            .mcp_choice(key("t1", "tok", "k0"))
            .await
            .expect("read")
            .is_some()
    );
}

#[tokio::test]
async fn mcp_choices_on_sqlite() {
    let (store, _dir) = sqlite_store().await;
    exercise(store).await;
}

#[tokio::test]
async fn mcp_choices_on_postgres() {
    let Some((store, db)) = postgres_store().await else {
        return;
    };
    exercise(store).await;
    db.drop_database().await;
}
