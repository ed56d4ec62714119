//! The audit trail kept over time, on the real server, both backends
//! (docs/operations.md, "Tamper evidence", "Export", "Retention"): signed
//! checkpoints catch a chain recomputed by someone who can write the database;
//! an export verifies offline with the public keys and names an edited line;
//! pruning past a team's retention leaves a chain that still verifies; a key kept
//! in a file signs without its private half ever reaching the store.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_protocol::audit_chain::{
    AuditKeySet, CHECKPOINT_ACTION, Checkpoint, ExportHeader, ExportedRow, Fault, VerifyingKeys,
    Walk,
};
use latchkey_server::audit_chain;
use latchkey_server::audit_keeping;
use latchkey_testkit::database::Database;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

/// `n` token rows, committed before each creation answers; the tokens' ids.
async fn activity(server: &TestServer, prefix: &str, n: usize) -> Vec<String> {
    let admin = server.admin();
    let mut ids = Vec::new();
    for i in 0..n {
        let created = admin
            .create_token(&format!("{prefix}-{i}"), Role::Agent)
            .await
            .expect("token");
        ids.push(created.view.id);
    }
    ids
}

async fn published_keys(server: &TestServer) -> VerifyingKeys {
    let (status, body) = server
        .admin()
        .raw(Method::GET, "/v1/admin/audit/keys", None)
        .await
        .expect("keys");
    assert_eq!(status, 200, "{body}");
    let set: AuditKeySet = serde_json::from_value(body).expect("a key set");
    VerifyingKeys::from_set(&set).expect("Ed25519 keys")
}

async fn checkpoints_sign_the_chain_and_catch_a_rewrite(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let tenant = server.default_tenant_id().await.expect("default tenant");
    let store = server.state().store.clone();
    activity(&server, "cp", 4).await;
    assert_eq!(
        audit_keeping::checkpoint_all(server.state())
            .await
            .expect("checkpoint"),
        1
    );
    // The head now is a checkpoint: nothing more to sign.
    assert_eq!(
        audit_keeping::checkpoint_all(server.state())
            .await
            .expect("checkpoint"),
        0
    );
    let keys = published_keys(&server).await;
    let summary = audit_chain::verify(store.as_ref(), &tenant, &keys)
        .await
        .expect("store")
        .expect("intact");
    assert_eq!(
        (summary.checkpoints, summary.unsigned()),
        (1, 0),
        "{summary:?}"
    );
    let checkpoint_seq = summary.last;

    // Someone who can write the database but not sign changes row 2 and
    // recomputes every hash after it and the head: the chain is whole again,
    // but the checkpoint signed the old one.
    let db = Database::open(&server).await;
    db.exec(format!(
        "UPDATE audit_event SET outcome = 'forged' WHERE tenant_id = '{tenant}' AND seq = 2"
    ))
    .await;
    let rows = store
        .audit_chain_page(&tenant, 0, 1000)
        .await
        .expect("rows");
    let mut prev = audit_chain::GENESIS.to_string();
    for row in &rows {
        let hash = row.as_row().content.hash(&prev, row.seq);
        db.exec(format!(
            "UPDATE audit_event SET hash = '{hash}' WHERE id = {}",
            row.id
        ))
        .await;
        prev = hash;
    }
    db.exec(format!(
        "UPDATE audit_head SET hash = '{prev}' WHERE tenant_id = '{tenant}'"
    ))
    .await;
    let verdict = audit_chain::verify(store.as_ref(), &tenant, &keys)
        .await
        .expect("store");
    assert_eq!(
        verdict,
        Err(Fault::BadCheckpoint {
            seq: checkpoint_seq,
            id: rows.last().expect("rows").id,
            why: "it covers a different chain than the one before it"
        })
    );
    db.close().await;

    // At shutdown every chain that grew is signed.
    activity(&server, "late", 2).await;
    let mut server = server;
    server.restart().await.expect("restart");
    let last = server
        .state()
        .store
        .audit_chain_page(&tenant, checkpoint_seq, 100)
        .await
        .expect("rows");
    assert_eq!(
        last.len(),
        3,
        "two tokens and the drain's checkpoint: {last:?}"
    );
    assert_eq!(
        last.last().map(|r| r.event.action.as_str()),
        Some(CHECKPOINT_ACTION),
        "{last:?}"
    );
    server.stop().await;
}

