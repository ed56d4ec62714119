//! A device link to a socket on another replica (docs/cluster.md, "Calls
//! across replicas"): the same [`Link`] the session core calls on a local
//! socket, carried over NATS request-reply to the replica that holds the
//! socket. Deadlines, cancels and the session logic stay on the caller's
//! replica, unchanged; the holder applies the device's own in-flight cap and
//! answers with the same conditions a local call fails with.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::additions::Features;
use latchkey_protocol::cluster::relay::{self, RelayAnswer, RelayCall, RelayCancel, RelayFailure};
use latchkey_protocol::effect::{SESSION_START, SESSION_STOP};
use latchkey_protocol::{EndReason, RequestFrame};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::core_error::CoreError;
use crate::devices::link::{Link, RawResult, Reply};

/// The NATS side of relayed calls: who this replica is and where to send.
#[derive(Debug, Clone)]
pub struct RelayClient {
    pub(super) client: async_nats::Client,
    /// The cluster's subject; node subjects hang below it.
    pub(super) base: Arc<str>,
    pub(super) node_id: Arc<str>,
}

/// Why a request to another replica got no answer.
#[derive(Debug)]
enum RelayError {
    /// Nobody listens on the node's subject: the replica is gone.
    NoResponders,
    /// The request is larger than NATS carries.
    TooLarge,
    /// NATS is away, or the request failed otherwise.
    Unreachable(String),
}

impl RelayClient {
    pub(super) fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Publish `payload` as a `kind` message to `node` (fire and forget).
    pub(super) async fn publish(&self, node: &str, kind: &str, payload: Vec<u8>) {
        let subject = relay::node_subject(&self.base, node, kind);
        if let Err(e) = self.client.publish(subject, payload.into()).await {
            tracing::debug!(error = %e, kind, "cluster: relay message not published");
        }
    }

    /// Request `payload` from `node` and wait for its answer, however long: the
    /// caller's deadline bounds the wait (it drops this future).
    async fn request(
        &self,
        node: &str,
        payload: Vec<u8>,
    ) -> Result<async_nats::Message, RelayError> {
        use async_nats::RequestErrorKind as Kind;
        let subject = relay::node_subject(&self.base, node, relay::CALL);
        let request = async_nats::Request::new()
            .payload(payload.into())
            .timeout(None);
        match self.client.send_request(subject, request).await {
            Ok(message) => Ok(message),
            Err(e) => match e.kind() {
                Kind::NoResponders => Err(RelayError::NoResponders),
                Kind::MaxPayloadExceeded => Err(RelayError::TooLarge),
                _ => Err(RelayError::Unreachable(e.to_string())),
            },
        }
    }
}

/// The error a relayed call fails with for the holder's `failure`.
pub fn error_of(failure: RelayFailure) -> CoreError {
    match failure {
        RelayFailure::DeviceRevoked => CoreError::DeviceRevoked,
        RelayFailure::DeviceExpired => CoreError::DeviceExpired,
        RelayFailure::ShuttingDown => CoreError::ShuttingDown,
        RelayFailure::KillSwitch => CoreError::SessionEnded(EndReason::KillSwitch),
        RelayFailure::CallsInFlight => CoreError::CallsInFlight,
        RelayFailure::OutboxFull => CoreError::OutboxFull,
        RelayFailure::AnswerTooLarge => CoreError::Internal(
            "the browser's answer is larger than the cluster's NATS carries (max_payload)",
        ),
        RelayFailure::Malformed => CoreError::Internal("a replica did not understand a call"),
        RelayFailure::BrowserDisconnected => CoreError::BrowserDisconnected,
    }
}

/// The error calls in flight fail with when the device's socket ended for
/// `reason` (what [`crate::devices::link::reason_for_close`] gives locally).
pub fn error_for_end(reason: EndReason) -> CoreError {
    match reason {
        EndReason::DeviceRevoked => CoreError::DeviceRevoked,
        EndReason::DeviceExpired => CoreError::DeviceExpired,
        EndReason::ServerShuttingDown => CoreError::ShuttingDown,
        EndReason::KillSwitch => CoreError::SessionEnded(EndReason::KillSwitch),
        _ => CoreError::BrowserDisconnected,
    }
}

/// Why sessions opened through a link that closed with `error` end.
pub fn end_for_error(error: &CoreError) -> EndReason {
    match error {
        CoreError::DeviceRevoked => EndReason::DeviceRevoked,
        CoreError::DeviceExpired => EndReason::DeviceExpired,
        CoreError::ShuttingDown => EndReason::ServerShuttingDown,
        CoreError::SessionEnded(reason) => *reason,
        _ => EndReason::BrowserDisconnected,
    }
}

#[derive(Debug, Default)]
struct RemoteState {
    /// Requests awaiting their answer: the waiter, and the task that asks.
    pending: HashMap<String, (oneshot::Sender<Reply>, AbortHandle)>,
    /// Sessions started through this link that have not been stopped: they end
    /// with it.
    sessions: HashSet<String>,
    closed: Option<CoreError>,
    /// Nobody answered on the replica's subject: it is gone.
    replica_gone: bool,
}

/// A device's socket on replica `node`, opened at `connected_at_ms`.
#[derive(Debug)]
pub struct RemoteLink {
    pub tenant_id: String,
    pub device_id: String,
    pub connected_at_ms: i64,
    pub node: Arc<str>,
    features: Features,
    relay: RelayClient,
    /// This replica's share of the device's call slots (the holder applies
    /// the device's own cap too).
    inflight: Arc<Semaphore>,
    state: Arc<Mutex<RemoteState>>,
    closed: CancellationToken,
}

