//! When the store cannot be read, live sockets are closed after the failure grace
//! (30 s by default; shortened here) with close code `unauthorized`: a revocation
//! that the gateway cannot see must not leave a socket open forever.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, TestServer, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_store_closes_live_sockets_after_the_grace() {
    let Some(backend) = Backend::postgres().await else {
        return;
    };
    let server = TestServer::builder(backend)
        .limits(|l| {
            l.grant_recheck_ms = 100;
            l.store_failure_grace_ms = 1_000;
            l.pg_acquire_timeout_ms = 300;
        })
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");
    let mut socket = ext.connect_online().await.expect("online");

    server.set_database_reachable(false).await.expect("cut off");
    let ended = socket
        .ended(Duration::from_secs(20))
        .await
        .expect("socket must close");
    assert_eq!(ended, Ended::Closed(CloseCode::Unauthorized.code()));

    // Readiness reports the outage; once the database is back, the device reconnects.
    let ready = |s: &TestServer| {
        let url = format!("{}/readyz", s.http_base());
        let http = s.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    };
    assert_eq!(ready(&server).await, 503);
    server.set_database_reachable(true).await.expect("restore");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            ready(&server).await == 200
        })
        .await
    );
    ext.connect_online()
        .await
        .expect("reconnects once the store is back");
    server.stop().await;
}
