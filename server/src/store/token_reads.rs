//! The grant read of every device upgrade, coalesced: upgrades that arrive while a
//! read is under way wait for the next one and are answered by one query together.
//!
//! Why: in a reconnect storm every device's upgrade reads its grant by token hash.
//! One query each cost a hand-off to the store's connection (on SQLite, waking
//! sqlx's worker thread for that connection; on PostgreSQL, a round trip) per
//! device, and that hand-off, not the indexed lookup, was the cost. Nothing waits
//! to fill a batch: a lone upgrade is read at once, as before, and a batch is
//! simply what queued during the read before it (at most [`TOKEN_BATCH`]).
//!
//! Only the read is shared. Each upgrade still compares the stored hash with its
//! own in constant time and checks the grant itself (`extension::upgrade`).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;

use tokio::sync::{mpsc, oneshot};

use super::{DeviceRecord, Store, StoreError, TOKEN_BATCH};

/// Upgrades queued for a read before further ones wait for room.
const QUEUE: usize = 4096;

type Answer = Result<Option<DeviceRecord>, StoreError>;

struct Request {
    hash: String,
    reply: oneshot::Sender<Answer>,
}

/// A handle on the node's token reader; clones share it.
#[derive(Clone)]
pub struct TokenReads {
    queue: mpsc::Sender<Request>,
}

impl std::fmt::Debug for TokenReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenReads")
    }
}

impl TokenReads {
    /// Starts the reader on the current runtime. It stops when every handle is gone.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let (queue, requests) = mpsc::channel(QUEUE);
        tokio::spawn(read_batches(store, requests));
        Self { queue }
    }

    /// The device whose current token has this hash, in any state.
    pub async fn device(&self, hash: String) -> Answer {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Request { hash, reply })
            .await
            .map_err(|_| StoreError::Unavailable("the token reader has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the token reader has stopped".into()))?
    }
}

async fn read_batches(store: Arc<dyn Store>, mut requests: mpsc::Receiver<Request>) {
    let mut batch = Vec::with_capacity(TOKEN_BATCH);
    while requests.recv_many(&mut batch, TOKEN_BATCH).await > 0 {
        let hashes: Vec<String> = batch.iter().map(|r| r.hash.clone()).collect();
        metrics::histogram!(crate::telemetry::metrics::TOKEN_READ_BATCH).record(batch.len() as f64);
        // One read that panics fails its own batch (503), not every later upgrade.
        let read = async {
            crate::failpoint::panic_once("token_reads.panic_once");
            store.devices_by_token_hash(&hashes).await
        };
        let found = match AssertUnwindSafe(read).catch_unwind().await {
            Ok(found) => found,
            Err(panic) => {
                crate::telemetry::metrics::task_panicked("token_reads", panic.as_ref());
                Err(StoreError::Internal("the grant read panicked".into()))
            }
        };
        answer(&mut batch, found);
    }
}

/// Hands each waiting upgrade its own row (or the read's error), emptying `batch`.
fn answer(batch: &mut Vec<Request>, found: Result<Vec<DeviceRecord>, StoreError>) {
    match found {
        Ok(devices) => {
            let by_hash: HashMap<&str, &DeviceRecord> =
                devices.iter().map(|d| (d.token_hash.as_str(), d)).collect();
            for r in batch.drain(..) {
                let device = by_hash.get(r.hash.as_str()).map(|d| (*d).clone());
                // The upgrade may have been abandoned meanwhile; nothing to tell.
                let _ = r.reply.send(Ok(device));
            }
        }
        Err(e) => {
            for r in batch.drain(..) {
                let _ = r.reply.send(Err(e.clone()));
            }
        }
    }
}
