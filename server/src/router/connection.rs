//! The task that owns one device's WebSocket: handshake, liveness, grant checks,
//! and closing with the right code when it is revoked, expires, is replaced or the
//! server shuts down.

use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::{FutureExt, SinkExt};
use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::handshake::HandshakeParams;
use latchkey_protocol::{
    CloseCode, ErrorBody, ErrorCode, ErrorFrame, Frame, SuccessFrame, methods,
};
use tokio::time::{Instant, interval, sleep, timeout};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::app::AppState;
use crate::audit::{self, Event, Priority, action};
use crate::router::ending::{End, close_signal, read_failed};
use crate::router::handshake;
use crate::router::link::{DeviceLink, RawResult, reason_for_close};
use crate::router::registry::{AttachError, Registration};
use crate::router::sessions::{Abort, end_session};
use crate::store::DeviceRecord;
use crate::telemetry::metrics as telemetry;

/// What a device connection starts from: moved into the upgrade callback as one
/// pointer, because that callback waits in the upgrade task until the 101 is out.
pub struct Accepted {
    pub state: AppState,
    /// Authenticated before the 101.
    pub device: DeviceRecord,
    /// The client address (through trusted proxies), for the audit trail.
    pub peer: IpAddr,
}

/// Run a device connection to its end.
///
/// Not an `async fn`, on purpose: an idle device's task is a large part of its
/// memory, and a task's future keeps an async fn's arguments in a slot of their own
/// for its whole life, beside every copy moved out of them (rustc does not overlap a coroutine's
/// captured arguments with its locals). Here the connection is moved to the heap
/// once, before the future exists, and the future holds a pointer to it. Measured
/// in a release build (docs/benchmarks.md): `run` as an async fn made a 3,888-byte
/// future; the device task's allocation went from 4.6 KB to 1.5 KB per device, plus
/// the 0.85 KB connection on the heap.
pub fn run(
    socket: WebSocket,
    accepted: Box<Accepted>,
) -> impl Future<Output = ()> + Send + 'static {
    let Accepted {
        state,
        device,
        peer,
    } = *accepted;
    let span = info_span!("device_conn", tenant = %device.tenant_id, device = %device.id, %peer);
    let registration = state
        .registry
        .register(&device.id, &device.tenant_id, state.clock.now_ms());
    let conn = Box::new(Connection {
        socket,
        state,
        device,
        registration,
        handshaken: false,
        link: None,
        peer,
    });
    conn.run_to_end().instrument(span)
}

/// A write that cannot complete within `stall` ends the connection: a device that
/// stops reading cannot hold its task (the Close frame could not be written either,
/// so the socket is just dropped).
async fn stall_bounded(
    stall: Duration,
    write: impl std::future::Future<Output = Result<(), axum::Error>>,
) -> Result<(), End> {
    match timeout(stall, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::gone("send failed")),
        Err(_) => {
            telemetry::refused("write_stalled");
            Err(End::gone("write stalled: peer not reading"))
        }
    }
}

struct Connection {
    socket: WebSocket,
    state: AppState,
    device: DeviceRecord,
    registration: Registration,
    handshaken: bool,
    /// After the handshake: the link callers use (its outbox is written here).
    link: Option<Arc<DeviceLink>>,
    /// The client address (through trusted proxies), for the audit trail.
    peer: IpAddr,
}

impl Connection {
    fn limits(&self) -> &crate::config::Limits {
        &self.state.config.limits
    }

