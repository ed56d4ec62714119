//! Cluster mode on the real thing (docs/cluster.md): two latchkeyd replicas on
//! one fresh PostgreSQL database, told over a `nats-server` this test starts on
//! a port of its own. The grant sweep is pushed out to an hour on every
//! replica, so whatever closes a socket on the other replica here is the
//! notice, not the sweep.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::api::Role;
use latchkey_testkit::agent_socket::{call_in_flight, code_of};
use latchkey_testkit::cluster::{
    DEADLINE, NO_SWEEP_MS, browser_on, drives, listening, readiness, replica, two_replicas,
    two_replicas_with,
};
use latchkey_testkit::extension::{Ended, new_token};
use latchkey_testkit::{AgentSocket, Backend, FakeBrowser, NatsServer, TestServer, wait_until};

/// A token whose agent socket on `holder` has a call in flight, revoked through
/// `via`: the call is answered `token_revoked` and the socket closes with 4006.
/// Returns the browser the call was on, still online.
async fn token_revoked_across(holder: &TestServer, via: &TestServer) -> FakeBrowser {
    let token = holder
        .admin()
        .create_token("worker", Role::Agent)
        .await
        .expect("token");
    let (browser, mut socket, _session) = call_in_flight(holder, &token.token)
        .await
        .expect("call in flight");
    let (status, _) = via
        .admin()
        .revoke_token(&token.view.id)
        .await
        .expect("revoke");
    assert_eq!(status, 200);
    let (ended, answers) = socket.ended(DEADLINE).await.expect("socket closed");
    assert_eq!(ended, Ended::Closed(4006));
    let in_flight: Vec<String> = answers
        .iter()
        .filter(|f| f.id() == Some("h"))
        .map(code_of)
        .collect();
    assert_eq!(in_flight, ["token_revoked"]);
    browser
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_device_on_one_replica_closes_its_socket_on_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (device, mut browser) = browser_on(&a).await;
    let (other, stays) = browser_on(&a).await;

    let revoked = b.admin().revoke(&device).await.expect("revoke on b");
    assert_eq!(revoked.id, device);
    assert_eq!(
        browser.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );
    // Only that device: the other one on replica A still answers calls.
    drives(&a, &other).await;
    assert_eq!(stays.count("tool.tabs_list"), 1);
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_all_on_one_replica_closes_every_socket_of_the_team_on_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let (_, mut first) = browser_on(&a).await;
    let (_, mut second) = browser_on(&a).await;

    let result = b.admin().revoke_all().await.expect("revoke-all on b");
    assert_eq!(result.revoked_devices, 2);
    for browser in [&mut first, &mut second] {
        assert_eq!(
            browser.ended(DEADLINE).await.expect("closed"),
            Ended::Closed(4001)
        );
    }
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_on_one_replica_ends_what_it_holds_on_another() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    token_revoked_across(&a, &b).await;
    for s in [b, a] {
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_reconnects_to_another_replica_closes_its_old_socket() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let mut ext = a.new_extension().await.expect("extension");
    let grant = ext.pair().await.expect("pair");
    let mut on_a = FakeBrowser::serve_default(ext.connect_online().await.expect("online on a"));

    ext.via(&format!("{}/extension", b.public_base()), b.client_tls());
    let on_b = FakeBrowser::serve_default(ext.connect_online().await.expect("online on b"));
    assert_eq!(
        on_a.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4003)
    );
    // The socket on B is the device's one: an agent on B drives it.
    drives(&b, &grant.device_id).await;
    assert_eq!(on_b.count("tool.tabs_list"), 1);
    for s in [b, a] {
        s.stop().await;
    }
}

/// NATS away: a replica still starts and serves its own devices, says so in
/// `/readyz`, and hears the others again once NATS is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_a_replica_serves_its_own_devices_and_catches_up_when_it_returns() {
    let Some((mut nats, a, b)) = two_replicas().await else {
        return;
    };
    nats.stop().await;
    assert!(
        wait_until(DEADLINE, || async {
            readiness(&a).await == "ready; cluster: disconnected"
        })
        .await
    );
    // A third replica starts with NATS down.
    let backend = Backend::postgres().await.expect("postgres");
    let c = replica(&backend, &nats.url(), Some(&a), |_| {}).await;
    assert_eq!(readiness(&c).await, "ready; cluster: disconnected");
    let (device, mut browser) = browser_on(&c).await;
    drives(&c, &device).await;

    nats.restart().await.expect("nats back");
    for s in [&a, &b, &c] {
        assert!(listening(s).await, "{}", readiness(s).await);
    }
    b.admin().revoke(&device).await.expect("revoke on b");
    assert_eq!(
        browser.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );
    for s in [c, b, a] {
        s.stop().await;
    }
}

