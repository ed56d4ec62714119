//! The audit trail's hash chain on the real server, both backends
//! (docs/operations.md, "Tamper evidence"): rows written by the gateway verify,
//! with the library and with `latchkeyd audit verify`; a row changed, removed,
//! inserted or appended in the database, or a truncated tail, is named; put back,
//! the chain verifies again.

#![allow(clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_server::audit_chain::{self, Fault};
use latchkey_server::store::NewAuditEvent;
use latchkey_testkit::database::Database;
use latchkey_testkit::{Backend, TestServer, backend_tests};

const DEADLINE: Duration = Duration::from_secs(10);

/// `latchkeyd audit verify` on the server's store: its exit status and output.
fn verify_command(server: &TestServer) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkeyd"));
    cmd.env_clear()
        .env("LATCHKEY_LOG", "error")
        .arg("--data-dir")
        .arg(&server.config().data_dir);
    if let Some(url) = &server.config().database_url {
        cmd.arg("--database-url").arg(url);
    }
    let out = cmd.args(["audit", "verify"]).output().expect("latchkeyd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn tampering_is_named_and_an_intact_chain_verifies(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    for n in 0..6 {
        admin
            .create_token(&format!("agent-{n}"), Role::Agent)
            .await
            .expect("token");
    }
    let six = latchkey_testkit::wait_until(DEADLINE, || async {
        admin
            .audit_lines(100, &["action"])
            .await
            .is_ok_and(|l| l.iter().filter(|a| *a == "token.create").count() == 6)
    })
    .await;
    assert!(six, "the six rows are written");
    let store = server.state().store.clone();
    let tenant = server.default_tenant_id().await.expect("default tenant");
    let keys = server.state().audit_keys.verifying();
    let rows = audit_chain::verify(store.as_ref(), &tenant, &keys)
        .await
        .expect("store")
        .expect("intact")
        .rows;
    assert!(rows >= 7, "bootstrap and six tokens: {rows}");
    let (ok, out) = verify_command(&server);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("team default: {rows} audit rows, chain intact")),
        "{out}"
    );
    let verdict = || async {
        audit_chain::verify(store.as_ref(), &tenant, &keys)
            .await
            .expect("store")
            .map(|s| s.rows)
    };
    let db = Database::open(&server).await;
    let row = |seq: i64| format!("tenant_id = '{tenant}' AND seq = {seq}");

    // Changed.
    db.exec(format!(
        "UPDATE audit_event SET outcome = 'forged' WHERE {}",
        row(3)
    ))
    .await;
    let Err(Fault::Changed { seq: 3, .. }) = verdict().await else {
        panic!("a changed row: {:?}", verdict().await);
    };
    let (ok, out) = verify_command(&server);
    assert!(!ok && out.contains("BROKEN: row 3 "), "{out}");
    db.exec(format!(
        "UPDATE audit_event SET outcome = 'ok' WHERE {}",
        row(3)
    ))
    .await;
    assert_eq!(verdict().await, Ok(rows));

    // Removed, then put back as it was.
    db.exec(format!(
        "CREATE TABLE saved AS SELECT * FROM audit_event WHERE {}",
        row(4)
    ))
    .await;
    db.exec(format!("DELETE FROM audit_event WHERE {}", row(4)))
        .await;
    let Err(Fault::Missing {
        expected: 4,
        seq: 5,
        ..
    }) = verdict().await
    else {
        panic!("a removed row: {:?}", verdict().await);
    };
    db.exec(db.put_back()).await;
    assert_eq!(verdict().await, Ok(rows));

    // Inserted outside the chain, and appended after its head.
    let insert = |seq: &str| {
        format!(
            "INSERT INTO audit_event (tenant_id, at, actor, action, target, outcome, seq, hash) \
             VALUES ('{tenant}', 1, 'token:bootstrap', 'device.revoke', 'device:x', 'ok', {seq}, '00')"
        )
    };
    db.exec(insert("NULL")).await;
    let Err(Fault::Unchained { .. }) = verdict().await else {
        panic!("an inserted row: {:?}", verdict().await);
    };
    db.exec(format!(
        "DELETE FROM audit_event WHERE tenant_id = '{tenant}' AND seq IS NULL"
    ))
    .await;
    db.exec(insert(&(rows + 1).to_string())).await;
    let Err(Fault::BeyondHead { seq, .. }) = verdict().await else {
        panic!("an appended row: {:?}", verdict().await);
    };
    assert_eq!(seq, rows + 1);
    db.exec(format!("DELETE FROM audit_event WHERE {}", row(rows + 1)))
        .await;
    assert_eq!(verdict().await, Ok(rows));

    // The tail cut off.
    db.exec(format!(
        "DELETE FROM audit_event WHERE tenant_id = '{tenant}' AND seq > {}",
        rows - 2
    ))
    .await;
    assert_eq!(
        verdict().await,
        Err(Fault::Truncated {
            last: rows - 2,
            head: rows
        })
    );
    let (ok, out) = verify_command(&server);
    assert!(!ok && out.contains("rows after"), "{out}");
    db.close().await;
    server.stop().await;
}

backend_tests!(tampering, tampering_is_named_and_an_intact_chain_verifies);

/// Writers on two stores at once (as two replicas would be) extend one chain
/// without a fork or a gap: each holds the tenant's head while it writes.
async fn two_replicas_keep_one_chain(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let tenant = server.default_tenant_id().await.expect("default tenant");
    // A second store on the same database: another replica's.
    let other = latchkey_server::open_store(server.config())
        .await
        .expect("second store");
    let mut writers = Vec::new();
    for n in 0..40_i64 {
        let store = if n % 2 == 0 {
            server.state().store.clone()
        } else {
            other.clone()
        };
        let tenant = tenant.clone();
        writers.push(tokio::spawn(async move {
            let rows: Vec<NewAuditEvent> = (0..5)
                .map(|i| NewAuditEvent {
                    tenant_id: tenant.clone(),
                    at: n * 10 + i,
                    actor: format!("replica:{}", n % 2),
                    action: "test.write".into(),
                    target: format!("writer:{n}"),
                    outcome: "ok".into(),
                    detail: None,
                })
                .collect();
            store.record_activity(&[], &rows).await.expect("write");
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let keys = server.state().audit_keys.verifying();
    let rows = audit_chain::verify(server.state().store.as_ref(), &tenant, &keys)
        .await
        .expect("store")
        .expect("one intact chain")
        .rows;
    assert!(rows > 200, "{rows}");
    server.stop().await;
}

backend_tests!(replicas, two_replicas_keep_one_chain);
