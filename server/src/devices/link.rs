//! A handshaken device connection as the rest of the gateway sees it: a bounded
//! outbox to its socket, the requests waiting for an answer (matched by id), and a
//! cap on calls in flight. When the connection ends, every waiter is failed at once
//! with the reason, and nothing more can be queued.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::additions::Features;
use latchkey_protocol::{EndReason, Frame, RequestFrame, methods};
use serde_json::json;
use serde_json::value::RawValue;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use crate::core_error::CoreError;
use crate::socket::Text;
use crate::telemetry::metrics::OUTBOX_FRAMES;

/// An answer from the extension: its result, or its error (or the gateway's, when
/// the connection ended first). A result stays raw JSON text from the device's frame
/// to the agent's, never rebuilt.
pub type Reply = Result<RawResult, CoreError>;

/// A result as JSON text. Straight off a device it is a slice of the device's frame,
/// shared rather than copied: a 1 MiB result is copied once on its way through the
/// gateway, into the agent's frame (measured in docs/benchmarks.md).
#[derive(Debug, Clone)]
pub enum RawResult {
    /// `frame[start..end]`, already validated as one JSON value.
    Slice {
        frame: Text,
        start: usize,
        end: usize,
    },
    /// Built by the gateway.
    Owned(Box<RawValue>),
}

impl RawResult {
    /// The slice of `frame` that `value` borrows from; `None` if it is not one.
    pub fn slice_of(frame: &Text, value: &RawValue) -> Option<Self> {
        let text = frame.as_str();
        let start = (value.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let end = start.checked_add(value.get().len())?;
        // In bounds and at the same address: the very bytes (no content compare,
        // which would read a 1 MiB result once more).
        let slice = text.get(start..end)?;
        std::ptr::eq(slice.as_ptr(), value.get().as_ptr()).then(|| Self::Slice {
            frame: frame.clone(),
            start,
            end,
        })
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        match self {
            // The range was taken from this very frame, so it is in bounds.
            Self::Slice { frame, start, end } => frame.as_str().get(*start..*end).unwrap_or("null"),
            Self::Owned(raw) => raw.get(),
        }
    }
}

impl serde::Serialize for RawResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Owned(raw) => raw.serialize(serializer),
            // Borrowing re-reads the text (it was validated when it arrived) but
            // copies nothing.
            Self::Slice { .. } => serde_json::from_str::<&RawValue>(self.get())
                .map_err(serde::ser::Error::custom)?
                .serialize(serializer),
        }
    }
}

/// What the session core calls on a device, wherever its socket is: the interface
/// between the call pipeline and a connection. [`DeviceLink`] is the link to a
/// socket on this node; a link to a socket on another replica is another
/// implementation, and the session logic does not change.
pub trait Link: Send + Sync + std::fmt::Debug {
    /// One of the device's call slots, if any is free (the in-flight cap).
    fn try_permit(&self) -> Option<OwnedSemaphorePermit>;
    /// Send `request` and register for its answer; nothing is sent on an error.
    fn forward(&self, request: RequestFrame) -> Result<oneshot::Receiver<Reply>, CoreError>;
    /// Ask the device to abort a forwarded request (fire and forget).
    fn send_cancel(&self, rpc_id: &str);
    /// Stop waiting for `rpc_id`; a late answer is dropped.
    fn forget(&self, rpc_id: &str);
    /// Whether the connection has ended.
    fn is_closed(&self) -> bool;
    /// Why the connection ended (a generic disconnect if it has not).
    fn close_reason(&self) -> CoreError;
    /// Latchkey's additions the extension listed in its handshake
    /// (docs/protocol.md, "Latchkey's additions").
    fn features(&self) -> Features;
}

impl Link for DeviceLink {
    fn try_permit(&self) -> Option<OwnedSemaphorePermit> {
        DeviceLink::try_permit(self)
    }
    fn forward(&self, request: RequestFrame) -> Result<oneshot::Receiver<Reply>, CoreError> {
        DeviceLink::forward(self, request)
    }
    fn send_cancel(&self, rpc_id: &str) {
        DeviceLink::send_cancel(self, rpc_id)
    }
    fn forget(&self, rpc_id: &str) {
        DeviceLink::forget(self, rpc_id)
    }
    fn is_closed(&self) -> bool {
        DeviceLink::is_closed(self)
    }
    fn close_reason(&self) -> CoreError {
        DeviceLink::close_reason(self)
    }
    fn features(&self) -> Features {
        self.features
    }
}

