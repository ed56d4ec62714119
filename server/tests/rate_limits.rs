//! Rate limits: pairing brute force from one peer and from 1,000 addresses, renewals that
//! pairing guesses cannot starve, WebSocket upgrades per peer, and agent requests per token
//! and per tenant. Each row checks the codes and `Retry-After`, that nothing was granted, and
//! that the gateway still serves everyone else.

#![allow(clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, Ipv4Addr};

use latchkey_testkit::extension::new_token;
use latchkey_testkit::reqwest;
use latchkey_testkit::{Backend, FakeExtension, TestServer, backend_tests};
use serde_json::json;

fn guess() -> serde_json::Value {
    json!({ "action": "pair", "next_token": new_token() })
}

fn client_from(ip: IpAddr) -> reqwest::Client {
    latchkey_testkit::http_builder()
        .local_address(ip)
        .build()
        .expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_brute_force_gets_nothing_and_others_are_served() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let target = server.new_extension().await.expect("extension");
    let started = std::time::Instant::now();
    let (mut unauthorized, mut limited, mut granted) = (0, 0, 0);
    let mut tally = |status: u16, retry_after: Option<&str>| match status {
        401 => unauthorized += 1,
        429 => {
            assert_eq!(retry_after, Some("60"));
            limited += 1;
        }
        200 => granted += 1,
        other => panic!("unexpected status {other}"),
    };
    // 10,000 wrong secrets from one peer.
    for _ in 0..10_000 {
        let secret = new_token();
        let a = target
            .authorize_raw(Some(&secret), &guess())
            .await
            .expect("answer");
        tally(
            a.status,
            a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        );
    }
    // Then 10 each from 1,000 other addresses in 127.0.0.0/8.
    for i in 0..1_000u32 {
        let ip = IpAddr::V4(Ipv4Addr::new(127, 3, (i / 250) as u8, (i % 250) as u8 + 1));
        let ext = FakeExtension::from_link(
            &format!("{}#{}", target.ws_url, new_token()),
            client_from(ip),
            None,
        )
        .expect("extension");
        for _ in 0..10 {
            let a = ext
                .authorize_raw(Some(&new_token()), &guess())
                .await
                .expect("answer");
            tally(
                a.status,
                a.headers.get("retry-after").and_then(|v| v.to_str().ok()),
            );
        }
    }
    assert_eq!(granted, 0, "a guess succeeded");
    // One peer gets its burst of 60; all peers together 16× that, refilling at 16
    // a second for as long as this ran.
    let refilled = 16 * (started.elapsed().as_secs() as usize + 1);
    let bound = 60 * 16 + refilled;
    assert!(
        unauthorized <= bound,
        "{unauthorized} guesses were judged (bound {bound})"
    );
    assert!(limited >= 20_000 - bound, "{limited} refused");
    assert!(server.admin().devices().await.expect("devices").is_empty());

    // Still served: the admin and agent APIs (pairing itself is capped globally until
    // the budget refills, by design: docs/protocol.md, "Pairing and renewal").
    let agent = server.new_agent().await.expect("agent");
    assert!(agent.browsers().await.is_ok());
    server.stop().await;
}

/// An outside review spent the node's pairing budget with 960 wrong secrets from
/// 16 addresses; a real renewal from a new address then got 429. Renewals are now
/// charged to their device: pairing guesses, however many, leave them alone. A
/// renewal with a token no device holds is a guess, charged to its peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_guesses_cannot_starve_a_renewal() {
    // 3 a minute per peer and 48 for the node: a budget this test can spend, and
    // one that refills only every 1.25 s.
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.authorize_per_minute = 3)
        .start()
        .await
        .expect("server");
    let mut device = server.new_extension().await.expect("extension");
    device.pair().await.expect("pair");
    let target = server.new_extension().await.expect("extension");
    let from = |ip: &str| {
        FakeExtension::from_link(
            &format!("{}#{}", target.ws_url, new_token()),
            client_from(ip.parse().expect("ip")),
            None,
        )
        .expect("extension")
    };
    // A renewal with a token no device holds is a guess, on its peer's budget.
    let guesser = from("127.5.0.3");
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let a = guesser
            .renew_raw(&new_token(), &new_token())
            .await
            .expect("answer");
        statuses.push(a.status);
    }
    assert_eq!(statuses, [401, 401, 401, 429]);
    // Pairing guesses from address after address, until a fresh address is
    // refused at once: the node's budget is spent.
    let mut spent = false;
    for peer in 0..40u8 {
        let guesser = from(&format!("127.4.0.{}", peer + 1));
        let first = guesser
            .authorize_raw(Some(&new_token()), &guess())
            .await
            .expect("answer");
        if first.status == 429 {
            spent = true;
            break;
        }
        for _ in 0..3 {
            let a = guesser
                .authorize_raw(Some(&new_token()), &guess())
                .await
                .expect("answer");
            assert_ne!(a.status, 200);
        }
    }
    assert!(spent, "the node's pairing budget was never spent");
    // Right then, a renewal from yet another address goes through, on its
    // device's own budget.
    device.http = client_from("127.5.0.2".parse().expect("ip"));
    device.renew().await.expect("renewal despite the guesses");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_are_limited_per_peer() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.upgrades_per_minute = 3)
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    // Upgrades that fail their checks count too: the limit comes first.
    for _ in 0..3 {
        let a = ext
            .connect_with(&[("origin", ext.origin.as_str())], None)
            .await
            .expect("answer");
        assert_eq!(a.expect_err("no credential").status, 401);
    }
    let refused = ext
        .connect()
        .await
        .expect("answer")
        .expect_err("fourth upgrade in a minute");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.json(), json!({"error": "rate_limited"}));
    assert_eq!(
        refused
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("20")
    );
    // The same device from another address is not affected.
    let mut elsewhere = ext.clone();
    elsewhere.local_addr = Some("127.0.0.2".parse().expect("ip"));
    elsewhere.connect_online().await.expect("other peer");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_requests_are_limited_per_token_and_per_tenant() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| {
            l.agent_calls_per_second_per_token = 5;
            l.agent_calls_per_second_per_tenant = 8;
        })
        .start()
        .await
        .expect("server");
    let a = server.new_agent().await.expect("agent a");
    let b = server.new_agent().await.expect("agent b");
    for _ in 0..5 {
        assert!(a.browsers().await.is_ok());
    }
    let refused = a
        .request(reqwest::Method::GET, "/v1/browsers", None)
        .await
        .expect("answer");
    assert_eq!(refused.status, 429, "{:?}", refused.body);
    assert_eq!(refused.code(), "rate_limited");
    assert_eq!(refused.body["error"]["data"]["scope"], "token");
    // Token b has its own budget, until the tenant's runs out (8 a second).
    for _ in 0..3 {
        assert!(b.browsers().await.is_ok());
    }
    let refused = b
        .request(reqwest::Method::GET, "/v1/browsers", None)
        .await
        .expect("answer");
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body["error"]["data"]["scope"], "tenant");
    // The admin API is not charged (admins on the agent API are: agent_limits.rs).
    assert!(server.admin().devices().await.is_ok());
    server.stop().await;
}

