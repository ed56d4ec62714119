//! The task that owns one device's WebSocket: handshake, liveness, grant checks,
//! and closing with the right code when it is revoked, expires, is replaced or the
//! server shuts down.
//!
//! Split by phase: [`start`] (grant re-check and handshake), [`serve`] (the online
//! loop and the device's frames), and here the connection itself, its writes and
//! its ending.

mod person;
mod serve;
mod start;
#[cfg(test)]
mod tests;

use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{FutureExt, SinkExt, StreamExt};
use latchkey_protocol::{CloseCode, EndReason, Frame};
use tokio::time::timeout;
use tracing::{Instrument, info, info_span};

use crate::audit::{Event, Priority, action};
use crate::core::Core;
use crate::core_error::CoreError;
use crate::devices::ending::End;
use crate::devices::link::{DeviceLink, reason_for_close, session_end_reason};
use crate::devices::registry::Registration;
use crate::socket::{Inbound, Outbound, Socket, Text};
use crate::store::DeviceRecord;
use crate::telemetry::metrics as telemetry;
use person::KILL_SWITCH;

/// What a device connection starts from: moved into the upgrade callback as one
/// pointer, because that callback waits in the upgrade task until the 101 is out.
pub struct Accepted {
    pub core: Core,
    /// Authenticated before the 101.
    pub device: DeviceRecord,
    /// The client address (through trusted proxies), for the audit trail.
    pub peer: IpAddr,
    /// [`DeviceRegistry::grant_changes`](crate::devices::registry::DeviceRegistry::grant_changes)
    /// before the device was authenticated.
    pub grant_changes: u64,
    /// What the replacement-loop guard counts this device's replacements under
    /// ([`DeviceRegistry::note_replacement`](crate::devices::registry::DeviceRegistry::note_replacement)).
    pub guard_key: String,
    /// The first frame, when it was read before the device was known (local mode:
    /// the handshake says which browser profile it is).
    pub first_frame: Option<Text>,
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
pub fn run<S: Socket>(
    socket: S,
    accepted: Box<Accepted>,
) -> impl Future<Output = ()> + Send + 'static {
    let Accepted {
        core: state,
        device,
        peer,
        grant_changes,
        guard_key,
        first_frame,
    } = *accepted;
    let span = info_span!("device_conn", tenant = %device.tenant_id, device = %device.id, %peer);
    let registration = state
        .registry
        .register(&device.id, &device.tenant_id, state.clock.now_ms());
    if registration.replaced {
        state.registry.note_replacement(&guard_key);
    }
    let conn = Box::new(Connection {
        socket,
        state,
        device,
        registration,
        handshaken: false,
        link: None,
        peer,
        grant_changes,
        first_frame,
        kill_switch: false,
    });
    conn.run_to_end().instrument(span)
}

/// A write that cannot complete within `stall` ends the connection: a device that
/// stops reading cannot hold its task (the Close frame could not be written either,
/// so the socket is just dropped).
///
/// A combinator, not an `async fn`: an async fn would keep `write` twice, as its
/// argument and as the timeout's, and the largest write future sizes the
/// connection's future for its whole life (see [`run`]).
fn stall_bounded<E>(
    stall: Duration,
    write: impl Future<Output = Result<(), E>>,
) -> impl Future<Output = Result<(), End>> {
    timeout(stall, write).map(|written| match written {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::gone("send failed")),
        Err(_) => {
            telemetry::refused("write_stalled");
            Err(End::gone("write stalled: peer not reading"))
        }
    })
}

struct Connection<S> {
    socket: S,
    state: Core,
    device: DeviceRecord,
    registration: Registration,
    handshaken: bool,
    /// After the handshake: the link callers use (its outbox is written here).
    link: Option<Arc<DeviceLink>>,
    /// The client address (through trusted proxies), for the audit trail.
    peer: IpAddr,
    /// See [`Accepted::grant_changes`].
    grant_changes: u64,
    /// See [`Accepted::first_frame`]; taken by the handshake.
    first_frame: Option<Text>,
    /// The person pressed "Stop all agents" (`latchkey.kill_switch`): the
    /// connection's end, and its sessions' ends, say so.
    kill_switch: bool,
}

