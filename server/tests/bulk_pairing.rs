//! Pairing in bulk (docs/operations.md, "The store under load"): many links made and
//! redeemed at once, as an admin enrolling a fleet does, all succeed. A store that
//! is working answers every one of them, however many wait their turn; 503
//! `authorization_store_busy` is kept for a store that is really unavailable.

#![allow(clippy::expect_used, clippy::panic)]

use futures_util::{StreamExt, stream};
use latchkey_testkit::{Backend, TestServer, backend_tests};

/// Pairings in all, and at once.
const PAIRINGS: usize = 600;
const AT_ONCE: usize = 96;

async fn a_fleet_pairs_without_a_refusal(backend: Backend) {
    let server = TestServer::builder(backend)
        .limits(|l| {
            // One test client is one address: lift the per-address budget, which is
            // not what is under test.
            l.authorize_per_minute = 60_000;
            l.max_unused_pairings = 1_000;
        })
        .start()
        .await
        .expect("server");
    let refusals: Vec<String> = stream::iter(0..PAIRINGS)
        .map(|_| async {
            let mut ext = match server.new_extension().await {
                Ok(ext) => ext,
                Err(e) => return Some(format!("link: {e:#}")),
            };
            ext.pair().await.err().map(|e| format!("pair: {e:#}"))
        })
        .buffer_unordered(AT_ONCE)
        .filter_map(std::future::ready)
        .collect()
        .await;
    assert!(
        refusals.is_empty(),
        "{} of {PAIRINGS} refused, first: {:?}",
        refusals.len(),
        refusals.first()
    );
    let devices = server.admin().devices().await.expect("devices");
    assert_eq!(devices.len(), PAIRINGS);
    server.stop().await;
}

backend_tests!(a_fleet_pairs, a_fleet_pairs_without_a_refusal);
