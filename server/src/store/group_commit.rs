//! The group-commit writer: rows that must be durable before a peer is answered
//! (audit events, a device's last-seen time and browser) are queued, and one task
//! commits whatever is queued in one transaction and answers every waiter. While
//! one commit runs, the next batch gathers, so the commit rate follows the store's
//! speed with no timer. The audit trail ([`crate::audit`]) says what its rows hold;
//! this only writes them.
//!
//! The writer runs on a thread of its own at a lower priority, not on the
//! runtime's threads, so a commit never takes a core from the calls being
//! relayed ([`super::commit_thread`]).

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

/// Requests queued for the writer before callers wait for room: four batches.
const WRITER_QUEUE: usize = 4 * MAX_BATCH;
/// Rows in one transaction at most: more than a node relays calls in a
/// [`BACKGROUND_LINGER`] (about 600 here), so the linger never caps them.
const MAX_BATCH: usize = 4096;
/// How long a batch that starts with a row only queued ([`GroupCommit::enqueue`],
/// a tool call's) waits for more before it is committed, unless an urgent row
/// arrives first: such a row would otherwise cost a transaction of its own at
/// low load. Nobody waits on those rows before answering a peer
/// (docs/operations.md, "Audit").
pub const BACKGROUND_LINGER: std::time::Duration = std::time::Duration::from_millis(10);

