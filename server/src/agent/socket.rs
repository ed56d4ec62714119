//! `GET /v1/agent`: the agent WebSocket. Same envelope as the extension protocol:
//! requests `browser.list`, `session.start|stop|list`, `tool.*` (with `session_id` in
//! params) and `cancel` (`{rpc_id}`), each answered once; session events are pushed as
//! event frames. Requests run concurrently, as futures inside the socket's one task;
//! calls of one session still serialise. Closing the socket cancels every call it has
//! in flight.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures_util::future::{AbortHandle, Abortable, abortable};
use futures_util::stream::SplitSink;
use futures_util::{FutureExt, SinkExt, StreamExt};
use latchkey_protocol::ErrorCode;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::answers::Answers;
use super::requests::{Answering, EventOut, Inbound, answer, inbound, reply};
use super::socket_slots::{SocketLimit, SocketSlot};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::{AgentPrincipal, Principal};
use crate::socket::{Inbound as Received, Outbound, ReadError, Socket};
use crate::telemetry::metrics as telemetry;
use crate::transport::ws_socket::WsSocket;
use crate::transport::ws_upgrade::{NotAnUpgrade, WsUpgrade};

#[utoipa::path(
    get,
    operation_id = "agent_socket",
    path = "/v1/agent",
    tag = "sessions",
    summary = "The agent WebSocket",
    responses((status = 101, description = "Switching to the agent socket: request and event frames (docs/agents.md)."), crate::openapi::refusals::AgentSocket),
)]
pub async fn upgrade(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    ws: Result<WsUpgrade, NotAnUpgrade>,
) -> Response {
    // A plain request here is refused with the API's error body, never axum's
    // text.
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => {
            return ApiError::invalid(format!("/v1/agent is a WebSocket endpoint: {rejection}"))
                .into_response();
        }
    };
    let limits = &state.config.limits;
    let slot = match state.agent_sockets.acquire(
        &p.token_id,
        limits.max_agent_sockets_per_token,
        limits.max_agent_sockets,
    ) {
        Ok(slot) => slot,
        Err(limit) => {
            telemetry::refused("capacity_reached");
            let message = match limit {
                SocketLimit::PerToken(max) => {
                    format!("this token already has {max} agent sockets open")
                }
                SocketLimit::PerNode(max) => {
                    format!("this gateway node has {max} agent sockets open; try another or later")
                }
            };
            return ApiError::new(ErrorCode::CapacityReached, message)
                .retry_after(5)
                .into_response();
        }
    };
    let span = info_span!("agent_socket", tenant = %p.tenant_id, token = %p.token_id);
    ws.accept(&state.clone(), None, move |socket| {
        serve(WsSocket::new(socket), state, p, slot).instrument(span)
    })
}

/// Session events waiting for the socket's loop; beyond this a session's event
/// pusher waits, as it would on a slow socket.
const EVENT_BACKLOG: usize = 64;

/// The socket's write half. Only the socket's own loop writes, so answers that are
/// ready together go out with one flush, and no lock or task hop is needed.
struct Writer<S: Socket> {
    sink: SplitSink<S, Outbound>,
    /// How long one write may take before the agent counts as no longer reading.
    stall: Duration,
}

/// Why frames could not be written: the socket is finished either way.
#[derive(Debug)]
enum WriteFailed {
    Closed,
    Stalled,
}

impl<S: Socket> Writer<S> {
    async fn write(&mut self, frames: impl IntoIterator<Item = String>) -> Result<(), WriteFailed> {
        let write = crate::transport::write_text_frames(&mut self.sink, frames, "agent");
        match tokio::time::timeout(self.stall, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(WriteFailed::Closed),
            Err(_) => {
                telemetry::refused("write_stalled");
                debug!("agent stopped reading: socket dropped");
                Err(WriteFailed::Stalled)
            }
        }
    }

    async fn one(&mut self, text: String) -> Result<(), WriteFailed> {
        self.write(std::iter::once(text)).await
    }

    /// Write out whatever the WebSocket layer queued on its own (a Pong).
    async fn flush(&mut self) -> Result<(), WriteFailed> {
        self.write(std::iter::empty()).await
    }
}

async fn serve<S: Socket>(socket: S, state: AppState, p: Principal, _slot: SocketSlot) {
    metrics::gauge!(telemetry::AGENT_SOCKETS_OPEN).increment(1.0);
    if let Err(panic) = std::panic::AssertUnwindSafe(serve_socket(socket, state, p))
        .catch_unwind()
        .await
    {
        telemetry::task_panicked("agent_socket", panic.as_ref());
    }
    metrics::gauge!(telemetry::AGENT_SOCKETS_OPEN).decrement(1.0);
}

