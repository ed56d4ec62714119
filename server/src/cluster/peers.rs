//! The handle the core tells notices to. On one node it does nothing; in cluster
//! mode it hands each notice to the publisher task without waiting, so a
//! revocation never waits on NATS: the local close has already happened, and
//! should NATS be away the grant sweep on every replica remains the backstop
//! (docs/cluster.md, "When NATS is unreachable").

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use latchkey_protocol::cluster::Notice;
use tokio::sync::mpsc;

use crate::telemetry::metrics::{CLUSTER_NOTICES_DROPPED, CLUSTER_NOTICES_SENT};

/// Notices queued for the publisher before new ones are dropped (and counted):
/// enough for a revoke-all of a large team while NATS reconnects, small enough
/// that an unreachable NATS cannot grow the node.
pub const OUTBOX: usize = 4096;

/// A revoke-all of a large team while NATS is away drops thousands of notices:
/// one warning a minute, with the count.
static DROPPED_WARNING: crate::telemetry::every::Every =
    crate::telemetry::every::Every::new(std::time::Duration::from_secs(60));

/// The subscriptions a replica needs before it counts as connected.
const SUBSCRIPTIONS: u8 = 3;

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
pub(super) struct Shared {
    node_id: String,
    outbox: mpsc::Sender<Notice>,
    client: async_nats::Client,
    /// Calls, cancels and events to other replicas (docs/cluster.md, "Calls
    /// across replicas").
    pub(super) relay: super::remote_link::RelayClient,
    /// Which replica holds each device's socket, as told.
    pub(super) directory: super::directory::Directory,
    /// Sessions on other replicas of the devices whose sockets are here.
    pub(super) routes: super::relay::SessionRoutes,
    /// The other replicas heard from lately.
    pub(super) members: super::members::Members,
    /// Wakes the announcer: another replica asked which devices are here.
    pub(super) announce: Arc<tokio::sync::Notify>,
    /// Cancelled once the node's sockets have all ended: the publisher sends
    /// what is queued and stops.
    finished: tokio_util::sync::CancellationToken,
    publisher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Subscriptions known to the NATS server (subscribed and flushed): the
    /// notices', this replica's own subject and the session lists'. With all
    /// [`SUBSCRIPTIONS`], it hears every notice and answers calls and lists. The client subscribes again by itself after
    /// a reconnect.
    listening: AtomicU8,
}

/// Cheap to clone; `Peers::default()` is the single-node no-op.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    pub(super) inner: Option<Arc<Shared>>,
}

impl Peers {
    /// A handle whose notices go to `outbox` (read by the publisher task).
    pub(crate) fn new(
        node_id: String,
        outbox: mpsc::Sender<Notice>,
        client: async_nats::Client,
        subject: Arc<str>,
        announce: Arc<tokio::sync::Notify>,
    ) -> Self {
        let relay = super::remote_link::RelayClient {
            client: client.clone(),
            base: subject,
            node_id: Arc::from(node_id.as_str()),
        };
        Self {
            inner: Some(Arc::new(Shared {
                node_id,
                outbox,
                client,
                relay,
                directory: Default::default(),
                routes: Default::default(),
                members: Default::default(),
                announce,
                finished: Default::default(),
                publisher: Default::default(),
                listening: AtomicU8::new(0),
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
                if let Some(also) = DROPPED_WARNING.due() {
                    tracing::warn!(
                        error = %e,
                        also_dropped_since_last_warning = also,
                        "cluster notice dropped (NATS unreachable and the queue full); other replicas' grant sweeps close revoked sockets (logged at most once a minute)"
                    );
                }
            }
        }
    }

    /// Tell every other replica each of `notices`.
    pub fn tell_all(&self, notices: Vec<Notice>) {
        for n in notices {
            self.tell(n);
        }
    }

    /// The token the publisher stops on.
    pub(super) fn finished(&self) -> tokio_util::sync::CancellationToken {
        self.inner
            .as_ref()
            .map(|s| s.finished.clone())
            .unwrap_or_default()
    }

    pub(super) fn set_publisher(&self, task: tokio::task::JoinHandle<()>) {
        if let Some(s) = &self.inner {
            *s.publisher.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        }
    }

    /// The last step of a drain, once every socket has ended: send the
    /// notices still queued (their ends' `device_disconnected` among them),
    /// within a bound, and stop telling.
    pub async fn finish(&self) {
        let Some(s) = &self.inner else { return };
        // The others stop waiting for this replica's answers.
        self.tell(Notice::Leaving);
        s.finished.cancel();
        let task = s.publisher.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task
            && tokio::time::timeout(super::nats::CLOSING_GRACE * 2, task)
                .await
                .is_err()
        {
            tracing::warn!("cluster: notices still queued at exit were not sent");
        }
    }

    /// Wake the announcer: tell the others again which devices are here.
    pub(crate) fn announce(&self) {
        if let Some(s) = &self.inner {
            s.announce.notify_one();
        }
    }

    /// This replica's node id, when in cluster mode.
    pub fn node_id(&self) -> Option<&str> {
        self.inner.as_ref().map(|s| s.node_id.as_str())
    }

    /// `node` (a subject token) told a notice (cluster::members).
    pub(crate) fn heard_from(&self, node: &str, heard: super::members::Heard) {
        if let Some(s) = &self.inner {
            s.members.heard(node, heard);
        }
    }

    /// Note that one of this replica's subscriptions is in place.
    pub(crate) fn set_listening(&self) {
        if let Some(s) = &self.inner {
            s.listening.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// How the link to the other replicas stands now: connected once NATS
    /// answers and this replica's subscription is in place.
    pub fn status(&self) -> ClusterStatus {
        match &self.inner {
            None => ClusterStatus::Off,
            Some(s) => match s.client.connection_state() {
                async_nats::connection::State::Connected
                    if s.listening.load(Ordering::Acquire) >= SUBSCRIPTIONS =>
                {
                    ClusterStatus::Connected
                }
                _ => ClusterStatus::Disconnected,
            },
        }
    }
}