impl GroupCommit {
    /// Starts the writer on a thread of its own ([`super::commit_thread`]); its
    /// statements run on the current runtime's I/O and timers. Where no thread
    /// can be started, the writer runs as a task on the runtime instead.
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (urgent, urgent_queue) = mpsc::channel(WRITER_QUEUE);
        let (background, background_queue) = mpsc::channel(WRITER_QUEUE);
        let queues = Queues {
            urgent: urgent_queue,
            background: background_queue,
        };
        super::commit_thread::spawn_writer(store.clone(), queues);
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

/// The writer's two queues, urgent first.
pub(super) struct Queues {
    urgent: mpsc::Receiver<Pending>,
    background: mpsc::Receiver<Pending>,
}

/// Rows taken from the queues for one commit.
pub(super) struct Batch(Vec<Pending>);

/// The writer as a task: takes whatever is queued, urgent rows first (up to
/// [`MAX_BATCH`]), commits it in one transaction and answers every waiter.
/// While one commit runs the next batch gathers, so the commit rate follows
/// the store's speed with no timer.
pub(super) async fn group_commit(store: Arc<dyn Store>, mut queues: Queues) {
    while let Some(batch) = next_batch(&mut queues).await {
        commit_batch(store.as_ref(), batch).await;
    }
}

/// The next batch, once a row is queued ([`lingers`] says whether it waits for
/// company); `None` once every sender is gone.
pub(super) async fn next_batch(queues: &mut Queues) -> Option<Batch> {
    let Queues { urgent, background } = queues;
    let (first, urgent_first) = tokio::select! {
        biased;
        Some(p) = urgent.recv() => (p, true),
        Some(p) = background.recv() => (p, false),
        else => return None,
    };
    let linger = lingers(&first, urgent_first, urgent.len() + background.len());
    let mut batch = vec![first];
    if linger {
        gather(&mut batch, urgent).await;
    }
    take_queued(&mut batch, urgent, background);
    Some(Batch(batch))
}

/// Commit a batch in one transaction and answer everyone waiting on it.
pub(super) async fn commit_batch(store: &dyn Store, batch: Batch) {
    // The rows move into the commit; what stays is who waits on them.
    let mut seen: Vec<DeviceSeen> = Vec::new();
    let mut events: Vec<NewAuditEvent> = Vec::with_capacity(batch.0.len());
    let mut waiting = Vec::new();
    let mut only_queued = false;
    for p in batch.0 {
        seen.extend(p.seen);
        events.extend(p.event);
        match p.done {
            Some(done) => waiting.push(done),
            None => only_queued = true,
        }
    }
    let result = store.record_activity(&seen, &events).await;
    if let Err(e) = &result
        && only_queued
    {
        // Nobody waits on a queued row to hear of its failure.
        tracing::error!(error = %e, rows = events.len(), "audit rows could not be written");
    }
    for done in waiting {
        let _ = done.send(result.clone());
    }
}

/// Move what is queued now into `batch`, urgent rows first, up to [`MAX_BATCH`].
fn take_queued(
    batch: &mut Vec<Pending>,
    urgent: &mut mpsc::Receiver<Pending>,
    background: &mut mpsc::Receiver<Pending>,
) {
    for queue in [urgent, background] {
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
    }
}

/// Whether a batch that starts with `first` waits for company before its
/// commit: only rows nobody waits on (a tool call's), never an urgent one, and
/// not when `queued` rows already fill a batch. Every commit has a fixed cost
/// (the transaction, the chain heads), so fewer, larger commits leave more of
/// the node's cores to the calls, under load as much as at low load.
fn lingers(first: &Pending, urgent_first: bool, queued: usize) -> bool {
    !urgent_first && first.done.is_none() && queued + 1 < MAX_BATCH
}

/// Wait out [`BACKGROUND_LINGER`], cut short by an urgent row (which joins the
/// batch). Queued rows are not received meanwhile, so that each does not wake
/// the writer: they are taken together afterwards.
async fn gather(batch: &mut Vec<Pending>, urgent: &mut mpsc::Receiver<Pending>) {
    tokio::select! {
        biased;
        Some(p) = urgent.recv() => batch.push(p),
        () = tokio::time::sleep(BACKGROUND_LINGER) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued() -> Pending {
        Pending {
            seen: None,
            event: None,
            done: None,
        }
    }

    fn waited_on() -> Pending {
        let (done, _answer) = oneshot::channel();
        Pending {
            seen: None,
            event: None,
            done: Some(done),
        }
    }

    #[test]
    fn only_queued_rows_linger_and_never_with_a_full_batch_waiting() {
        assert!(lingers(&queued(), false, 0));
        assert!(lingers(&queued(), false, MAX_BATCH - 2));
        // A full batch is already there: nothing to wait for.
        assert!(!lingers(&queued(), false, MAX_BATCH - 1));
        assert!(!lingers(&queued(), true, 0));
        assert!(!lingers(&waited_on(), false, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_linger_ends_with_its_time_or_an_urgent_row() {
        let (u, mut ur) = mpsc::channel(WRITER_QUEUE);
        let (b, mut br) = mpsc::channel(WRITER_QUEUE);
        let start = tokio::time::Instant::now();
        let mut batch = vec![queued()];
        gather(&mut batch, &mut ur).await;
        assert_eq!(start.elapsed(), BACKGROUND_LINGER);
        assert_eq!(batch.len(), 1);

        let start = tokio::time::Instant::now();
        let feeder = tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                b.send(queued()).await.expect("send");
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            u.send(waited_on()).await.expect("send");
            (u, b)
        });
        let mut batch = vec![queued()];
        gather(&mut batch, &mut ur).await;
        take_queued(&mut batch, &mut ur, &mut br);
        assert_eq!(start.elapsed(), std::time::Duration::from_millis(4));
        assert_eq!(batch.len(), 5);
        drop(feeder.await.expect("feeder"));
    }

    #[test]
    fn a_batch_takes_urgent_rows_first_and_stops_when_full() {
        let (u, mut ur) = mpsc::channel(WRITER_QUEUE);
        let (b, mut br) = mpsc::channel(WRITER_QUEUE);
        for _ in 0..MAX_BATCH {
            b.try_send(queued()).expect("room");
        }
        for _ in 0..10 {
            u.try_send(waited_on()).expect("room");
        }
        let mut batch = vec![queued()];
        take_queued(&mut batch, &mut ur, &mut br);
        assert_eq!(batch.len(), MAX_BATCH);
        assert!(batch[1..11].iter().all(|p| p.done.is_some()));
        // The rest stay queued, in order, for the next batch.
        assert_eq!(br.len(), 11);
    }
}