backend_tests!(checkpoints, checkpoints_sign_the_chain_and_catch_a_rewrite);

/// An export's lines, checked as `latchkey audit verify-file` checks them.
fn check_export(
    text: &str,
    keys: &VerifyingKeys,
) -> Result<(ExportHeader, Vec<ExportedRow>), Fault> {
    let mut lines = text.lines();
    let header: ExportHeader =
        serde_json::from_str(lines.next().expect("a header")).expect("header");
    let rows: Vec<ExportedRow> = lines
        .map(|l| serde_json::from_str(l).expect("a row"))
        .collect();
    let mut walk = Walk::after(keys, header.after_seq, header.after_hash.clone());
    for row in &rows {
        walk.step(&row.as_row(&header.tenant_id))?;
    }
    Ok((header, rows))
}

async fn exports_run_to_a_checkpoint_and_verify_offline(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let first_ids = activity(&server, "ex", 3).await;
    let keys = published_keys(&server).await;

    let (status, text) = admin
        .text("/v1/admin/audit/export?since=1h")
        .await
        .expect("export");
    assert_eq!(status, 200, "{text}");
    let (header, rows) = check_export(&text, &keys).expect("intact");
    assert_eq!(
        (header.latchkey_audit_export, header.team.as_str()),
        (1, "default")
    );
    assert_eq!(header.after_seq, 0);
    let actions: Vec<&str> = rows.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions.first(), Some(&"tenant.bootstrap"), "{actions:?}");
    assert!(
        actions.contains(&"audit.export"),
        "the export is itself audited: {actions:?}"
    );
    assert_eq!(actions.last(), Some(&CHECKPOINT_ACTION), "{actions:?}");

    // A later export from mid-chain starts from the row before it, and still
    // verifies; `until` in the past runs on to the next checkpoint.
    server.clock().advance(Duration::from_secs(7_200));
    activity(&server, "later", 2).await;
    let (_, text) = admin
        .text("/v1/admin/audit/export?since=30m")
        .await
        .expect("export");
    let (header, later) = check_export(&text, &keys).expect("intact");
    assert!(header.after_seq > 0, "{header:?}");
    assert!(
        first_ids
            .iter()
            .all(|id| later.iter().all(|r| !r.target.contains(id.as_str()))),
        "only the later rows"
    );
    assert_eq!(
        later.last().map(|r| r.action.as_str()),
        Some(CHECKPOINT_ACTION)
    );
    let (_, text) = admin
        .text("/v1/admin/audit/export?until=1h")
        .await
        .expect("export");
    let (_, early) = check_export(&text, &keys).expect("intact");
    assert_eq!(early.last().map(|r| r.seq), rows.last().map(|r| r.seq));

    // An edited line, a removed line and a forged checkpoint are each named.
    let edited = text.replacen("\"outcome\":\"ok\"", "\"outcome\":\"forged\"", 1);
    assert!(matches!(
        check_export(&edited, &keys),
        Err(Fault::Changed { .. })
    ));
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(2);
    assert!(matches!(
        check_export(&lines.join("\n"), &keys),
        Err(Fault::Missing { .. })
    ));
    let cp_line = text.lines().last().expect("a checkpoint");
    let mut cp_row: ExportedRow = serde_json::from_str(cp_line).expect("row");
    let mut cp: Checkpoint =
        serde_json::from_str(cp_row.detail.as_deref().expect("detail")).expect("checkpoint");
    cp.sig = cp.sig.chars().rev().collect();
    cp_row.detail = Some(serde_json::to_string(&cp).expect("json"));
    let forged = text.replace(cp_line, &serde_json::to_string(&cp_row).expect("json"));
    assert!(check_export(&forged, &keys).is_err());

    // Refusals: a time that is neither, an unknown parameter, a member's token.
    for path in [
        "/v1/admin/audit/export?since=yesterday",
        "/v1/admin/audit/export?from=1h",
    ] {
        let (status, body) = admin.text(path).await.expect("answer");
        assert_eq!(status, 400, "{path}: {body}");
    }
    server.stop().await;
}

backend_tests!(export, exports_run_to_a_checkpoint_and_verify_offline);