/// Without NATS (two replicas of one store, not in cluster mode): a token
/// revoked through one replica ends what it holds on the other at that
/// replica's next token sweep, as a device's socket closes at its grant sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_another_replica_without_nats_ends_at_the_next_sweep() {
    let Some(backend) = Backend::postgres().await else {
        return;
    };
    let a = TestServer::builder(backend.clone())
        .limits(|l| l.grant_recheck_ms = 200)
        .start()
        .await
        .expect("a");
    let b = TestServer::builder(backend)
        .replica_of(&a)
        .start()
        .await
        .expect("b");
    // Another token of the team, with a socket of its own on A, is not ended.
    let other = a
        .admin()
        .create_token("other", Role::Agent)
        .await
        .expect("other token");
    let mut other_socket = AgentSocket::open(&a, &other.token)
        .await
        .expect("other socket");

    let _browser = token_revoked_across(&a, &b).await;
    other_socket
        .start_session("still-here")
        .await
        .expect("the other token's socket still works");
    for s in [b, a] {
        s.stop().await;
    }
}

/// One client's pairing attempts spread over two replicas: the per-address
/// limit holds for the cluster, not for each replica (6 a minute here; each
/// replica alone would admit 6 of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_attempts_are_limited_per_address_across_replicas() {
    let Some((_nats, a, b)) = two_replicas_with(|l| l.authorize_per_minute = 6).await else {
        return;
    };
    let on_a = a.new_extension().await.expect("extension on a");
    let mut on_b = on_a.clone();
    on_b.authorize_url = format!("{}/extension/authorize", b.http_base());
    let guess = serde_json::json!({ "action": "pair", "next_token": new_token() });
    let mut statuses = Vec::new();
    for n in 0..10 {
        let ext = if n % 2 == 0 { &on_a } else { &on_b };
        let answer = ext
            .authorize_raw(Some(&new_token()), &guess)
            .await
            .expect("answer");
        statuses.push(answer.status);
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 401, 429, 429, 429, 429]);
    // Another address is not charged for them.
    let other = latchkey_testkit::http_builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .expect("client");
    let elsewhere = other
        .post(format!("{}/extension/authorize", b.http_base()))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {}", new_token()))
        .body(guess.to_string())
        .send()
        .await
        .expect("answer");
    assert_eq!(elsewhere.status().as_u16(), 401);
    for s in [b, a] {
        s.stop().await;
    }
}

/// A replica that drains (SIGTERM) closes its device and agent sockets with
/// 1012, service restart: the device reconnects, here straight to the other
/// replica, and is driven there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_replica_closes_with_service_restart_and_the_device_moves() {
    let Some((_nats, a, b)) = two_replicas().await else {
        return;
    };
    let mut ext = b.new_extension().await.expect("extension on b");
    let grant = ext.pair().await.expect("pair");
    let mut on_b = FakeBrowser::serve_default(ext.connect_online().await.expect("online on b"));
    let token = b
        .admin()
        .create_token("w", Role::Agent)
        .await
        .expect("token");
    let mut agent_socket = AgentSocket::open(&b, &token.token)
        .await
        .expect("agent socket");

    b.stop().await;
    assert_eq!(
        on_b.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(1012)
    );
    let (ended, _) = agent_socket
        .ended(DEADLINE)
        .await
        .expect("agent socket closed");
    assert_eq!(ended, Ended::Closed(1012));

    ext.via(&format!("{}/extension", a.public_base()), a.client_tls());
    let _on_a = FakeBrowser::serve_default(ext.connect_online().await.expect("online on a"));
    drives(&a, &grant.device_id).await;
    a.stop().await;
}