/// Frames queued for one socket; beyond this the caller gets `capacity_reached`.
pub const OUTBOX_CAPACITY: usize = 256;

#[derive(Debug)]
pub struct DeviceLink {
    pub device_id: String,
    pub tenant_id: String,
    state: Mutex<LinkState>,
    /// Wakes the connection task when frames are queued (a stored permit if it is
    /// busy writing, so no frame waits for the next one).
    queued: Notify,
    inflight: Arc<Semaphore>,
    closed: CancellationToken,
    /// What the extension said it can do beyond the base contract.
    features: Features,
}

#[derive(Debug, Default)]
struct LinkState {
    pending: HashMap<String, oneshot::Sender<Reply>>,
    /// Frames for the socket, in order. A plain queue under the lock the pending
    /// map already needs rather than a channel: an idle device's outbox allocates
    /// nothing (a tokio channel holds a block of slots per device, idle or not), and
    /// the connection task takes everything queued at once and writes it with one
    /// flush.
    outbox: VecDeque<String>,
    /// Set once: why the link closed.
    closed: Option<CoreError>,
}

impl LinkState {
    /// Queue `text` unless the outbox is full.
    fn enqueue(&mut self, text: String) -> bool {
        if self.outbox.len() >= OUTBOX_CAPACITY {
            return false;
        }
        self.outbox.push_back(text);
        metrics::gauge!(OUTBOX_FRAMES).increment(1.0);
        true
    }
}

impl DeviceLink {
    /// A link; its outbox is drained by the connection task through `next_frames`.
    pub fn new(device_id: &str, tenant_id: &str, max_in_flight: usize) -> Arc<Self> {
        Self::with_features(device_id, tenant_id, max_in_flight, Features::default())
    }

    /// A link to an extension that listed `features` in its handshake.
    pub fn with_features(
        device_id: &str,
        tenant_id: &str,
        max_in_flight: usize,
        features: Features,
    ) -> Arc<Self> {
        Arc::new(Self {
            device_id: device_id.to_string(),
            tenant_id: tenant_id.to_string(),
            state: Mutex::new(LinkState::default()),
            queued: Notify::new(),
            inflight: Arc::new(Semaphore::new(max_in_flight)),
            closed: CancellationToken::new(),
            features,
        })
    }

    /// Wait for queued frames and take all of them, oldest first (for the one task
    /// that writes the socket). Cancel-safe: a wake-up that arrives while this is
    /// dropped is kept for the next call, and frames queued before it are found
    /// without one.
    ///
    /// Woken while other calls are in flight on the link, it first yields once to
    /// the tasks already runnable. tokio runs a task woken by the running one next,
    /// so without the yield the first of many concurrent callers (HTTP requests,
    /// each in a task of its own) had its frame written alone; after it, every
    /// caller ready in the same pass has queued its frame, and they leave in one
    /// write: one system call, and one wake-up of the device's reader, for the
    /// batch. A lone call is written at once: the yield would cost it a pass of the
    /// scheduler and buy nothing (load-tests/notes.md, "Device writes after the
    /// runnable callers").
    pub async fn next_frames(&self) -> VecDeque<String> {
        loop {
            // One look under the lock decides: wait, yield, or take.
            let crowded = {
                let mut state = self.state();
                if state.outbox.is_empty() {
                    false
                } else if state.pending.len() > 1 {
                    true
                } else {
                    return Self::drain(&mut state);
                }
            };
            if crowded {
                tokio::task::yield_now().await;
                let frames = self.take_queued();
                if !frames.is_empty() {
                    return frames;
                }
            } else {
                self.queued.notified().await;
            }
        }
    }

    /// Everything queued now, oldest first; the outbox is left empty.
    pub fn take_queued(&self) -> VecDeque<String> {
        Self::drain(&mut self.state())
    }

    fn drain(state: &mut LinkState) -> VecDeque<String> {
        let frames = std::mem::take(&mut state.outbox);
        metrics::gauge!(OUTBOX_FRAMES).decrement(frames.len() as f64);
        frames
    }

    fn state(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One of the device's call slots, if any is free.
    pub fn try_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.inflight.clone().try_acquire_owned().ok()
    }

