//! The node's grant sweep: a revocation written behind this gateway's back (by
//! another node, or straight into the database) closes the live socket at the next
//! sweep, every other device stays connected, and grants are read in batches and
//! only within the tenant asked for.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_server::auth::bootstrap::create_tenant;
use latchkey_server::devices::grant_sweep::{SweepOutcome, sweep};
use latchkey_server::store::GRANT_BATCH;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, TestServer, backend_tests, wait_until};

async fn default_tenant(server: &TestServer) -> String {
    server
        .state()
        .store
        .tenant_by_name("default")
        .await
        .expect("read")
        .expect("default tenant")
        .id
}

async fn revoked_in_the_store_closes_the_socket(backend: Backend) {
    // The background sweep runs once an hour here: the test sweeps when it wants.
    let server = TestServer::builder(backend)
        .limits(|l| l.grant_recheck_ms = 3_600_000)
        .start()
        .await
        .expect("server");
    let state = server.state();
    let tenant = default_tenant(&server).await;
    let mut a = server.new_extension().await.expect("ext");
    let a_id = a.pair().await.expect("pair").device_id;
    let mut a_socket = a.connect_online().await.expect("online");
    let mut b = server.new_extension().await.expect("ext");
    let b_id = b.pair().await.expect("pair").device_id;
    let _b_socket = b.connect_online().await.expect("online");

    let clean = SweepOutcome {
        checked: 2,
        closed: 0,
        failed_tenants: 0,
    };
    assert_eq!(sweep(state).await, clean);

    // Revoked in the store only: no push reaches the socket.
    state
        .store
        .revoke_device(&tenant, &a_id, server.clock().now_ms())
        .await
        .expect("revoke")
        .expect("device exists");
    assert!(
        state.registry.link(&a_id).is_some(),
        "still routable before the sweep"
    );
    let swept = sweep(state).await;
    assert_eq!(
        swept,
        SweepOutcome {
            checked: 2,
            closed: 1,
            failed_tenants: 0
        }
    );
    let ended = a_socket
        .ended(Duration::from_secs(5))
        .await
        .expect("closed");
    assert_eq!(ended, Ended::Closed(CloseCode::Revoked.code()));
    assert!(
        wait_until(Duration::from_secs(5), || async {
            state.registry.link(&a_id).is_none()
        })
        .await,
        "the revoked device left the registry"
    );
    // The other device is untouched, and a later sweep finds nothing more to close.
    assert!(state.registry.link(&b_id).is_some());
    assert_eq!(
        sweep(state).await,
        SweepOutcome {
            checked: 1,
            closed: 0,
            failed_tenants: 0
        }
    );
    server.stop().await;
}

backend_tests!(
    revoked_behind_the_gateway,
    revoked_in_the_store_closes_the_socket
);

async fn grants_read_in_batches_within_the_tenant(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let store = &server.state().store;
    let tenant = default_tenant(&server).await;
    let mut first = server.new_extension().await.expect("ext");
    let first_id = first.pair().await.expect("pair").device_id;
    let mut second = server.new_extension().await.expect("ext");
    let second_id = second.pair().await.expect("pair").device_id;

    // Two real ids among more than two batches of unknown ones, the second real id in
    // the last batch.
    let mut ids: Vec<String> = (0..GRANT_BATCH * 2 + 100)
        .map(|i| format!("{i:032x}"))
        .collect();
    ids[0] = first_id.clone();
    let last = ids.len() - 1;
    ids[last] = second_id.clone();
    let mut found: Vec<String> = store
        .device_grants(&tenant, &ids)
        .await
        .expect("grants")
        .into_iter()
        .map(|g| {
            assert!(g.revoked_at.is_none());
            assert!(g.expires_at > server.clock().now_ms());
            g.id
        })
        .collect();
    found.sort();
    let mut expected = vec![first_id, second_id];
    expected.sort();
    assert_eq!(found, expected);

    // Another tenant asking for the same ids gets nothing.
    let beta = create_tenant(store.as_ref(), "beta", server.clock().now_ms())
        .await
        .expect("tenant beta");
    let foreign = store
        .device_grants(&beta.tenant.id, &ids)
        .await
        .expect("grants");
    assert!(foreign.is_empty(), "{foreign:?}");
    assert!(
        store
            .device_grants(&tenant, &[])
            .await
            .expect("empty")
            .is_empty()
    );
    server.stop().await;
}

backend_tests!(batched_grants, grants_read_in_batches_within_the_tenant);