    /// Drive, then close with the right code and write the bookkeeping.
    async fn run_to_end(mut self: Box<Self>) {
        // A bug in one connection must not take others with it, nor leave this
        // device registered: a panic ends this connection like an internal error.
        let end = match AssertUnwindSafe(self.drive()).catch_unwind().await {
            Ok(end) => end,
            Err(panic) => {
                telemetry::task_panicked("device_connection", panic.as_ref());
                End::close(CloseCode::InternalError, "internal error")
            }
        };
        info!(why = end.why, close = ?end.close.map(CloseCode::code), "device connection ended");
        // Fail every waiting caller at once, before the close handshake.
        if let Some(link) = &self.link {
            link.close(reason_for_close(end.close));
        }
        // The ending's futures are boxed, like the start's: an idle connection's
        // task holds only the serving loop's state (see `drive`).
        if let Some(code) = end.close {
            Box::pin(self.close(code)).await;
        } else if end.peer_closed {
            Box::pin(crate::transport::finish_peer_close(&mut self.socket)).await;
        }
        let state = &self.state;
        let device = &self.device;
        state
            .registry
            .unregister(&device.id, self.registration.generation);
        if self.link.is_some() {
            let ended = state.sessions.purge_device(&device.id, end.why);
            if ended > 0 {
                info!(sessions = ended, "sessions ended with the connection");
            }
        }
        if self.handshaken {
            metrics::gauge!(telemetry::DEVICES_CONNECTED).decrement(1.0);
            metrics::counter!(telemetry::DEVICE_DISCONNECTS, "reason" => end.why).increment(1);
            let last_seen = self.registration.state.last_seen_ms.load(Ordering::Relaxed);
            Box::pin(state.audit.record_seen(
                Priority::Background,
                &device.id,
                last_seen,
                Event {
                    tenant_id: &device.tenant_id,
                    actor: audit::device_ref(&device.id),
                    action: action::DEVICE_DISCONNECT,
                    target: audit::device_ref(&device.id),
                    outcome: end.why,
                    detail: end.close.map(|c| format!("close {}", c.code())),
                },
            ))
            .await;
        }
    }

    async fn send_frame(&mut self, frame: Frame) -> Result<(), End> {
        self.send_text(frame.to_text()).await
    }

    /// Write one message, within the stall bound.
    async fn send_text(&mut self, text: String) -> Result<(), End> {
        self.send_message(Message::Text(text.into())).await
    }

    /// Write queued frames with one flush: under load several calls' requests leave
    /// in one write, not one each. The stall bound covers the whole batch.
    async fn send_batch(&mut self, frames: std::collections::VecDeque<String>) -> Result<(), End> {
        let stall = Duration::from_millis(self.limits().write_stall_timeout_ms);
        let socket = &mut self.socket;
        let write = async move {
            for text in frames {
                telemetry::frame("out", "device", text.len());
                socket.feed(Message::Text(text.into())).await?;
            }
            socket.flush().await
        };
        stall_bounded(stall, write).await
    }

    async fn send_message(&mut self, message: Message) -> Result<(), End> {
        let stall = Duration::from_millis(self.limits().write_stall_timeout_ms);
        stall_bounded(stall, self.socket.send(message)).await
    }