async fn retention_prunes_to_a_checkpoint_and_the_rest_verifies(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let tenant = server.default_tenant_id().await.expect("default tenant");
    let retention = |body| {
        let admin = admin.clone();
        async move {
            admin
                .raw(Method::PUT, "/v1/admin/audit/retention", Some(body))
                .await
                .expect("retention")
        }
    };
    let (status, body) = admin
        .raw(Method::GET, "/v1/admin/audit/retention", None)
        .await
        .expect("retention");
    assert_eq!(
        (status, &body),
        (200, &json!({"days": 180, "is_default": true}))
    );
    for bad in [
        json!({"days": 0}),
        json!({"days": 3661}),
        json!({"days": "7"}),
        json!({}),
    ] {
        let (status, body) = retention(bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, body) = retention(json!({"days": 1})).await;
    assert_eq!(
        (status, &body),
        (200, &json!({"days": 1, "is_default": false}))
    );

    let old = activity(&server, "old", 3).await;
    audit_keeping::checkpoint_all(server.state())
        .await
        .expect("checkpoint");
    server.clock().advance(Duration::from_secs(2 * 86_400));
    let new = activity(&server, "new", 2).await;
    let removed = audit_keeping::prune_all(server.state())
        .await
        .expect("prune");
    assert!(
        removed >= 4,
        "bootstrap, retention and three tokens: {removed}"
    );
    assert!(
        admin
            .audit_has(DEADLINE, &["audit.prune", "older than 1 days"])
            .await
    );
    let keys = server.state().audit_keys.verifying();
    let summary = audit_chain::verify(server.state().store.as_ref(), &tenant, &keys)
        .await
        .expect("store")
        .expect("what is left verifies");
    assert!(summary.first > 1, "{summary:?}");
    let targets = admin.audit_lines(500, &["target"]).await.expect("audit");
    let kept = |id: &String| targets.contains(&format!("token:{id}"));
    assert!(!old.iter().any(kept), "{targets:?}");
    assert!(new.iter().all(kept), "{targets:?}");
    // An export of what is left starts at the checkpoint and verifies.
    let (_, text) = admin.text("/v1/admin/audit/export").await.expect("export");
    check_export(&text, &keys).expect("intact");
    // Pruning again removes nothing: no newer checkpoint is past the cutoff.
    assert_eq!(
        audit_keeping::prune_all(server.state())
            .await
            .expect("prune"),
        0
    );
    let (status, body) = retention(json!({"days": null})).await;
    assert_eq!(
        (status, &body),
        (200, &json!({"days": 180, "is_default": true}))
    );
    server.stop().await;
}

backend_tests!(
    retention,
    retention_prunes_to_a_checkpoint_and_the_rest_verifies
);

async fn a_key_file_signs_and_its_private_half_stays_out_of_the_store(backend: Backend) {
    let dir = tempfile::tempdir().expect("dir");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let path = dir.path().join("audit-key.pem");
    std::fs::write(&path, key.serialize_pem()).expect("write");
    let server = TestServer::builder(backend)
        .config(move |c| c.audit.signing_key_file = Some(path))
        .start()
        .await
        .expect("server");
    let tenant = server.default_tenant_id().await.expect("default tenant");
    activity(&server, "kf", 1).await;
    audit_keeping::checkpoint_all(server.state())
        .await
        .expect("checkpoint");
    let stored = server.state().store.audit_keys().await.expect("keys");
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(
        stored[0].private_key.is_none(),
        "only the public half is stored"
    );
    let keys = published_keys(&server).await;
    let summary = audit_chain::verify(server.state().store.as_ref(), &tenant, &keys)
        .await
        .expect("store")
        .expect("intact");
    assert_eq!(summary.checkpoints, 1);
    server.stop().await;
}

backend_tests!(
    key_file,
    a_key_file_signs_and_its_private_half_stays_out_of_the_store
);

/// A key file that is not an Ed25519 key stops the start with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_that_is_not_ed25519_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("dir");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let path = dir.path().join("audit-key.pem");
    std::fs::write(&path, key.serialize_pem()).expect("write");
    let shown = path.display().to_string();
    let Err(err) = TestServer::builder(Backend::Sqlite)
        .config(move |c| c.audit.signing_key_file = Some(path))
        .start()
        .await
    else {
        panic!("a P-256 key was taken as the audit key");
    };
    let text = format!("{err:#}");
    assert!(
        text.contains(&shown) && text.contains("not an Ed25519 key"),
        "{text}"
    );
}