fn lock(state: &Mutex<RemoteState>) -> MutexGuard<'_, RemoteState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn close_shared(state: &Mutex<RemoteState>, closed: &CancellationToken, reason: CoreError) {
    let pending = {
        let mut state = lock(state);
        if state.closed.is_some() {
            return;
        }
        state.closed = Some(reason.clone());
        std::mem::take(&mut state.pending)
    };
    for (_, (tx, task)) in pending {
        task.abort();
        let _ = tx.send(Err(reason.clone()));
    }
    closed.cancel();
}

impl RemoteLink {
    pub(super) fn new(
        holder: &super::directory::Holder,
        device_id: &str,
        relay: RelayClient,
        max_in_flight: usize,
    ) -> Self {
        Self {
            tenant_id: holder.tenant_id.clone(),
            device_id: device_id.to_string(),
            connected_at_ms: holder.connected_at_ms,
            node: holder.node.clone(),
            features: holder.features,
            relay,
            inflight: Arc::new(Semaphore::new(max_in_flight)),
            state: Arc::new(Mutex::new(RemoteState::default())),
            closed: CancellationToken::new(),
        }
    }

    /// Close: refuse new requests and fail every waiter with `reason`.
    pub fn close(&self, reason: CoreError) {
        close_shared(&self.state, &self.closed, reason);
    }

    /// Whether it closed because its replica no longer answers (killed).
    pub fn replica_gone(&self) -> bool {
        lock(&self.state).replica_gone
    }

    /// Resolves once the link has closed.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// The sessions started through it and not stopped.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.state).sessions.iter().cloned().collect()
    }

    fn session_param(request: &RequestFrame) -> Option<String> {
        request
            .params
            .as_ref()
            .and_then(|p| p.get("session_id"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    }
}

/// Read the holder's answer.
fn answer_of(payload: &[u8]) -> Reply {
    match serde_json::from_slice::<RelayAnswer>(payload) {
        Ok(RelayAnswer { ok: Some(raw), .. }) => Ok(RawResult::Owned(raw.to_owned())),
        Ok(RelayAnswer {
            browser_error: Some(body),
            ..
        }) => Err(CoreError::Browser(body)),
        Ok(RelayAnswer {
            failed: Some(f), ..
        }) => Err(error_of(f)),
        _ => Err(CoreError::Internal("a replica's answer does not parse")),
    }
}

impl Link for RemoteLink {
    fn try_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.inflight.clone().try_acquire_owned().ok()
    }

    fn forward(&self, request: RequestFrame) -> Result<oneshot::Receiver<Reply>, CoreError> {
        let mut state = lock(&self.state);
        if let Some(reason) = &state.closed {
            return Err(reason.clone());
        }
        if !self.relay.connected() {
            return Err(CoreError::ReplicaUnreachable);
        }
        let id = request.id.clone();
        let method = request.method.clone();
        let session = Self::session_param(&request);
        let payload = serde_json::to_vec(&RelayCall {
            tenant_id: self.tenant_id.clone(),
            device_id: self.device_id.clone(),
            connected_at_ms: self.connected_at_ms,
            origin: self.relay.node_id.to_string(),
            request,
        })
        .map_err(|_| CoreError::Internal("a call could not be encoded"))?;
        if method == SESSION_START
            && let Some(s) = &session
        {
            state.sessions.insert(s.clone());
        }
        let (tx, rx) = oneshot::channel();
        let relay = self.relay.clone();
        let node = self.node.clone();
        let shared = self.state.clone();
        let closed = self.closed.clone();
        let task_id = id.clone();
        // The lock is held until the task is registered, so its answer (which
        // takes the lock) always finds it.
        let task = tokio::spawn(async move {
            let reply = match relay.request(&node, payload).await {
                Ok(message) => answer_of(&message.payload),
                Err(RelayError::NoResponders) => {
                    // The replica is gone, and the socket with it: the link
                    // closes (its sessions end), and the replica is forgotten.
                    tracing::warn!(%node, "cluster: a replica holding a browser no longer answers");
                    lock(&shared).replica_gone = true;
                    close_shared(&shared, &closed, CoreError::BrowserDisconnected);
                    return;
                }
                Err(RelayError::TooLarge) => Err(CoreError::invalid(
                    "the call is larger than the cluster's NATS carries (max_payload)",
                )),
                Err(RelayError::Unreachable(e)) => {
                    tracing::warn!(error = %e, %node, "cluster: a relayed call failed");
                    Err(CoreError::ReplicaUnreachable)
                }
            };
            let mut state = lock(&shared);
            if method == SESSION_STOP
                && reply.is_ok()
                && let Some(s) = &session
            {
                state.sessions.remove(s);
            }
            if let Some((tx, _)) = state.pending.remove(&task_id) {
                let _ = tx.send(reply);
            }
        });
        state.pending.insert(id, (tx, task.abort_handle()));
        Ok(rx)
    }

    fn send_cancel(&self, rpc_id: &str) {
        if lock(&self.state).closed.is_some() {
            return;
        }
        let Ok(payload) = serde_json::to_vec(&RelayCancel {
            tenant_id: self.tenant_id.clone(),
            device_id: self.device_id.clone(),
            rpc_id: rpc_id.to_string(),
        }) else {
            return;
        };
        let relay = self.relay.clone();
        let node = self.node.clone();
        tokio::spawn(async move { relay.publish(&node, relay::CANCEL, payload).await });
    }

    fn forget(&self, rpc_id: &str) {
        if let Some((_, task)) = lock(&self.state).pending.remove(rpc_id) {
            task.abort();
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    fn close_reason(&self) -> CoreError {
        lock(&self.state)
            .closed
            .clone()
            .unwrap_or(CoreError::BrowserDisconnected)
    }

    fn features(&self) -> Features {
        self.features
    }
}
