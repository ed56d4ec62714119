//! Every session is accountable (docs/operations.md, "Audit"): its start and its
//! end, with the reason, are in the team's audit trail under the token that opened
//! it, in order, on both backends; a start that failed leaves no row.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use latchkey_protocol::{ErrorBody, ErrorCode};

use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Action, Backend, Script, TestServer, backend_tests, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

/// The team's session rows, oldest first.
async fn session_rows(server: &TestServer) -> Vec<Value> {
    let (status, body) = server
        .admin()
        .raw(Method::GET, "/v1/admin/audit?limit=100", None)
        .await
        .expect("audit");
    assert_eq!(status, 200);
    let mut rows: Vec<Value> = body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| {
            e["action"]
                .as_str()
                .is_some_and(|a| a.starts_with("session."))
        })
        .cloned()
        .collect();
    rows.reverse();
    rows
}

async fn sessions_are_in_the_audit_trail_with_how_they_ended(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let agent = server.new_agent().await.expect("agent");
    // The browser opens two windows, then refuses a third.
    let starts = Arc::new(AtomicUsize::new(0));
    let script: Script = Arc::new(move |r| {
        let third = r.method == "tool.session_start" && starts.fetch_add(1, Ordering::SeqCst) == 2;
        third.then(|| Action::Error(ErrorBody::new(ErrorCode::ProtocolError, "no window today")))
    });
    let (device, browser) = server.new_browser(script).await.expect("browser");

    let stopped = agent.start(None).await.expect("start").id;
    agent.stop(&stopped).await.expect("stop");
    let closed = agent.start(None).await.expect("start").id;
    browser.event(
        "session.window_closed",
        json!({"session_id": closed, "reason": "user_closed_window"}),
    );
    let rows_written = wait_until(DEADLINE, || async {
        session_rows(&server).await.len() >= 4
    })
    .await;
    assert!(
        rows_written,
        "four session rows: {:?}",
        session_rows(&server).await
    );

    // Each session's rows are in its order; two sessions' rows may interleave
    // (each session's watcher writes its own).
    let rows = session_rows(&server).await;
    let of = |session: &str| -> Vec<(String, String)> {
        rows.iter()
            .filter(|r| r["target"] == format!("session:{session}").as_str())
            .map(|r| {
                let field = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                (field("action"), field("detail"))
            })
            .collect()
    };
    let device_ref = format!("device:{device}");
    assert_eq!(
        of(&stopped),
        vec![
            ("session.start".into(), device_ref.clone()),
            ("session.end".into(), "stopped".into()),
        ]
    );
    assert_eq!(
        of(&closed),
        vec![
            ("session.start".into(), device_ref),
            ("session.end".into(), "window_closed".into()),
        ]
    );
    // Each under the agent's token, which the trail names.
    let actors: Vec<&str> = rows
        .iter()
        .map(|r| r["actor"].as_str().unwrap_or_default())
        .collect();
    assert!(
        actors
            .iter()
            .all(|a| a.starts_with("token:agent-") && *a == actors[0]),
        "{actors:?}"
    );

    // Starts that failed leave no row: one the browser refused, one for a browser
    // that does not exist. The next session's two rows come after them in the queue,
    // so once those are in, any row of the failed starts would be too.
    assert!(agent.start(None).await.is_err());
    assert_eq!(browser.count("tool.session_start"), 3);
    assert!(
        agent
            .start(Some("0123456789abcdef0123456789abcdef"))
            .await
            .is_err()
    );
    let last = agent.start(None).await.expect("start").id;
    agent.stop(&last).await.expect("stop");
    let all_in = wait_until(DEADLINE, || async {
        session_rows(&server).await.len() >= 6
    })
    .await;
    assert!(all_in, "{:?}", session_rows(&server).await);
    let mut targets: Vec<String> = session_rows(&server)
        .await
        .iter()
        .map(|r| r["target"].as_str().unwrap_or_default().to_string())
        .collect();
    let mut expected: Vec<String> = [&stopped, &stopped, &closed, &closed, &last, &last]
        .iter()
        .map(|id| format!("session:{id}"))
        .collect();
    targets.sort();
    expected.sort();
    assert_eq!(targets, expected, "the sessions' rows and no others");
    drop(browser);
    server.stop().await;
}

backend_tests!(
    session_audit,
    sessions_are_in_the_audit_trail_with_how_they_ended
);
