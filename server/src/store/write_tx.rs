//! A write transaction, and on SQLite the node's place in its one writer's queue.
//!
//! SQLite lets one writer at a time hold the lock; others wait in its busy
//! handler, which sleeps and polls, so a burst of writers (a thousand pairings at
//! once) wakes late, in no order, and past the busy timeout answers 503 although
//! the store was working all along. The store's own writers therefore queue here
//! first, in arrival order, and only the one at the head asks SQLite for the lock:
//! the busy timeout is left to what this process does not control (another
//! process on the same file, a checkpoint). The queue has its own bound,
//! [`WRITE_QUEUE_TIMEOUT`]: a queue that has not moved in that long is a store
//! that is really unavailable, and answered so. PostgreSQL's writers need no queue
//! (row locks), so there the gate is absent.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use sqlx::{Database, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Longest wait for the head of the SQLite writers' queue.
pub const WRITE_QUEUE_TIMEOUT: Duration = Duration::from_secs(5);

/// The SQLite writers' queue: FIFO, one holder at a time.
#[derive(Debug, Clone, Default)]
pub struct WriteQueue(Arc<Mutex<()>>);

impl WriteQueue {
    /// The head of the queue, or `PoolTimedOut` (answered 503) after
    /// [`WRITE_QUEUE_TIMEOUT`].
    pub async fn turn(&self) -> Result<OwnedMutexGuard<()>, sqlx::Error> {
        tokio::time::timeout(WRITE_QUEUE_TIMEOUT, self.0.clone().lock_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)
    }
}

/// A transaction that keeps its writer's turn until it commits, rolls back or is
/// dropped.
#[derive(Debug)]
pub struct WriteTx<DB: Database> {
    tx: Transaction<'static, DB>,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl<DB: Database> WriteTx<DB> {
    pub fn new(tx: Transaction<'static, DB>, turn: Option<OwnedMutexGuard<()>>) -> Self {
        Self { tx, _turn: turn }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl<DB: Database> Deref for WriteTx<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        &self.tx
    }
}

impl<DB: Database> DerefMut for WriteTx<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        &mut self.tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn writers_take_turns_in_arrival_order() {
        let queue = WriteQueue::default();
        let first = queue.turn().await.expect("head");
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..3 {
            let (queue, order) = (queue.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = queue.turn().await.expect("turn");
                order.lock().expect("order").push(i);
            }));
            tokio::task::yield_now().await;
        }
        drop(first);
        for w in waiting {
            w.await.expect("writer");
        }
        assert_eq!(*order.lock().expect("order"), vec![0, 1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_that_does_not_move_is_unavailable() {
        let queue = WriteQueue::default();
        let _stuck = queue.turn().await.expect("head");
        let waited = queue.turn().await;
        assert!(matches!(waited, Err(sqlx::Error::PoolTimedOut)));
    }
}
