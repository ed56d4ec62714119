//! Cluster mode as tests need it (docs/cluster.md): latchkeyd replicas of one
//! fresh PostgreSQL database, told over a `nats-server` the test starts on a
//! port of its own. The grant sweep is pushed out to an hour on every replica,
//! so whatever closes a socket on another replica is a notice, not the sweep.
//!
//! These helpers assert as they go, like the tests that call them.
#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_server::config::Limits;

use crate::{Backend, FakeBrowser, NatsServer, TestServer, wait_until};

pub const DEADLINE: Duration = Duration::from_secs(10);
/// Longer than any test: only a notice can close a socket on another replica.
pub const NO_SWEEP_MS: u64 = 3_600_000;

pub async fn replica(
    backend: &Backend,
    nats_url: &str,
    first: Option<&TestServer>,
    edit: fn(&mut Limits),
) -> TestServer {
    let url = nats_url.to_string();
    let mut builder = TestServer::builder(backend.clone())
        .limits(|l| {
            l.grant_recheck_ms = NO_SWEEP_MS;
            edit(l);
        })
        .config(move |c| c.cluster.nats_url = Some(url));
    if let Some(first) = first {
        builder = builder.replica_of(first);
    }
    builder.start().await.expect("replica")
}

pub async fn readiness(server: &TestServer) -> String {
    match server
        .http
        .get(format!("{}/readyz", server.http_base()))
        .send()
        .await
    {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => format!("unreachable: {e}"),
    }
}

/// Until `server` hears the other replicas (NATS connected, subscribed).
pub async fn listening(server: &TestServer) -> bool {
    wait_until(DEADLINE, || async { readiness(server).await == "ready" }).await
}

/// NATS and two replicas of one store, both listening; `None` (skipped) where
/// this machine has no PostgreSQL or nats-server and is not CI.
pub async fn two_replicas() -> Option<(NatsServer, TestServer, TestServer)> {
    two_replicas_with(|_| {}).await
}

/// [`two_replicas`], with `edit` applied to both replicas' limits.
pub async fn two_replicas_with(
    edit: fn(&mut Limits),
) -> Option<(NatsServer, TestServer, TestServer)> {
    let backend = Backend::postgres().await?;
    let nats = NatsServer::start(NatsServer::required_binary()?)
        .await
        .expect("nats-server");
    let a = replica(&backend, &nats.url(), None, edit).await;
    let b = replica(&backend, &nats.url(), Some(&a), edit).await;
    assert!(listening(&a).await && listening(&b).await);
    Some((nats, a, b))
}

/// An agent on `server` drives `device` (a call answered by the browser).
pub async fn drives(server: &TestServer, device: &str) {
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(Some(device)).await.expect("session").id;
    let answer = agent
        .call(&session, "tool.tabs_list", serde_json::json!({}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{:?}", answer.body);
}

/// A browser paired and online on `server`.
pub async fn browser_on(server: &TestServer) -> (String, FakeBrowser) {
    server
        .new_browser(crate::browser::never_answers("tool.hang"))
        .await
        .expect("browser")
}

/// A replica of `first`'s store as a real `latchkeyd` process (`exe`, the
/// test's `CARGO_BIN_EXE_latchkeyd`), on `nats`: one a test can `kill -9`.
/// The directory holds its files; keep it as long as the process.
pub async fn process_replica(
    exe: &std::path::Path,
    first: &TestServer,
    nats: &NatsServer,
) -> (crate::Daemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = crate::Daemon::serve_command(exe, dir.path(), "").expect("command");
    command
        .env(
            "LATCHKEY_DATABASE_URL",
            first.config().database_url.clone().expect("postgres"),
        )
        .env("LATCHKEY_CLUSTER", nats.url())
        .env("LATCHKEY_LOG", "warn");
    let daemon = crate::Daemon::spawn(command, std::process::Stdio::null())
        .await
        .expect("a replica process");
    (daemon, dir)
}
