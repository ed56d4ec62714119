//! A device connection once it is online: frames both ways, liveness, expiry and
//! close signals, and the device's events.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::additions;
use latchkey_protocol::{CloseCode, ErrorBody, ErrorCode, ErrorFrame, Frame, methods};
use tokio::time::{Instant, interval, sleep};
use tracing::{debug, warn};

use super::Connection;
use crate::core_error::CoreError;
use crate::devices::ending::{End, close_signal, read_failed};
use crate::devices::grant::Verdict;
use crate::devices::link::{DeviceLink, RawResult};
use crate::devices::session_events;
use crate::socket::{Inbound, Outbound, Socket, Text};
use crate::telemetry::metrics as telemetry;

impl<S: Socket> Connection<S> {
    /// After the handshake: frames, liveness, expiry and close signals.
    pub(super) async fn serve(&mut self) -> End {
        // Limits are read from the shared config where they are used, never copied
        // into this future: it lives as long as the connection, so every byte of it
        // is a byte per idle device (docs/benchmarks.md).
        let mut close_rx = self.registration.close.clone();
        let mut clock_rx = self.state.clock.changed();
        let mut reaper = interval(Duration::from_millis(self.limits().reaper_interval_ms));
        reaper.reset();
        // Grants are re-read by the node's sweep (devices::grant_sweep), which closes
        // this socket through the registry; here only the expiry is timed.
        let mut heartbeat_seen = false;
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
                _ = shutdown.cancelled() => break End::close(self.state.shutdown_close(), "shutdown"),
                msg = self.socket.next() => {
                    let msg = match msg {
                        None => break End::gone("peer went away"),
                        Some(Err(e)) => break read_failed(e),
                        Some(Ok(m)) => m,
                    };
                    self.registration.state.last_seen_ms.store(self.state.clock.now_ms(), Ordering::Relaxed);
                    match msg {
                        Inbound::Text(text) => {
                            telemetry::frame("in", "device", text.len());
                            if let Err(end) = self.on_text(&text, &link, &mut heartbeat_seen).await {
                                break end;
                            }
                        }
                        Inbound::Close => break End::peer_closed("peer closed"),
                        // Binary is ignored (docs/protocol.md, "Frames"); the WebSocket
                        // layer queued the Pong to a Ping, written out here.
                        Inbound::Binary => telemetry::frame_dropped("binary"),
                        Inbound::Ping => {
                            if let Err(end) = self.flush_queued().await {
                                break end;
                            }
                        }
                        Inbound::Pong => {}
                    }
                }
                _ = reaper.tick() => {
                    let silent = self.state.clock.now_ms()
                        - self.registration.state.last_seen_ms.load(Ordering::Relaxed);
                    let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                    let limits = self.limits();
                    if heartbeat_seen && silent >= ms(limits.liveness_timeout_ms) {
                        break End::close(CloseCode::IdleTimeout, "silent too long");
                    }
                    // Not even a Pong: the peer is gone without a FIN.
                    if silent >= ms(limits.silent_peer_timeout_ms) {
                        break End::close(CloseCode::IdleTimeout, "no answer to pings");
                    }
                    let ping = silent >= ms(limits.ping_after_ms);
                    if ping
                        && let Err(end) = self.send_message(Outbound::Ping).await
                    {
                        break end;
                    }
                }
                _ = &mut expiry => {
                    // The grant may have been renewed since we last read it.
                    if let Some(end) = Box::pin(self.recheck_grant()).await {
                        break end;
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
        frame: &Text,
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
            // Non-JSON and undecodable frames are dropped without a reply (docs/protocol.md,
            // "Frames").
            Err(e) => {
                telemetry::frame_dropped("undecodable");
                debug!(reason = e.code(), "undecodable frame dropped");
            }
            Ok(Frame::Event(event)) => match event.event.as_str() {
                methods::EVENT_HEARTBEAT => *heartbeat_seen = true,
                name if session_events::is_session_event(name) => {
                    self.on_session_event(name, &event.payload);
                }
                additions::EVENT_KILL_SWITCH => self.on_kill_switch(),
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
                if !link.complete(&r.id, Ok(crate::devices::link::raw(&r.result))) {
                    telemetry::frame_dropped("unknown_id");
                }
            }
            Ok(Frame::Error(r)) => {
                if !link.complete(&r.id, Err(CoreError::Browser(r.error))) {
                    telemetry::frame_dropped("unknown_id");
                }
            }
        }
        Ok(())
    }

    /// An event about one of this device's sessions: handled where the
    /// session lives, here or (in cluster mode) on the replica it was started
    /// from; an event for a session the device does not have is ignored.
    fn on_session_event(&self, event: &str, payload: &serde_json::Value) {
        let (tenant, device) = (&self.device.tenant_id, &self.device.id);
        if session_events::on_event(&self.state, tenant, device, event, payload) {
            return;
        }
        let session = payload.get("session_id").and_then(|v| v.as_str());
        if let Some(session) = session
            && self
                .state
                .peers
                .relay_event(tenant, device, session, event, payload)
        {
            return;
        }
        debug!(
            event,
            "event for a session this device does not own ignored"
        );
    }

    /// Re-read the grant when the expiry timer fires (it may have been renewed since
    /// it was read). Revoked or expired closes. A store that cannot answer leaves
    /// the grant as last read, which is past its expiry now: it closes too (no
    /// grace outlives a known expiry; the sweep's grace covers grants still good).
    async fn recheck_grant(&mut self) -> Option<End> {
        let read = self
            .state
            .store
            .device(&self.device.tenant_id, &self.device.id)
            .await;
        let now = self.state.clock.now_ms();
        let verdict = match read {
            Ok(record) => {
                let verdict = Verdict::of(record.as_ref(), now);
                if let (Verdict::Live, Some(record)) = (verdict, record) {
                    self.device = record;
                }
                verdict
            }
            Err(e) => {
                warn!(error = %e, "grant re-check failed at expiry");
                Verdict::of(Some(&self.device), now)
            }
        };
        verdict
            .close_code()
            .map(|code| End::close(code, verdict.why()))
    }
}
