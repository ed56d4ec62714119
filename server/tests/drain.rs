//! SIGTERM with 1,000 live devices and 100 calls in flight: calls that can finish
//! within the grace finish, the rest are answered `server_shutting_down`, every device
//! socket gets 1001, and the process exits cleanly within the drain timeout. The real
//! `latchkeyd` binary, signalled as an orchestrator would.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{
    Action, AdminClient, Backend, Daemon, FakeAgent, FakeBrowser, FakeExtension, TestServer,
    retry_unavailable, wait_until,
};
use serde_json::json;
use tokio::process::Command;

const DEVICES: usize = 1_000;
const CALLS: usize = 100;
const DRAIN_MS: u64 = 4_000;
const DEADLINE: Duration = Duration::from_secs(60);

fn script() -> latchkey_testkit::Script {
    Arc::new(|r| match r.method.as_str() {
        // Finishes well within the grace for calls (half the drain timeout).
        "tool.reload" => Some(Action::Delay(
            Duration::from_millis(500),
            Box::new(Action::Reply(json!({"reloaded": true}))),
        )),
        // Never finishes: answered when the sockets close.
        "tool.wait_for_navigation" => Some(Action::Never),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_calls_and_closes_every_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = Daemon::serve_command(
        Path::new(env!("CARGO_BIN_EXE_latchkeyd")),
        dir.path(),
        &format!(
            "authorize_per_minute = 60000\nupgrades_per_minute = 60000\n\
             drain_timeout_ms = {DRAIN_MS}\n\
             max_sessions_per_token = 1000\nmax_sessions_per_device = 1000"
        ),
    )
    .expect("command");
    command.env("LATCHKEY_LOG", "warn");
    let Daemon {
        mut child,
        addr,
        bootstrap_token,
        ..
    } = Daemon::spawn(command, std::process::Stdio::null())
        .await
        .expect("latchkeyd");
    let base = format!("http://{addr}");
    let http = latchkey_testkit::http_client();
    let admin = AdminClient::new(
        http.clone(),
        base.clone(),
        bootstrap_token.expect("admin token"),
    );

    // 1,000 devices online, paired eight at a time.
    let mut browsers: Vec<(String, FakeBrowser)> = Vec::with_capacity(DEVICES);
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..DEVICES {
        let (admin, http) = (admin.clone(), http.clone());
        pending.spawn(async move {
            // Eight writers at once may find SQLite busy: 503, retried as a client would.
            let pairing = retry_unavailable(|| admin.create_pairing(None, None))
                .await
                .expect("pairing");
            let ext = FakeExtension::from_link(&pairing.link, http, None).expect("link");
            let grant = retry_unavailable(|| {
                let mut attempt = ext.clone();
                async move {
                    let grant = attempt.pair().await?;
                    Ok((grant, attempt))
                }
            })
            .await
            .expect("pair");
            let (grant, ext) = grant;
            let socket = retry_unavailable(|| ext.connect_online())
                .await
                .expect("online");
            (grant.device_id, FakeBrowser::serve(socket, script()))
        });
        if pending.len() >= 8 || i + 1 == DEVICES {
            while let Some(done) = pending.join_next().await {
                browsers.push(done.expect("pairing task"));
            }
        }
    }

    // 100 calls in flight, one per session: half finish soon, half never.
    let created = admin
        .create_token("drain-agent", latchkey_protocol::api::Role::Agent)
        .await
        .expect("agent token");
    let agent = FakeAgent::new(http.clone(), base.clone(), created.token);
    let mut calls = Vec::with_capacity(CALLS);
    for (i, (device, _)) in browsers.iter().take(CALLS).enumerate() {
        let session = agent.start(Some(device)).await.expect("session");
        let method = if i % 2 == 0 {
            "tool.reload"
        } else {
            "tool.wait_for_navigation"
        };
        calls.push((method, agent.spawn_call(&session.id, method, json!({}))));
    }
    assert!(
        wait_until(DEADLINE, || async {
            browsers.iter().take(CALLS).enumerate().all(|(i, (_, b))| {
                let method = if i % 2 == 0 {
                    "tool.reload"
                } else {
                    "tool.wait_for_navigation"
                };
                b.first(method).is_some()
            })
        })
        .await,
        "every call reached its browser"
    );

    let pid = child.id().expect("pid").to_string();
    let signalled = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill");
    assert!(signalled.success());
    let status = tokio::time::timeout(
        Duration::from_millis(DRAIN_MS) + Duration::from_secs(3),
        child.wait(),
    )
    .await
    .expect("latchkeyd exits within the drain timeout")
    .expect("wait");
    assert!(status.success(), "exit status {status:?}");

    let (mut finished, mut shut_down) = (0, 0);
    for (method, call) in calls {
        let outcome = call.await.expect("call task");
        match method {
            "tool.reload" => {
                assert!(outcome.is_ok(), "{method}: {:?}", outcome.body);
                finished += 1;
            }
            _ => {
                assert_eq!(outcome.status, 503, "{method}: {:?}", outcome.body);
                assert_eq!(outcome.code(), "server_shutting_down");
                shut_down += 1;
            }
        }
    }
    assert_eq!((finished, shut_down), (CALLS / 2, CALLS / 2));
    for (device, mut browser) in browsers {
        assert_eq!(
            browser.ended(DEADLINE).await.expect("socket ended"),
            Ended::Closed(CloseCode::GoingAway.code()),
            "device {device}"
        );
    }
}

/// A drain ends the agents' event streams promptly, rather than holding the
/// drain up until its timeout, and says why: either the session's own end
/// (`session_ended`, reason `server_shutting_down`, when its browser's socket
/// closed first) or the stream's (`error`, code `server_shutting_down`, when the
/// drain reached the stream first). Both are reported with the same code, the
/// one that says "reconnect" (docs/security.md, "Shutdown").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_event_streams_with_server_shutting_down() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    let (_device, _browser) = server
        .new_browser(latchkey_testkit::browser::never_answers("tool.hang"))
        .await
        .expect("browser");
    let session = agent.start(None).await.expect("session").id;
    let mut events = agent.events(&session).await.expect("events");
    let stopping = tokio::spawn(server.stop());
    let (name, why) = loop {
        let (name, data) = events
            .next()
            .await
            .expect("an event in time")
            .expect("the stream ended with an event that says why");
        match name.as_str() {
            "error" => break (name, data["code"].clone()),
            "session_ended" => break (name, data["reason"].clone()),
            _ => {}
        }
    };
    assert_eq!(why, "server_shutting_down", "{name}");
    // Nothing follows the ending event.
    assert!(
        events
            .next()
            .await
            .expect("the stream's end in time")
            .is_none()
    );
    stopping.await.expect("stopped");
}