/// Per-peer limits key on the client address: `X-Forwarded-For` is believed only
/// from a trusted proxy (right-most untrusted hop), ignored from anyone else, and a
/// malformed header counts as the proxy itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_is_believed_only_from_trusted_proxies() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.upgrades_per_minute = 2)
        .config(|c| c.trusted_proxies = vec!["127.0.0.1/32".parse().expect("cidr")])
        .start()
        .await
        .expect("server");
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    let origin = ("origin", latchkey_testkit::extension::TEST_EXTENSION_ORIGIN);
    // An upgrade with no credential: refused 401 after the limit is charged.
    let status = |ext: FakeExtension, xff: &'static str| async move {
        let mut headers = vec![origin];
        if !xff.is_empty() {
            headers.push(("x-forwarded-for", xff));
        }
        ext.connect_with(&headers, None)
            .await
            .expect("answer")
            .expect_err("no credential")
            .status
    };
    let mut untrusted = ext.clone();
    untrusted.local_addr = Some("127.0.0.2".parse().expect("ip"));

    // Through the trusted proxy, each forwarded client has its own budget.
    for xff in ["203.0.113.1", "198.51.100.7, 203.0.113.1"] {
        assert_eq!(status(ext.clone(), xff).await, 401);
    }
    assert_eq!(
        status(ext.clone(), "203.0.113.1").await,
        429,
        "client .1 spent"
    );
    assert_eq!(
        status(ext.clone(), "203.0.113.2").await,
        401,
        "client .2 has its own"
    );
    // Trusted hops are skipped: the right-most untrusted address is the client.
    assert_eq!(status(ext.clone(), "203.0.113.1, 127.0.0.1").await, 429);
    // From an untrusted peer the header is ignored: rotating it does not help.
    for xff in ["192.0.2.1", "192.0.2.2"] {
        assert_eq!(status(untrusted.clone(), xff).await, 401);
    }
    assert_eq!(
        status(untrusted.clone(), "192.0.2.3").await,
        429,
        "keyed by the peer"
    );
    // A malformed header from the proxy counts as the proxy itself.
    for _ in 0..2 {
        assert_eq!(status(ext.clone(), "not-an-address").await, 401);
    }
    assert_eq!(status(ext.clone(), "").await, 429, "the proxy's own budget");
    server.stop().await;
}

/// The shared count cluster mode keeps per address and minute, on each backend:
/// one upsert per charge, windows counted apart, old ones pruned.
async fn shared_pairing_counts(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let store = &server.state().store;
    for expected in 1..=3 {
        assert_eq!(
            store.charge_peer("127.0.0.1", 100).await.expect("charge"),
            expected
        );
    }
    assert_eq!(
        store.charge_peer("127.0.0.1", 101).await.expect("charge"),
        1
    );
    assert_eq!(store.charge_peer("::1", 100).await.expect("charge"), 1);
    assert_eq!(store.prune_peer_charges(101).await.expect("prune"), 2);
    assert_eq!(
        store.charge_peer("127.0.0.1", 101).await.expect("charge"),
        2
    );
    assert_eq!(
        store.charge_peer("127.0.0.1", 100).await.expect("charge"),
        1
    );
    server.stop().await;
}
backend_tests!(shared_pairing_count, shared_pairing_counts);