    /// Queue `request` and register for its answer. Fails if the link is closed or
    /// its outbox is full; nothing is sent then.
    pub fn forward(&self, request: RequestFrame) -> Result<oneshot::Receiver<Reply>, CoreError> {
        let (tx, rx) = oneshot::channel();
        let id = request.id.clone();
        let mut state = self.state();
        if let Some(reason) = &state.closed {
            return Err(reason.clone());
        }
        // Enqueue while holding the lock, so `close` cannot slip between the check
        // and the send: after `close` returns, nothing new is queued.
        if !state.enqueue(Frame::Request(request).to_text()) {
            return Err(CoreError::OutboxFull);
        }
        state.pending.insert(id, tx);
        drop(state);
        self.queued.notify_one();
        Ok(rx)
    }

    /// Ask the extension to abort a forwarded request (docs/protocol.md, "Cancellation"). Fire and
    /// forget: the ack is a response with an id nobody waits for, and is ignored.
    pub fn send_cancel(&self, rpc_id: &str) {
        let mut state = self.state();
        if state.closed.is_some() {
            return;
        }
        let request = RequestFrame::new(
            format!("cancel-{rpc_id}"),
            methods::CANCEL,
            Some(json!({ "rpc_id": rpc_id })),
        );
        if state.enqueue(Frame::Request(request).to_text()) {
            drop(state);
            self.queued.notify_one();
        }
    }

