//! Races that must have exactly one winner: many redemptions of one link, many
//! renewals of one token with different successors.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_server::auth::secret;
use latchkey_testkit::extension::new_token;
use latchkey_testkit::{Backend, TestServer, backend_tests, logs};

async fn one_link_many_redemptions(backend: Backend) {
    let server = TestServer::builder(backend)
        .limits(|l| l.authorize_per_minute = 60_000)
        .start()
        .await
        .expect("server");
    let ext = server.new_extension().await.expect("ext");
    let attempts: Vec<_> = (0..100)
        .map(|_| {
            let mut ext = ext.clone();
            tokio::spawn(async move {
                ext.pair_with(&new_token())
                    .await
                    .expect("request")
                    .map(|g| g.device_id)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut refusals = 0;
    for a in attempts {
        match a.await.expect("task") {
            Ok(id) => winners.push(id),
            Err(answer) => {
                assert_eq!(answer.status, 401, "{}", answer.body);
                refusals += 1;
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one redemption wins");
    assert_eq!(refusals, 99);
    let devices = server.admin().devices().await.expect("list");
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].id, winners[0]);
    logs::assert_no_secrets(&[&ext.pairing_secret, &server.admin_token]);
    server.stop().await;
}

backend_tests!(redemptions, one_link_many_redemptions);

async fn one_token_many_successors(backend: Backend) {
    let server = TestServer::builder(backend)
        .limits(|l| {
            l.authorize_per_minute = 60_000;
            // A thousand renewals of one device at once: its own budget must not
            // be what refuses them.
            l.renewals_per_minute_per_device = 60_000;
        })
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("ext");
    ext.pair().await.expect("pair");
    let old = ext.token.clone().expect("token");
    let successors: Vec<String> = (0..1000).map(|_| new_token()).collect();
    let tasks: Vec<_> = successors
        .iter()
        .cloned()
        .map(|next| {
            let ext = ext.clone();
            let old = old.clone();
            tokio::spawn(async move { ext.renew_raw(&old, &next).await.expect("request") })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for t in tasks {
        let answer = t.await.expect("task");
        match answer.status {
            200 => ok += 1,
            401 => {}
            // The store's lock or pool wait ran out: refused, nothing changed, retry later.
            503 => {
                busy += 1;
                assert_eq!(answer.body, r#"{"error":"authorization_store_busy"}"#);
                assert_eq!(
                    answer.headers.get("retry-after").map(|v| v.as_bytes()),
                    Some(&b"1"[..])
                );
            }
            other => panic!("unexpected status {other}: {}", answer.body),
        }
    }
    assert_eq!(
        ok, 1,
        "exactly one successor is accepted ({busy} answered store-busy)"
    );
    // The store holds exactly one valid successor, and it is not the old token.
    let store = &server.state().store;
    let mut valid = 0;
    for next in &successors {
        if store
            .device_by_token_hash(&secret::hash(next))
            .await
            .expect("store")
            .is_some()
        {
            valid += 1;
        }
    }
    assert_eq!(valid, 1, "never two valid successors");
    assert!(
        store
            .device_by_token_hash(&secret::hash(&old))
            .await
            .expect("store")
            .is_none()
    );
    server.stop().await;
}

backend_tests!(renewals, one_token_many_successors);
