//! A panic inside one connection's task is contained and counted: that device's socket
//! is closed with 1011 and its registration cleaned up, while the other devices, and a
//! call in flight on one of them, do not notice. The real binary with the
//! `device.event_panic` failpoint (test builds only). Likewise a panic in the node's
//! grant reader fails one upgrade, not the ones after it.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_protocol::api::Role;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{
    Action, AdminClient, Daemon, FakeAgent, FakeBrowser, FakeExtension, wait_until,
};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(20);

/// `latchkey_task_panics_total{task}` on the daemon's `/metrics`.
async fn panics_counted(
    daemon: &Daemon,
    http: &latchkey_testkit::reqwest::Client,
    task: &str,
) -> Option<f64> {
    let metrics = latchkey_testkit::metrics::scrape(
        http,
        daemon.metrics_addr.clone().expect("metrics address"),
    )
    .await
    .expect("scrape");
    let counted = metrics
        .get(&format!("latchkey_task_panics_total{{task=\"{task}\"}}"))
        .copied();
    if counted.is_none() {
        eprintln!("no panic counted for {task}: {metrics:?}");
    }
    counted
}

/// The real binary with one failpoint armed, its HTTP client and admin.
async fn daemon_with_failpoint(
    failpoint: &str,
) -> (
    tempfile::TempDir,
    Daemon,
    latchkey_testkit::reqwest::Client,
    AdminClient,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = Daemon::serve_command(
        Path::new(env!("CARGO_BIN_EXE_latchkeyd")),
        dir.path(),
        "authorize_per_minute = 60000",
    )
    .expect("command");
    command
        .env("LATCHKEY_FAILPOINTS", failpoint)
        .env("LATCHKEY_LOG", "warn");
    let daemon = Daemon::spawn(command, Stdio::null())
        .await
        .expect("latchkeyd");
    let http = latchkey_testkit::http_client();
    let admin = daemon.admin(&http).expect("admin");
    (dir, daemon, http, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_one_connection_leaves_the_others_alone() {
    let (_dir, daemon, http, admin) = daemon_with_failpoint("device.event_panic").await;
    let script = Arc::new(|r: &latchkey_protocol::RequestFrame| {
        (r.method == "tool.reload").then(|| {
            Action::Delay(
                Duration::from_millis(500),
                Box::new(Action::Reply(json!({"reloaded": true}))),
            )
        })
    });
    let mut devices = Vec::new();
    for _ in 0..3 {
        let pairing = admin.create_pairing(None, None).await.expect("pairing");
        let mut ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("link");
        let grant = ext.pair().await.expect("pair");
        let socket = ext.connect_online().await.expect("online");
        devices.push((
            grant.device_id,
            ext,
            FakeBrowser::serve(socket, script.clone()),
        ));
    }
    let token = admin
        .create_token("panic-agent", Role::Agent)
        .await
        .expect("agent token");
    let agent = FakeAgent::new(http.clone(), daemon.http_base(), token.token);
    let session = agent
        .start(Some(&devices[1].0))
        .await
        .expect("session on B");
    let call = agent.spawn_call(&session.id, "tool.reload", json!({}));
    assert!(
        wait_until(DEADLINE, || async {
            devices[1].2.first("tool.reload").is_some()
        })
        .await
    );

    // Device A's connection task panics.
    devices[0].2.event("test.panic", json!({}));
    let (a_id, a_ext, mut a_browser) = devices.remove(0);
    assert_eq!(
        a_browser.ended(DEADLINE).await.expect("A ends"),
        Ended::Closed(CloseCode::InternalError.code())
    );

    // B's call finishes as if nothing happened; B and C stay online.
    let outcome = call.await.expect("call");
    assert!(outcome.is_ok(), "{:?}", outcome.body);
    let online: Vec<(String, bool)> = admin
        .devices()
        .await
        .expect("devices")
        .into_iter()
        .map(|d| (d.id, d.online))
        .collect();
    for (id, _, _) in &devices {
        assert!(
            online.contains(&(id.clone(), true)),
            "{id} still online: {online:?}"
        );
    }
    assert!(
        online.contains(&(a_id.clone(), false)),
        "A cleaned up: {online:?}"
    );

    // Counted.
    assert_eq!(
        panics_counted(&daemon, &http, "device_connection").await,
        Some(1.0)
    );

    // A comes back normally.
    let _again = a_ext.connect_online().await.expect("A reconnects");
    assert!(
        wait_until(DEADLINE, || async {
            admin.device(&a_id).await.is_ok_and(|d| d.online)
        })
        .await
    );
}

/// A panic inside the node's grant reader (`store::token_reads`, the
/// `token_reads.panic_once` failpoint: the first read panics, later ones do not)
/// fails only the upgrade it was reading for, with 503 + `Retry-After`; the reader
/// carries on and the same device's next upgrade gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_grant_read_fails_one_upgrade_and_the_next_gets_in() {
    let (_dir, daemon, http, admin) = daemon_with_failpoint("token_reads.panic_once").await;
    let pairing = admin.create_pairing(None, None).await.expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, http.clone(), None).expect("link");
    let grant = ext.pair().await.expect("pair");

    let refused = match ext.connect().await.expect("first upgrade") {
        Ok(_) => panic!("the read that panicked let the device in"),
        Err(answer) => answer,
    };
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.headers.contains_key("retry-after"));

    let _online = ext
        .connect_online()
        .await
        .expect("the next upgrade gets in");
    assert!(
        wait_until(DEADLINE, || async {
            admin.device(&grant.device_id).await.is_ok_and(|d| d.online)
        })
        .await
    );
    assert_eq!(
        panics_counted(&daemon, &http, "token_reads").await,
        Some(1.0)
    );
}
