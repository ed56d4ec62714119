//! The group commit's threads, at a lower priority than the runtime's threads
//! that relay calls (docs/operations.md, "Audit").
//!
//! A commit of a batch of audit rows is a few hundred microseconds of CPU: the
//! rows' hashes and statements on the writer's side, the statements themselves
//! on SQLite's connection thread. When it ran on the runtime's threads at their
//! priority, on a host with few cores it took a core from the calls being
//! relayed, and a call that arrived meanwhile waited: most of the gateway's
//! added p99 one call at a time (load-tests/notes.md). Nobody waits on a tool
//! call's row, so the commit yields the CPU instead: the kernel gives these
//! threads a smaller share only while the runtime's threads want the CPU, and
//! all of an idle core. Under sustained load the writer's queue still holds the
//! calls back when it is full, so no row is dropped.
//!
//! The writer thread waits for rows on a small runtime of its own (a timer for
//! the linger, nothing else) and runs each commit on the server's runtime
//! ([`tokio::runtime::Handle::block_on`]): the store's connections keep their
//! I/O on the runtime that made them.

use std::sync::Arc;

use super::Store;
use super::group_commit::{Queues, commit_batch, group_commit, next_batch};

/// What the group commit's threads are named (the kernel keeps 15 bytes): the
/// writer, and the SQLite connection threads of its connection.
pub const WRITER_THREAD: &str = "lk-audit-writer";
pub const SQLITE_THREAD_PREFIX: &str = "lk-commit-";

/// The nice value of the group commit's threads: a weight of 110 against the
/// runtime threads' 1024, about a tenth of a contended core, and all of an
/// idle one.
pub const COMMIT_NICE: i32 = 10;

/// Start the group-commit writer on a thread of its own, or as a task on the
/// current runtime where no thread can be started.
pub(super) fn spawn_writer(store: Arc<dyn Store>, queues: Queues) {
    let server = tokio::runtime::Handle::current();
    // The thread takes the queues out of this slot when it starts; if it never
    // starts they are still here for the task.
    let slot = Arc::new(std::sync::Mutex::new(Some((store, queues))));
    let for_thread = slot.clone();
    let on_server = server.clone();
    let spawned = std::thread::Builder::new()
        .name(WRITER_THREAD.into())
        .spawn(move || {
            if let Some((store, queues)) = take(&for_thread) {
                run_writer(&on_server, store, queues);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "the audit writer runs on the runtime's threads");
        if let Some((store, queues)) = take(&slot) {
            server.spawn(group_commit(store, queues));
        }
    }
}

type Slot = std::sync::Mutex<Option<(Arc<dyn Store>, Queues)>>;

fn take(slot: &Slot) -> Option<(Arc<dyn Store>, Queues)> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The writer thread's loop: wait for a batch on its own small runtime, commit
/// it on the server's. Ends when every sender is gone.
fn run_writer(server: &tokio::runtime::Handle, store: Arc<dyn Store>, mut queues: Queues) {
    lower_this_thread();
    let waiting = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::warn!(error = %e, "the audit writer runs on the runtime's threads");
            server.spawn(group_commit(store, queues));
            return;
        }
    };
    while let Some(batch) = waiting.block_on(next_batch(&mut queues)) {
        server.block_on(commit_batch(store.as_ref(), batch));
    }
}

/// Names the group commit's SQLite connection threads
/// (`SqliteConnectOptions::thread_name`).
pub fn sqlite_thread_name(id: u64) -> String {
    format!("{SQLITE_THREAD_PREFIX}{id}")
}

/// Lower the calling thread's priority to [`COMMIT_NICE`]. Best effort: where
/// the kernel refuses, the thread keeps its priority and the commits run as
/// before.
fn lower_this_thread() {
    // On Linux a priority is a thread's own: PRIO_PROCESS with no id sets the
    // calling thread's alone.
    if let Err(e) = rustix::process::setpriority_process(None, COMMIT_NICE) {
        tracing::debug!(error = %e, "the audit writer keeps its priority");
    }
}

/// Lower the priority of this process's group-commit SQLite threads, once the
/// connection (and its thread, named by [`sqlite_thread_name`]) exists: SQLite
/// makes the thread from whichever thread connects. Best effort, as above.
pub fn lower_sqlite_threads() {
    #[cfg(target_os = "linux")]
    {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for task in tasks.flatten() {
            let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else {
                continue;
            };
            if !name.starts_with(SQLITE_THREAD_PREFIX) {
                continue;
            }
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse().ok())
                .and_then(rustix::process::Pid::from_raw)
            else {
                continue;
            };
            // On Linux, PRIO_PROCESS with a thread's id sets that thread's alone.
            if let Err(e) = rustix::process::setpriority_process(Some(tid), COMMIT_NICE) {
                tracing::debug!(error = %e, "the group commit's SQLite thread keeps its priority");
            }
        }
    }
}