/// The socket's loop. Requests are answered concurrently inside this one task (a
/// set of futures, not a task each): an answer from the browser wakes this task
/// directly, and answers that are ready together share one write.
async fn serve_socket<S: Socket>(socket: S, state: AppState, p: Principal) {
    let (sink, mut stream) = socket.split();
    let mut writer = Writer {
        sink,
        stall: Duration::from_millis(state.config.limits.write_stall_timeout_ms),
    };
    let (frames, mut event_frames) = mpsc::channel(EVENT_BACKLOG);
    let events = EventOut {
        frames,
        ended: CancellationToken::new(),
    };
    let closing = state.closing.clone();
    let shutdown_close = state.shutdown_close();
    // Requests still being answered, by the agent's id. An id leaves the map when
    // its answer is written or when `cancel` answers it: whichever comes first
    // answers, so every request is answered exactly once.
    let mut running: HashMap<String, AbortHandle> = HashMap::new();
    let mut answering: Answers<Abortable<Answering<'_>>> = Answers::default();
    // Set when the agent broke the WebSocket protocol: the code to close with.
    let mut violation = None;
    // Set when the token this socket runs on was revoked or expired.
    let mut token_end = None;
    let mut write_failed = false;
    // Made once: the loop's turns only poll it.
    let token_ended = p.lease.ended();
    tokio::pin!(token_ended);
    loop {
        let written = tokio::select! {
            _ = closing.cancelled() => break,
            end = &mut token_ended => {
                token_end = Some(end);
                break;
            }
            Some(first) = answering.next(), if !answering.is_empty() => {
                let mut answers = Vec::new();
                let mut finished = Some(first);
                while let Some(done) = finished {
                    // An aborted request was answered by its cancel.
                    if let Ok((id, result)) = done
                        && running.remove(&id).is_some()
                    {
                        answers.push(reply(&id, result));
                    }
                    finished = answering.next().now_or_never().flatten();
                }
                writer.write(answers).await
            }
            Some(frame) = event_frames.recv() => writer.one(frame).await,
            msg = stream.next() => {
                let text = match msg {
                    Some(Ok(Received::Text(t))) => {
                        telemetry::frame("in", "agent", t.len());
                        t
                    }
                    Some(Err(e)) => {
                        if let ReadError::Protocol(code) = e {
                            violation = Some(code);
                        }
                        break;
                    }
                    Some(Ok(Received::Close)) => {
                        crate::transport::finish_peer_close(&mut stream).await;
                        break;
                    }
                    None => break,
                    // The Pong the WebSocket layer queued goes out now, within the
                    // stall bound: an agent that pings without reading stalls this
                    // write, and nothing more is read from it meanwhile, so its
                    // Pongs cannot pile up (docs/security.md).
                    Some(Ok(Received::Ping)) => {
                        if writer.flush().await.is_err() {
                            write_failed = true;
                            break;
                        }
                        continue;
                    }
                    Some(Ok(_)) => continue,
                };
                match inbound(&state, &p, text.as_str(), &mut running) {
                    Inbound::Answer(frames) => writer.write(frames).await,
                    Inbound::Run(request) => {
                        let id = request.id.clone();
                        let (answer, abort) = abortable(answer(&state, &p, request, &events));
                        answering.push(answer);
                        running.insert(id, abort);
                        Ok(())
                    }
                }
            }
        };
        if written.is_err() {
            write_failed = true;
            break;
        }
    }
    // The agent is gone, its token ended, or the server is closing: what is still
    // in flight is dropped, which cancels it (a forwarded call sends `cancel` to the
    // browser). When the token ended or the server shuts down, each request still
    // gets its one answer (the token's code, or `server_shutting_down`), then the
    // close (4006/4007, or 1001; 1012 in cluster mode).
    let ending = match token_end {
        _ if write_failed => None,
        Some(end) => Some((end.error(), end.close_code())),
        None if closing.is_cancelled() => Some((
            crate::core_error::CoreError::ShuttingDown.into_body(),
            shutdown_close,
        )),
        None => None,
    };
    let mut last = Vec::new();
    if let Some((error, _)) = &ending {
        last.extend(
            running
                .drain()
                .map(|(id, _)| reply(&id, Err(error.clone()))),
        );
    }
    drop(answering);
    let close_with = ending.map(|(_, code)| code).or(violation);
    if let Some(code) = close_with {
        let _ = writer.write(last).await;
        let _ = tokio::time::timeout(writer.stall, writer.sink.send(Outbound::Close(code))).await;
    }
    events.ended.cancel();
    debug!("agent socket closed");
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod tests;
