//! Expiry notices on the real server, both backends (docs/pairing-and-grants.md,
//! "Expiry notices"): a grant within 7 days of its end gets one
//! `device.expiring` row, within 1 day another, never twice (not after a
//! restart either); a renewal starts the next grant's notices afresh.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_server::devices::expiry_notices;
use latchkey_testkit::{Backend, TestServer, backend_tests};

const DAY: Duration = Duration::from_secs(86_400);

/// The details of the `device.expiring` rows about `device`, oldest first.
async fn notices(server: &TestServer, device: &str) -> Vec<String> {
    let lines = server
        .admin()
        .audit_lines(500, &["action", "target", "detail"])
        .await
        .expect("audit");
    let mut found: Vec<String> = lines
        .into_iter()
        .filter(|l| l.starts_with("device.expiring") && l.contains(device))
        .collect();
    found.reverse();
    found
}

async fn a_grant_is_noticed_once_at_7_days_and_once_at_1_day(backend: Backend) {
    let mut server = TestServer::start(backend).await.expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    let device = ext.pair().await.expect("pair").device_id;
    let write = |server: &TestServer| {
        let core = server.state().clone();
        async move { expiry_notices::write_due(&core).await.expect("notices") }
    };
    assert_eq!(write(&server).await, 0, "90 days left: nothing due");

    // 6 days left (the grant is 90 days).
    server.clock().advance(DAY * 84);
    assert_eq!(write(&server).await, 1);
    assert_eq!(write(&server).await, 0, "never twice");
    let seen = notices(&server, &device).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("(within 7 days)"), "{seen:?}");

    // 12 hours left: the last notice.
    server.clock().advance(DAY * 5 + DAY / 2);
    assert_eq!(write(&server).await, 1);
    assert_eq!(write(&server).await, 0);
    let seen = notices(&server, &device).await;
    assert!(seen[1].contains("(within 1 day)"), "{seen:?}");

    // Renewed: 90 days again, and the new grant's notices come in their time.
    ext.renew().await.expect("renew");
    assert_eq!(write(&server).await, 0);
    server.clock().advance(DAY * 84);
    assert_eq!(write(&server).await, 1);
    assert_eq!(notices(&server, &device).await.len(), 3);

    // A revoked device is not noticed.
    let mut other = server.new_extension().await.expect("extension");
    let revoked = other.pair().await.expect("pair").device_id;
    server.admin().revoke(&revoked).await.expect("revoke");
    server.clock().advance(DAY * 85);
    write(&server).await;
    assert!(notices(&server, &revoked).await.is_empty());
    let before = notices(&server, &device).await.len();
    server.restart().await.expect("restart");
    assert_eq!(write(&server).await, 0, "not again after a restart");
    assert_eq!(notices(&server, &device).await.len(), before);
    server.stop().await;
}

backend_tests!(expiry, a_grant_is_noticed_once_at_7_days_and_once_at_1_day);