    /// Deliver an answer (called by the connection task). Unknown ids (late replies,
    /// cancel acks) are ignored; returns whether someone was waiting.
    pub fn complete(&self, id: &str, reply: Reply) -> bool {
        match self.state().pending.remove(id) {
            Some(tx) => {
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }

    /// Stop waiting for `id` (after a cancel grace ran out); a late answer is dropped.
    pub fn forget(&self, id: &str) {
        self.state().pending.remove(id);
    }

    /// Close the link: refuse new requests and fail every waiter with `reason`.
    pub fn close(&self, reason: CoreError) {
        let pending = {
            let mut state = self.state();
            if state.closed.is_some() {
                return;
            }
            state.closed = Some(reason.clone());
            std::mem::take(&mut state.pending)
        };
        for (_, tx) in pending {
            let _ = tx.send(Err(reason.clone()));
        }
        self.closed.cancel();
    }

    /// Why the link closed (or a generic disconnect if it has not).
    pub fn close_reason(&self) -> CoreError {
        self.state()
            .closed
            .clone()
            .unwrap_or_else(|| reason_for_close(None))
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves when the link closes.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }
}

/// The error callers see when a device's socket ends with `close`.
pub fn reason_for_close(close: Option<latchkey_protocol::CloseCode>) -> CoreError {
    use latchkey_protocol::CloseCode;
    match close {
        Some(CloseCode::Revoked) => CoreError::DeviceRevoked,
        Some(CloseCode::Expired) => CoreError::DeviceExpired,
        Some(CloseCode::GoingAway | CloseCode::ServiceRestart) => CoreError::ShuttingDown,
        _ => CoreError::BrowserDisconnected,
    }
}

/// Why the sessions of a connection that ended with `close` (ours, if we sent
/// one) ended: the same story [`reason_for_close`] tells their calls in flight.
pub fn session_end_reason(close: Option<latchkey_protocol::CloseCode>) -> EndReason {
    match reason_for_close(close) {
        CoreError::DeviceRevoked => EndReason::DeviceRevoked,
        CoreError::DeviceExpired => EndReason::DeviceExpired,
        CoreError::ShuttingDown => EndReason::ServerShuttingDown,
        _ => EndReason::BrowserDisconnected,
    }
}

/// A JSON value as raw text (for results that did not come straight off a socket).
pub fn raw<T: serde::Serialize + ?Sized>(value: &T) -> RawResult {
    // Our values always serialise (map keys are strings); `null` is the fallback.
    RawResult::Owned(
        serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn close_fails_waiters_and_refuses_new_requests() {
        let link = DeviceLink::new("d", "t", 8);
        let waiter = link
            .forward(RequestFrame::new("a", "tool.x", None))
            .expect("forward");
        assert_eq!(link.next_frames().await.len(), 1);
        link.close(CoreError::DeviceRevoked);
        let reply = waiter.await.expect("answered");
        assert_eq!(reply.map(|_| ()), Err(CoreError::DeviceRevoked));
        let refused = link.forward(RequestFrame::new("b", "tool.x", None));
        assert_eq!(refused.map(|_| ()), Err(CoreError::DeviceRevoked));
        assert!(link.take_queued().is_empty(), "nothing queued after close");
    }

    #[test]
    fn a_result_is_a_slice_of_its_frame_and_serialises_as_itself() {
        let frame = Text::from(r#"{"id":"7","result":{"a":[1,"x\"y"]}}"#);
        let (id, value) = Frame::parse_success_raw(frame.as_str()).expect("a success");
        assert_eq!(id, "7");
        let result = RawResult::slice_of(&frame, value).expect("borrowed from the frame");
        assert!(matches!(result, RawResult::Slice { .. }));
        assert_eq!(result.get(), r#"{"a":[1,"x\"y"]}"#);
        let body = serde_json::to_string(&json!({ "result": result })).expect("serialises");
        assert_eq!(body, r#"{"result":{"a":[1,"x\"y"]}}"#);
        // A value from another text is not a slice of this frame.
        let other = serde_json::from_str::<&RawValue>("[1]").expect("json");
        assert!(RawResult::slice_of(&frame, other).is_none());
    }

    #[tokio::test]
    async fn frames_queued_meanwhile_are_taken_at_once_in_order_up_to_the_capacity() {
        let link = DeviceLink::new("d", "t", OUTBOX_CAPACITY + 1);
        let mut waiters = Vec::new();
        for n in 0..OUTBOX_CAPACITY {
            waiters.push(
                link.forward(RequestFrame::new(n.to_string(), "tool.x", None))
                    .expect("queued"),
            );
        }
        let full = link.forward(RequestFrame::new("over", "tool.x", None));
        assert_eq!(full.map(|_| ()), Err(CoreError::OutboxFull));
        let frames = link.next_frames().await;
        let ids: Vec<String> = frames
            .iter()
            .map(|f| match Frame::parse(f) {
                Ok(Frame::Request(r)) => r.id,
                other => panic!("not a request: {other:?}"),
            })
            .collect();
        let expected: Vec<String> = (0..OUTBOX_CAPACITY).map(|n| n.to_string()).collect();
        assert_eq!(ids, expected);
        // The refused request left nothing behind, and the drained outbox has room.
        assert!(link.take_queued().is_empty());
        link.send_cancel("0");
        let cancel = link.next_frames().await;
        assert_eq!(cancel.len(), 1);
        assert!(cancel[0].contains(r#""rpc_id":"0""#), "{}", cancel[0]);
    }

    /// Two callers runnable together while a call is in flight: their frames leave
    /// in one batch. On one worker, tokio runs the writer woken by the first caller
    /// before the second caller unless the writer yields.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn callers_runnable_together_under_load_share_one_write() {
        let link = DeviceLink::new("d", "t", 8);
        let _in_flight = link
            .forward(RequestFrame::new("0", "tool.x", None))
            .expect("forward");
        assert_eq!(link.next_frames().await.len(), 1);
        let writer = {
            let link = link.clone();
            tokio::spawn(async move { link.next_frames().await.len() })
        };
        let callers = {
            let link = link.clone();
            tokio::spawn(async move {
                let mut both = Vec::new();
                for id in ["1", "2"] {
                    let link = link.clone();
                    both.push(tokio::spawn(async move {
                        link.forward(RequestFrame::new(id, "tool.x", None))
                    }));
                }
                for caller in both {
                    let _waiter = caller.await.expect("caller").expect("forward");
                }
            })
        };
        callers.await.expect("callers");
        assert_eq!(
            writer.await.expect("writer"),
            2,
            "one write for both frames"
        );
    }

    #[tokio::test]
    async fn answers_reach_their_waiter_only() {
        let link = DeviceLink::new("d", "t", 8);
        let a = link
            .forward(RequestFrame::new("a", "tool.x", None))
            .expect("a");
        let b = link
            .forward(RequestFrame::new("b", "tool.x", None))
            .expect("b");
        link.complete("b", Ok(raw(&json!(2))));
        link.complete("zzz", Ok(raw(&json!(0))));
        link.complete("a", Ok(raw(&json!(1))));
        let text = |r: Reply| r.map(|v| v.get().to_string()).ok();
        assert_eq!(text(a.await.expect("a")), Some("1".to_string()));
        assert_eq!(text(b.await.expect("b")), Some("2".to_string()));
    }
}