/// A device that moves between replicas while NATS is away keeps two sockets
/// open meanwhile; once NATS is back, the replicas tell each other which
/// devices they hold, and the older socket closes with 4003.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_made_while_nats_was_away_is_settled_when_it_returns() {
    let Some((mut nats, a, b)) = two_replicas().await else {
        return;
    };
    nats.stop().await;
    for s in [&a, &b] {
        assert!(
            wait_until(DEADLINE, || async {
                readiness(s).await == "ready; cluster: disconnected"
            })
            .await
        );
    }
    let mut ext = b.new_extension().await.expect("extension");
    let grant = ext.pair().await.expect("pair");
    let mut old_on_b = FakeBrowser::serve_default(ext.connect_online().await.expect("on b"));
    ext.via(&format!("{}/extension", a.public_base()), a.client_tls());
    let _new_on_a = FakeBrowser::serve_default(ext.connect_online().await.expect("on a"));

    nats.restart().await.expect("nats back");
    assert_eq!(
        old_on_b.ended(DEADLINE).await.expect("old socket closed"),
        Ended::Closed(4003)
    );
    drives(&a, &grant.device_id).await;
    for s in [b, a] {
        s.stop().await;
    }
}

/// Replicas started together on an empty PostgreSQL database: exactly one
/// bootstraps the first team, and every one of them starts (a lost race to
/// create it is not an error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_together_on_an_empty_store_all_start_and_bootstrap_once() {
    let Some(Backend::Postgres { admin_url }) = Backend::postgres().await else {
        return;
    };
    for _ in 0..5 {
        let db = latchkey_testkit::ScratchDatabase::create(&admin_url)
            .await
            .expect("database");
        let dirs = [
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        ];
        let configs: Vec<latchkey_server::config::Config> = dirs
            .iter()
            .map(|d| latchkey_server::config::Config {
                listen: "127.0.0.1:0".parse().expect("addr"),
                data_dir: d.path().to_path_buf(),
                database_url: Some(db.url.clone()),
                metrics_listen: None,
                ..Default::default()
            })
            .collect();
        let (first, second) = tokio::join!(
            latchkey_server::bind(configs[0].clone()),
            latchkey_server::bind(configs[1].clone())
        );
        let (first, second) = (first.expect("first starts"), second.expect("second starts"));
        let bootstrapped = [&first, &second]
            .iter()
            .filter(|h| h.bootstrap.is_some())
            .count();
        assert_eq!(bootstrapped, 1);
        first.shutdown().await;
        second.shutdown().await;
        db.drop_database().await;
    }
}

/// NATS over TLS (a private CA given as `ca_file`) with a user and password in
/// the URL: notices cross, and the password is in no log line at any level
/// (the capture holds the NATS client's debug logs too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_a_password_notices_cross_and_the_password_is_never_logged() {
    let Some(backend) = Backend::postgres().await else {
        return;
    };
    let Some(binary) = NatsServer::required_binary() else {
        return;
    };
    let certs = latchkey_testkit::tls::TestCerts::generate().expect("certs");
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key) = certs.write(dir.path()).expect("write certs");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &certs.ca_pem).expect("write ca");
    let password = format!("nats-pw-{}", new_token());
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let nats = NatsServer::start_with(
        binary,
        vec![
            "--tls".into(),
            "--tlscert".into(),
            path(&cert),
            "--tlskey".into(),
            path(&key),
            "--user".into(),
            "latchkey".into(),
            "--pass".into(),
            password.clone(),
        ],
    )
    .await
    .expect("nats-server over TLS");
    let url = format!("tls://latchkey:{password}@localhost:{}", nats.port());
    let start = |first: Option<&TestServer>| {
        let (url, ca) = (url.clone(), ca.clone());
        let mut builder = TestServer::builder(backend.clone())
            .limits(|l| l.grant_recheck_ms = NO_SWEEP_MS)
            .config(move |c| {
                c.cluster.nats_url = Some(url);
                c.cluster.ca_file = Some(ca);
            });
        if let Some(first) = first {
            builder = builder.replica_of(first);
        }
        builder.start()
    };
    let a = start(None).await.expect("a");
    let b = start(Some(&a)).await.expect("b");
    assert!(listening(&a).await && listening(&b).await);

    let (device, mut browser) = browser_on(&a).await;
    b.admin().revoke(&device).await.expect("revoke on b");
    assert_eq!(
        browser.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );
    latchkey_testkit::logs::assert_no_secrets(&[&password]);
    for s in [b, a] {
        s.stop().await;
    }
}
