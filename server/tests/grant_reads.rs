//! A reconnect reads the device's grant from the store once, by its token, at the upgrade. The
//! re-check after the upgrade (docs/protocol.md, "The upgrade") goes back to the store only when a
//! close was signalled on this node between that read and the connection's registration; a
//! revocation that came before the upgrade is already in what the upgrade read. Counted on the real
//! server through `latchkey_store_query_seconds_count{op}` on `/metrics`. (One test in this binary:
//! the recorder is process-wide, so counts are exact.)

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::{Backend, TestServer, wait_until};

const TOKEN_READS: &str = "latchkey_store_query_seconds_count{op=\"devices_by_token_hash\"}";
const GRANT_READS: &str = "latchkey_store_query_seconds_count{op=\"device\"}";

async fn store_reads(server: &TestServer) -> (f64, f64) {
    let m = server.metrics().await.expect("scrape");
    // A series appears once its first query is timed.
    let read = |key| m.get(key).copied().unwrap_or(0.0);
    (read(TOKEN_READS), read(GRANT_READS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_reads_the_grant_once() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let mut kept = server.new_extension().await.expect("pair");
    kept.pair().await.expect("grant");
    let mut revoked = server.new_extension().await.expect("pair");
    revoked.pair().await.expect("grant");

    let before = store_reads(&server).await;
    const RECONNECTS: u32 = 5;
    for _ in 0..RECONNECTS {
        let mut socket = kept.connect_online().await.expect("online");
        socket.ws.close(None).await.expect("close");
        // The next connect replaces nothing: this one is gone from the registry.
        assert!(
            wait_until(Duration::from_secs(10), || async {
                server.state().registry.slots_taken() == 0
            })
            .await,
            "the closed connection was not unregistered"
        );
    }
    let after = store_reads(&server).await;
    assert_eq!(
        after.0 - before.0,
        f64::from(RECONNECTS),
        "one token read per connect"
    );
    assert_eq!(after.1 - before.1, 0.0, "no second read of the grant");

    // A revocation signalled before an upgrade is in what that upgrade reads.
    let revoked_id = revoked.device_id.clone().expect("device id");
    server.admin().revoke(&revoked_id).await.expect("revoke");
    let mut socket = kept
        .connect_online()
        .await
        .expect("online after a revocation");
    let refused = revoked.connect().await.expect("connect");
    let answer = refused.expect_err("a revoked device is refused at the upgrade");
    assert_eq!(answer.status, 401);
    let last = store_reads(&server).await;
    assert_eq!(last.0 - after.0, 2.0, "one token read per upgrade");
    assert_eq!(last.1 - after.1, 0.0, "no second read of the grant");
    socket.ws.close(None).await.expect("close");
    server.stop().await;
}
