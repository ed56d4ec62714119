//! The group-commit writer: rows that must be durable before a peer is answered
//! (audit events, a device's last-seen time and browser) are queued, and one task
//! commits whatever is queued in one transaction and answers every waiter. While
//! one commit runs, the next batch gathers, so the commit rate follows the store's
//! speed with no timer. The audit trail ([`crate::audit`]) says what its rows hold;
//! this only writes them.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{DeviceSeen, NewAuditEvent, Store, StoreError};

/// Which queue a row waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Someone is waiting on it before answering a peer (a handshake, an admin).
    Urgent,
    /// Bookkeeping after the fact (connect and disconnect records): committed as
    /// surely, but never ahead of urgent rows, so a storm of disconnects cannot
    /// delay the handshakes of the reconnects.
    Background,
}

/// The writer's queues; cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    store: Arc<dyn Store>,
    urgent: mpsc::Sender<Pending>,
    background: mpsc::Sender<Pending>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupCommit")
    }
}

/// Rows waiting for the group commit, and the caller waiting on them.
struct Pending {
    seen: Option<DeviceSeen>,
    event: Option<NewAuditEvent>,
    /// The caller waiting for the commit; `None` for a row only queued
    /// ([`GroupCommit::enqueue`]).
    done: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// Requests queued for the writer before callers wait for room.
const WRITER_QUEUE: usize = 4096;
/// Rows in one transaction at most.
const MAX_BATCH: usize = 512;
/// How long a batch that starts with a row only queued ([`GroupCommit::enqueue`],
/// a tool call's) waits for more before it is committed, unless an urgent row
/// arrives first: such a row would otherwise cost a transaction of its own at
/// low load. Nobody waits on those rows before answering a peer
/// (docs/operations.md, "Audit").
pub const BACKGROUND_LINGER: std::time::Duration = std::time::Duration::from_millis(10);

impl GroupCommit {
    /// Starts the writer on the current runtime.
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (urgent, urgent_queue) = mpsc::channel(WRITER_QUEUE);
        let (background, background_queue) = mpsc::channel(WRITER_QUEUE);
        tokio::spawn(group_commit(store.clone(), urgent_queue, background_queue));
        Self {
            store,
            urgent,
            background,
        }
    }

    /// Commit `seen` and `event` together; returns once they are committed.
    pub async fn commit(
        &self,
        priority: Priority,
        seen: Option<DeviceSeen>,
        event: Option<NewAuditEvent>,
    ) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        let queue = match priority {
            Priority::Urgent => &self.urgent,
            Priority::Background => &self.background,
        };
        let pending = Pending {
            seen,
            event,
            done: Some(done),
        };
        match queue.send(pending).await {
            Ok(()) => answer
                .await
                .unwrap_or_else(|_| Err(StoreError::Unavailable("audit writer stopped".into()))),
            // The writer is gone (runtime shutting down): write directly.
            Err(mpsc::error::SendError(p)) => {
                let seen: Vec<DeviceSeen> = p.seen.into_iter().collect();
                let events: Vec<NewAuditEvent> = p.event.into_iter().collect();
                self.store.record_activity(&seen, &events).await
            }
        }
    }
}

impl GroupCommit {
    /// Queue `event` for the next commit and return once it is queued, not
    /// committed: for rows written on an agent's path (a tool call's), where
    /// waiting for the store on every call would cost the agent its latency. A
    /// full queue still makes the caller wait, so rows are never dropped; a
    /// failed commit is logged by the writer. [`Self::commit`] after it returns
    /// once it is committed too (rows leave each queue in order).
    pub async fn enqueue(&self, priority: Priority, event: NewAuditEvent) {
        let queue = match priority {
            Priority::Urgent => &self.urgent,
            Priority::Background => &self.background,
        };
        let pending = Pending {
            seen: None,
            event: Some(event),
            done: None,
        };
        if let Err(mpsc::error::SendError(p)) = queue.send(pending).await {
            // The writer is gone (runtime shutting down): write directly.
            let events: Vec<NewAuditEvent> = p.event.into_iter().collect();
            if let Err(e) = self.store.record_activity(&[], &events).await {
                tracing::error!(error = %e, "an audit row could not be written");
            }
        }
    }
}

/// The writer: takes whatever is queued, urgent rows first (up to [`MAX_BATCH`]),
/// commits it in one transaction and answers every waiter. While one commit runs
/// the next batch gathers, so the commit rate follows the store's speed with no
/// timer.
async fn group_commit(
    store: Arc<dyn Store>,
    mut urgent: mpsc::Receiver<Pending>,
    mut background: mpsc::Receiver<Pending>,
) {
    loop {
        let (first, urgent_first) = tokio::select! {
            biased;
            Some(p) = urgent.recv() => (p, true),
            Some(p) = background.recv() => (p, false),
            else => break,
        };
        // Rows only queued (a tool call's) gather for a moment; a row someone
        // waits on is committed at once, and an urgent one is never held back.
        let linger = !urgent_first && first.done.is_none();
        let mut batch = vec![first];
        if linger {
            tokio::select! {
                Some(p) = urgent.recv() => batch.push(p),
                () = tokio::time::sleep(BACKGROUND_LINGER) => {}
            }
        }
        for queue in [&mut urgent, &mut background] {
            while batch.len() < MAX_BATCH {
                match queue.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
        }
        let seen: Vec<DeviceSeen> = batch.iter().filter_map(|p| p.seen.clone()).collect();
        let events: Vec<NewAuditEvent> = batch.iter().filter_map(|p| p.event.clone()).collect();
        let result = store.record_activity(&seen, &events).await;
        if let Err(e) = &result
            && batch.iter().any(|p| p.done.is_none())
        {
            // Nobody waits on a queued row to hear of its failure.
            tracing::error!(error = %e, rows = events.len(), "audit rows could not be written");
        }
        for p in batch {
            if let Some(done) = p.done {
                let _ = done.send(result.clone());
            }
        }
    }
}
