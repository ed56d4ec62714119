//! The handle the core tells notices to. On one node it does nothing; in cluster
//! mode it hands each notice to the publisher task without waiting, so a
//! revocation never waits on NATS: the local close has already happened, and
//! should NATS be away the grant sweep on every replica remains the backstop
//! (docs/cluster.md, "When NATS is unreachable").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use latchkey_protocol::cluster::Notice;
use tokio::sync::mpsc;

use crate::telemetry::metrics::{CLUSTER_NOTICES_DROPPED, CLUSTER_NOTICES_SENT};

/// Notices queued for the publisher before new ones are dropped (and counted):
/// enough for a revoke-all of a large team while NATS reconnects, small enough
/// that an unreachable NATS cannot grow the node.
pub const OUTBOX: usize = 4096;

/// How this replica's link to the others stands, for `/readyz` and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterStatus {
    /// One node: nothing to reach.
    Off,
    /// Connected to NATS: notices travel.
    Connected,
    /// Not connected (yet, or any more): notices queue, then drop; the grant
    /// sweep closes revoked sockets on the other replicas.
    Disconnected,
}

impl ClusterStatus {
    /// The word `/readyz` and the logs use.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterStatus::Off => "off",
            ClusterStatus::Connected => "connected",
            ClusterStatus::Disconnected => "disconnected",
        }
    }
}

#[derive(Debug)]
struct Shared {
    node_id: String,
    outbox: mpsc::Sender<Notice>,
    client: async_nats::Client,
    /// Set once the subscription is known to the NATS server (subscribed and
    /// flushed): from then on this replica hears every notice. The client
    /// subscribes again by itself after a reconnect.
    listening: AtomicBool,
}

/// Cheap to clone; `Peers::default()` is the single-node no-op.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    inner: Option<Arc<Shared>>,
}

impl Peers {
    /// A handle whose notices go to `outbox` (read by the publisher task).
    pub(crate) fn new(
        node_id: String,
        outbox: mpsc::Sender<Notice>,
        client: async_nats::Client,
    ) -> Self {
        Self {
            inner: Some(Arc::new(Shared {
                node_id,
                outbox,
                client,
                listening: AtomicBool::new(false),
            })),
        }
    }

    /// Tell every other replica. Never waits: a notice that does not fit the
    /// queue is dropped, counted and logged.
    pub fn tell(&self, notice: Notice) {
        let Some(shared) = &self.inner else {
            return;
        };
        match shared.outbox.try_send(notice) {
            Ok(()) => metrics::counter!(CLUSTER_NOTICES_SENT).increment(1),
            Err(e) => {
                metrics::counter!(CLUSTER_NOTICES_DROPPED).increment(1);
                tracing::warn!(
                    error = %e,
                    "cluster notice dropped (NATS unreachable and the queue full); other replicas' grant sweeps close revoked sockets"
                );
            }
        }
    }

    /// Tell every other replica each of `notices`.
    pub fn tell_all(&self, notices: Vec<Notice>) {
        for n in notices {
            self.tell(n);
        }
    }

    /// This replica's node id, when in cluster mode.
    pub fn node_id(&self) -> Option<&str> {
        self.inner.as_ref().map(|s| s.node_id.as_str())
    }

    /// Note that this replica now hears the other replicas' notices.
    pub(crate) fn set_listening(&self) {
        if let Some(s) = &self.inner {
            s.listening.store(true, Ordering::Release);
        }
    }

    /// How the link to the other replicas stands now: connected once NATS
    /// answers and this replica's subscription is in place.
    pub fn status(&self) -> ClusterStatus {
        match &self.inner {
            None => ClusterStatus::Off,
            Some(s) => match s.client.connection_state() {
                async_nats::connection::State::Connected if s.listening.load(Ordering::Acquire) => {
                    ClusterStatus::Connected
                }
                _ => ClusterStatus::Disconnected,
            },
        }
    }
}
