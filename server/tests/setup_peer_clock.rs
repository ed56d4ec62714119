//! The peer clock at the setup cap, end to end: connections that keep sending, but
//! too slowly, fill every place in setup; a real client that arrives behind them
//! gets in by pushing out one of them as "slow" once its own waits for the peer add
//! up to `evict_after` (half the setup timeout), not by waiting for the setup
//! timeout to close them all. Counted through `latchkey_setup_evictions_total{kind}`
//! on the real `/metrics`. The senders are those of `setup_limits.rs`
//! ([`dribble_headers`]). (One test in this binary: the recorder is process-wide,
//! so counts are exact.)

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use latchkey_testkit::hostile::dribble_headers;
use latchkey_testkit::{Backend, TestServer, wait_until};

const DEADLINE: Duration = Duration::from_secs(30);
const CAP: usize = 4;

const SLOW: &str = "latchkey_setup_evictions_total{kind=\"slow\"}";
const SILENT: &str = "latchkey_setup_evictions_total{kind=\"silent\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_setup_cap_a_slow_sender_is_pushed_out_by_its_own_waits() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            // evict_after is 2 s; the setup timeout would close them only at 4 s.
            l.setup_timeout_ms = 4_000;
            l.max_connections_in_setup = CAP;
        })
        .start()
        .await
        .expect("server");
    let closed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CAP {
        let task = dribble_headers(server.addr(), closed.clone(), DEADLINE).await;
        tasks.push(task.expect("dribbler"));
    }

    // Behind them, in the backlog, a real client.
    let status = server
        .http
        .get(format!("{}/healthz", server.http_base()))
        .header("connection", "close")
        .send()
        .await
        .expect("healthz")
        .status();
    assert_eq!(status.as_u16(), 200);
    let m = server.metrics().await.expect("scrape");
    let count = |key| m.get(key).copied().unwrap_or(0.0);
    assert_eq!(
        count(SLOW),
        1.0,
        "the client got in by pushing out exactly one slow sender, not by their timeout"
    );
    assert_eq!(
        count(SILENT),
        0.0,
        "a sender is never taken for a silent one"
    );
    assert!(
        wait_until(DEADLINE, || async { closed.load(Ordering::Relaxed) >= 1 }).await,
        "the pushed-out sender saw its connection end"
    );

    // The others are closed by the setup timeout.
    for t in tasks {
        t.await.expect("dribbler task");
    }
    assert_eq!(closed.load(Ordering::Relaxed), CAP);
    server.stop().await;
}