    /// Send a Close and give the peer a moment to answer it (contract §2.5: 1 s bound).
    async fn close(&mut self, code: CloseCode) {
        let frame = CloseFrame {
            code: code.code(),
            reason: code.reason().into(),
        };
        let bound = Duration::from_secs(1);
        if timeout(bound, self.socket.send(Message::Close(Some(frame))))
            .await
            .is_err()
        {
            return;
        }
        if let Some(since) = self.registration.state.revoked_since() {
            metrics::histogram!(telemetry::REVOKE_CLOSE).record(since.elapsed().as_secs_f64());
        }
        let _ = timeout(bound, async {
            while let Some(Ok(m)) = self.socket.recv().await {
                if matches!(m, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
    }

    fn pending_close(&self) -> Option<CloseCode> {
        *self.registration.close.borrow()
    }

    /// The connection's life: start (grant re-check, handshake, bookkeeping), then
    /// serve. The start runs once and its futures are large (store reads, the
    /// audit commit, the handshake's timers), so it is boxed and freed before
    /// serving: a task's future is as large as its largest state, and an idle
    /// device's task should hold only the serving loop (measured with heaptrack in
    /// docs/benchmarks.md).
    async fn drive(&mut self) -> End {
        if let Err(end) = Box::pin(self.start()).await {
            return end;
        }
        self.serve().await
    }

    /// Everything up to the handshake's answer and the connect audit event.
    async fn start(&mut self) -> Result<(), End> {
        if let Some(code) = self.pending_close() {
            return Err(End::close(code, "closed before start"));
        }
        // Re-check the grant after the upgrade (contract §2.4).
        match self
            .state
            .store
            .device(&self.device.tenant_id, &self.device.id)
            .await
        {
            Ok(Some(d)) if d.is_live(self.state.clock.now_ms()) => self.device = d,
            Ok(_) => {
                return Err(End::close(
                    CloseCode::Unauthorized,
                    "grant gone after upgrade",
                ));
            }
            Err(e) => {
                warn!(error = %e, "grant re-check failed after upgrade");
                return Err(End::close(
                    CloseCode::Unauthorized,
                    "store unavailable at upgrade",
                ));
            }
        }
        let handshake_timeout = Duration::from_millis(self.limits().handshake_timeout_ms);
        let mut close_rx = self.registration.close.clone();
        let shutdown = self.state.closing.clone();
        let handshake = tokio::select! {
            r = tracing::Instrument::instrument(timeout(handshake_timeout, self.read_handshake()), info_span!("handshake")) => match r {
                Err(_) => return Err(End::close(CloseCode::PolicyViolation, "handshake timeout")),
                Ok(r) => r,
            },
            code = close_signal(&mut close_rx) => return Err(End::close(code, "closed during handshake")),
            _ = shutdown.cancelled() => return Err(End::close(CloseCode::GoingAway, "shutdown")),
        };
        let (id, params) = handshake?;
        let result = handshake::result();
        // Everything the device's answer implies is in place before the answer: its
        // browser is recorded and it is routable. Calls routed now wait in the
        // outbox, which is written only after the handshake result.
        let now = self.state.clock.now_ms();
        let browser = (
            params.browser.name.as_str(),
            params.browser.version.as_str(),
        );
        if let Err(e) = self
            .state
            .audit
            .device_seen(
                Priority::Urgent,
                &self.device.tenant_id,
                &self.device.id,
                now,
                Some(browser),
            )
            .await
        {
            debug!(error = %e, "browser info not recorded");
        }
        // A new socket is a new extension control plane: sessions bound to this
        // device from an older socket are gone (contract §3.3).
        self.state
            .sessions
            .purge_device(&self.device.id, "browser reconnected");
        let link = DeviceLink::new(
            &self.device.id,
            &self.device.tenant_id,
            self.limits().max_calls_in_flight_per_device,
        );
        match self.state.registry.attach_link(
            &self.device.id,
            self.registration.generation,
            link.clone(),
            self.limits().max_online_devices,
        ) {
            Ok(()) => {}
            Err(AttachError::Replaced) => {
                return Err(End::close(CloseCode::Replaced, "replaced during handshake"));
            }
            Err(AttachError::AtCapacity) => {
                telemetry::refused("connection_capacity_reached");
                return Err(End::close(
                    CloseCode::TryAgainLater,
                    "node at device capacity",
                ));
            }
        }
        self.link = Some(link);
        self.registration
            .state
            .online
            .store(true, Ordering::Relaxed);
        self.handshaken = true;
        metrics::gauge!(telemetry::DEVICES_CONNECTED).increment(1.0);
        self.send_frame(Frame::Success(SuccessFrame { id, result }))
            .await?;
        info!(extension_version = %params.version, protocol = %params.protocol_version, "device online");
        self.state
            .audit
            .record_with(
                Priority::Background,
                Event {
                    tenant_id: &self.device.tenant_id,
                    actor: audit::device_ref(&self.device.id),
                    action: action::DEVICE_CONNECT,
                    target: audit::device_ref(&self.device.id),
                    outcome: "ok",
                    detail: Some(format!(
                        "from {} extension {} protocol {} browser {}",
                        self.peer, params.version, params.protocol_version, params.browser.name
                    )),
                },
            )
            .await;
        Ok(())
    }

    /// Wait for the first frame and judge it (contract §3.1).
    async fn read_handshake(&mut self) -> Result<(String, HandshakeParams), End> {
        loop {
            let msg = match self.socket.recv().await {
                None => return Err(End::gone("closed before handshake")),
                Some(Err(e)) => return Err(read_failed(&e)),
                Some(Ok(m)) => m,
            };
            let text = match msg {
                Message::Text(t) => t,
                Message::Ping(_) | Message::Pong(_) => continue,
                Message::Close(_) => return Err(End::peer_closed("closed before handshake")),
                Message::Binary(_) => {
                    return Err(End::close(CloseCode::PolicyViolation, "binary first frame"));
                }
            };
            return match handshake::judge(text.as_str()) {
                Ok(accepted) => Ok(accepted),
                Err(refused) => {
                    if let Some((id, error)) = refused.reply {
                        let _ = self
                            .send_frame(Frame::Error(ErrorFrame { id, error }))
                            .await;
                    }
                    Err(End::close(CloseCode::PolicyViolation, refused.why))
                }
            };
        }
    }

    /// After the handshake: frames, liveness, expiry and close signals.
    async fn serve(&mut self) -> End {
        let limits = self.limits().clone();
        let mut close_rx = self.registration.close.clone();
        let mut clock_rx = self.state.clock.changed();
        let mut reaper = interval(Duration::from_millis(limits.reaper_interval_ms));
        reaper.reset();
        // Grants are re-read by the node's sweep (router::grant_sweep), which closes
        // this socket through the registry; here only the expiry is timed.
        let mut heartbeat_seen = false;
        let mut store_failing_since: Option<Instant> = None;
        let shutdown = self.state.closing.clone();
        let Some(link) = self.link.take() else {
            return End::close(CloseCode::InternalError, "no link after handshake");
        };
        // Armed once and re-armed only when the grant or the clock changes, so the
        // per-frame path creates no timers.
        let expiry = sleep(self.state.clock.until(self.device.expires_at));
        tokio::pin!(expiry);
        let end = loop {
            tokio::select! {
                frames = link.next_frames() => {
                    // Nothing more goes out once the link is closed (revocation).
                    if link.is_closed() {
                        frames.iter().for_each(|_| telemetry::frame_dropped("link_closed"));
                        continue;
                    }
                    if let Err(end) = self.send_batch(frames).await {
                        break end;
                    }
                }
                code = close_signal(&mut close_rx) => break End::close(code, "closed by server"),
                _ = shutdown.cancelled() => break End::close(CloseCode::GoingAway, "shutdown"),
                msg = self.socket.recv() => {
                    let msg = match msg {
                        None => break End::gone("peer went away"),
                        Some(Err(e)) => break read_failed(&e),
                        Some(Ok(m)) => m,
                    };
                    self.registration.state.last_seen_ms.store(self.state.clock.now_ms(), Ordering::Relaxed);
                    match msg {
                        Message::Text(text) => {
                            telemetry::frame("in", "device", text.len());
                            if let Err(end) = self.on_text(&text, &link, &mut heartbeat_seen).await {
                                break end;
                            }
                        }
                        Message::Close(_) => break End::peer_closed("peer closed"),
                        // Binary is ignored (§1.1); Ping is answered by the WebSocket layer.
                        Message::Binary(_) => telemetry::frame_dropped("binary"),
                        Message::Ping(_) | Message::Pong(_) => {}
                    }
                }
                _ = reaper.tick() => {
                    let silent = self.state.clock.now_ms()
                        - self.registration.state.last_seen_ms.load(Ordering::Relaxed);
                    let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                    if heartbeat_seen && silent >= ms(limits.liveness_timeout_ms) {
                        break End::close(CloseCode::IdleTimeout, "silent too long");
                    }
                    // Not even a Pong: the peer is gone without a FIN.
                    if silent >= ms(limits.silent_peer_timeout_ms) {
                        break End::close(CloseCode::IdleTimeout, "no answer to pings");
                    }
                    if silent >= ms(limits.ping_after_ms)
                        && let Err(end) = self.send_message(Message::Ping(Default::default())).await
                    {
                        break end;
                    }
                }
                _ = &mut expiry => {
                    // The grant may have been renewed since we last read it.
                    if let Some(end) = Box::pin(self.recheck_grant(&mut store_failing_since, &limits)).await {
                        break end;
                    }
                    if self.device.expires_at <= self.state.clock.now_ms() {
                        break End::close(CloseCode::Expired, "grant expired");
                    }
                    expiry.as_mut().reset(Instant::now() + self.state.clock.until(self.device.expires_at));
                }
                _ = clock_rx.changed() => {
                    expiry.as_mut().reset(Instant::now() + self.state.clock.until(self.device.expires_at));
                }
            }
        };
        // Frames still queued will never be written.
        for _ in link.take_queued() {
            telemetry::frame_dropped("link_closed");
        }
        self.link = Some(link);
        end
    }

    async fn on_text(
        &mut self,
        frame: &Utf8Bytes,
        link: &DeviceLink,
        heartbeat_seen: &mut bool,
    ) -> Result<(), End> {
        let text = frame.as_str();
        // Most frames are answers to tool calls: relay their result untouched, as a
        // slice of this frame.
        if let Some((id, result)) = Frame::parse_success_raw(text) {
            let result = RawResult::slice_of(frame, result)
                .unwrap_or_else(|| RawResult::Owned(result.to_owned()));
            if !link.complete(&id, Ok(result)) {
                telemetry::frame_dropped("unknown_id");
            }
            return Ok(());
        }
        match Frame::parse(text) {
            // Non-JSON and undecodable frames are dropped without a reply (§1.1).
            Err(e) => {
                telemetry::frame_dropped("undecodable");
                debug!(reason = e.code(), "undecodable frame dropped");
            }
            Ok(Frame::Event(event)) => match event.event.as_str() {
                methods::EVENT_HEARTBEAT => *heartbeat_seen = true,
                methods::EVENT_WINDOW_CLOSED | methods::EVENT_USER_INTERRUPT => {
                    self.on_session_event(&event.event, &event.payload);
                }
                other => {
                    crate::failpoint::panic_on_event(other);
                    debug!(event = %other, "unknown event ignored");
                }
            },
            Ok(Frame::Request(request)) => {
                // Extensions may send newer requests (e.g. `audit.request`): answer, never drop.
                let error = ErrorBody::new(
                    ErrorCode::UnknownMethod,
                    format!("{} not implemented in gateway", request.method),
                );
                // Boxed: rare, and it would otherwise size every frame's future.
                Box::pin(self.send_frame(Frame::Error(ErrorFrame {
                    id: request.id,
                    error,
                })))
                .await?;
            }
            Ok(Frame::Success(r)) => {
                if !link.complete(&r.id, Ok(crate::router::link::raw(&r.result))) {
                    telemetry::frame_dropped("unknown_id");
                }
            }
            Ok(Frame::Error(r)) => {
                if !link.complete(&r.id, Err(r.error)) {
                    telemetry::frame_dropped("unknown_id");
                }
            }
        }
        Ok(())
    }

    /// `session.window_closed` and `session.user_interrupt` (contract §6.3), for
    /// sessions of this device only; others are ignored.
    fn on_session_event(&self, event: &str, payload: &serde_json::Value) {
        let Some(session_id) = payload.get("session_id").and_then(|v| v.as_str()) else {
            return;
        };
        let Some(session) = self
            .state
            .sessions
            .get_on_device(&self.device.id, session_id)
        else {
            debug!(
                event,
                "event for a session this device does not own ignored"
            );
            return;
        };
        if event == methods::EVENT_WINDOW_CLOSED {
            // Already gone in the extension: drop it without `tool.session_stop`.
            self.state.sessions.remove(&session.id);
            session.emit(SessionEvent::WindowClosed {
                session_id: session.id.clone(),
            });
            end_session(&session, "window_closed", Abort::SessionEnding);
        } else {
            session.abort(Abort::UserInterrupt);
            session.arm_marker();
            session.emit(SessionEvent::UserInterrupt {
                session_id: session.id.clone(),
            });
        }
        info!(session = %session.id, event, "session event");
    }

    /// Re-read the grant. Revoked or expired closes; an unreadable store closes only
    /// after `store_failure_grace_ms` of consecutive failures (fail closed).
    async fn recheck_grant(
        &mut self,
        failing_since: &mut Option<Instant>,
        limits: &crate::config::Limits,
    ) -> Option<End> {
        match self
            .state
            .store
            .device(&self.device.tenant_id, &self.device.id)
            .await
        {
            Ok(Some(d)) => {
                *failing_since = None;
                let now = self.state.clock.now_ms();
                if d.revoked_at.is_some() {
                    return Some(End::close(CloseCode::Revoked, "revoked"));
                }
                if d.expires_at <= now {
                    return Some(End::close(CloseCode::Expired, "grant expired"));
                }
                self.device = d;
                None
            }
            Ok(None) => Some(End::close(CloseCode::Revoked, "device gone")),
            Err(e) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                warn!(error = %e, "grant re-check failed");
                if since.elapsed() >= Duration::from_millis(limits.store_failure_grace_ms) {
                    Some(End::close(
                        CloseCode::Unauthorized,
                        "store unreadable: failing closed",
                    ))
                } else {
                    None
                }
            }
        }
    }
}
