//! The group commit runs below the priority of the threads that relay calls, on
//! the real server with SQLite (docs/operations.md, "Audit"): its writer thread
//! and its SQLite connection's thread at nice 10, every other thread of the
//! process (the runtime's, the shared pool's SQLite threads that serve the reads
//! a peer waits on) untouched, and the rows it commits there to read.
//!
//! Alone in its file: it reads every thread of the test process, which must hold
//! one server only.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_server::store::commit_thread::{COMMIT_NICE, SQLITE_THREAD_PREFIX, WRITER_THREAD};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Action, Backend, TestServer, wait_until};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

/// Every thread of this process: its name and its nice value.
fn threads() -> Vec<(String, i32)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
    {
        // A thread may end between the listing and the reads.
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // The fields after the name, which is in parentheses and may hold spaces:
        // state is field 3 and nice field 19 of proc_pid_stat(5).
        let after = &stat[stat.rfind(')').expect("stat") + 2..];
        let nice: i32 = after
            .split(' ')
            .nth(16)
            .and_then(|n| n.parse().ok())
            .expect("nice");
        found.push((name.trim_end().to_string(), nice));
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_commit_runs_below_the_relay_and_commits() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let echo: latchkey_testkit::Script =
        Arc::new(|r| (r.method == "tool.echo").then(|| Action::Reply(json!({"ok": true}))));
    let (_device, _browser) = server.new_browser(echo).await.expect("browser");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("start").id;
    for _ in 0..5 {
        let r = agent
            .call(&session, "tool.echo", json!({}))
            .await
            .expect("answer");
        assert!(r.is_ok(), "{:?}", r.body);
    }
    // The calls' rows, queued on the agent's path, committed by the writer.
    let admin = server.admin();
    let target = format!("session:{session}");
    let committed = wait_until(DEADLINE, || async {
        let (_, body) = admin
            .raw(Method::GET, "/v1/admin/audit?action=session.call", None)
            .await
            .expect("audit");
        let rows = body["events"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter(|e| e["target"] == target.as_str())
            .count()
            == 5
    })
    .await;
    assert!(committed, "the five calls' rows committed");

    let threads = threads();
    let writers: Vec<_> = threads.iter().filter(|(n, _)| n == WRITER_THREAD).collect();
    assert_eq!(writers.len(), 1, "one writer thread: {threads:?}");
    let sqlite: Vec<_> = threads
        .iter()
        .filter(|(n, _)| n.starts_with(SQLITE_THREAD_PREFIX))
        .collect();
    assert_eq!(sqlite.len(), 1, "one group-commit connection: {threads:?}");
    for (name, nice) in writers.iter().chain(&sqlite) {
        assert_eq!(*nice, COMMIT_NICE, "{name}: {threads:?}");
    }
    let others: Vec<_> = threads
        .iter()
        .filter(|(n, _)| n != WRITER_THREAD && !n.starts_with(SQLITE_THREAD_PREFIX))
        .collect();
    assert!(
        others.iter().any(|(n, _)| n.starts_with("sqlx-sqlite")),
        "the shared pool's threads: {threads:?}"
    );
    for (name, nice) in others {
        assert_eq!(*nice, 0, "{name} keeps its priority: {threads:?}");
    }
}