impl<S: Socket> Connection<S> {
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
        let why = if self.kill_switch {
            KILL_SWITCH
        } else {
            end.why
        };
        info!(why, close = ?end.close.map(CloseCode::code), "device connection ended");
        // Fail every waiting caller at once, before the close handshake.
        if let Some(link) = &self.link {
            link.close(if self.kill_switch {
                CoreError::SessionEnded(EndReason::KillSwitch)
            } else {
                reason_for_close(end.close)
            });
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
            let reason = if self.kill_switch {
                EndReason::KillSwitch
            } else {
                session_end_reason(end.close)
            };
            let ended = state.sessions.purge_device(&device.id, reason);
            if ended > 0 {
                info!(sessions = ended, "sessions ended with the connection");
            }
            // Sessions started through this socket from other replicas end too.
            state.peers.device_gone(
                &device.tenant_id,
                &device.id,
                self.registration.connected_at_ms,
                reason,
            );
        }
        if self.handshaken {
            metrics::gauge!(telemetry::DEVICES_CONNECTED).decrement(1.0);
            metrics::counter!(telemetry::DEVICE_DISCONNECTS, "reason" => why).increment(1);
            let last_seen = self.registration.state.last_seen_ms.load(Ordering::Relaxed);
            Box::pin(state.audit.record_seen(
                Priority::Background,
                &device.id,
                last_seen,
                None,
                Event::by_device(
                    &device.tenant_id,
                    &device.id,
                    action::DEVICE_DISCONNECT,
                    why,
                    end.close.map(|c| format!("close {}", c.code())),
                ),
            ))
            .await;
        }
    }

    async fn send_frame(&mut self, frame: Frame) -> Result<(), End> {
        self.send_text(frame.to_text()).await
    }

    /// Write one message, within the stall bound.
    async fn send_text(&mut self, text: String) -> Result<(), End> {
        self.send_message(Outbound::Text(text)).await
    }

    /// Write queued frames with one flush: under load several calls' requests leave
    /// in one write, not one each. The stall bound covers the whole batch.
    /// (These three build their futures rather than being `async fn`s, for the
    /// reason [`stall_bounded`] gives.)
    fn send_batch(
        &mut self,
        frames: std::collections::VecDeque<String>,
    ) -> impl Future<Output = Result<(), End>> + '_ {
        let stall = Duration::from_millis(self.limits().write_stall_timeout_ms);
        let write = crate::transport::write_text_frames(&mut self.socket, frames, "device");
        stall_bounded(stall, write)
    }

    fn send_message(&mut self, message: Outbound) -> impl Future<Output = Result<(), End>> + '_ {
        let stall = Duration::from_millis(self.limits().write_stall_timeout_ms);
        stall_bounded(stall, self.socket.send(message))
    }

    /// Write out what the WebSocket layer queued on its own (the Pong to a Ping),
    /// within the stall bound. Called on every Ping: a device that pings without
    /// reading stalls here, and nothing more is read from it meanwhile, so its
    /// Pongs cannot pile up (docs/security.md).
    fn flush_queued(&mut self) -> impl Future<Output = Result<(), End>> + '_ {
        let stall = Duration::from_millis(self.limits().write_stall_timeout_ms);
        stall_bounded(stall, self.socket.flush())
    }

    /// Send a Close and give the peer a moment to answer it (docs/protocol.md, "Pairing and
    /// renewal": 1 s bound).
    async fn close(&mut self, code: CloseCode) {
        let bound = Duration::from_secs(1);
        if timeout(bound, self.socket.send(Outbound::Close(code)))
            .await
            .is_err()
        {
            return;
        }
        if let Some(since) = self.registration.state.revoked_since() {
            metrics::histogram!(telemetry::REVOKE_CLOSE).record(since.elapsed().as_secs_f64());
        }
        let _ = timeout(bound, async {
            while let Some(Ok(m)) = self.socket.next().await {
                if m == Inbound::Close {
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
}
