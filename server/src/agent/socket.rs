//! `GET /v1/agent`: the agent WebSocket. Same envelope as the extension protocol:
//! requests `browser.list`, `session.start|stop|list`, `tool.*` (with `session_id` in
//! params) and `cancel` (`{rpc_id}`), each answered once; session events are pushed as
//! event frames. Requests run concurrently; calls of one session still serialise.
//! Closing the socket cancels every call it has in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures_util::stream::SplitSink;
use futures_util::{FutureExt, SinkExt, StreamExt};
use latchkey_protocol::agent::{SessionEvent, StartSessionRequest};
use latchkey_protocol::{ErrorBody, ErrorCode, ErrorFrame, EventFrame, Frame, RequestFrame};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, info_span};

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::router::calls::{self, ToolCall};
use crate::router::lifecycle;
use crate::router::link::RawResult;
use crate::telemetry::metrics as telemetry;

/// Open agent sockets per token and on the node, with a guard that gives the slot back.
#[derive(Debug, Clone, Default)]
pub struct AgentSocketCounter {
    inner: Arc<Mutex<SocketCounts>>,
}

#[derive(Debug, Default)]
struct SocketCounts {
    per_token: HashMap<String, usize>,
    total: usize,
}

#[derive(Debug)]
pub struct SocketSlot {
    counter: AgentSocketCounter,
    token_id: String,
}

/// Which agent-socket limit a new socket would exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketLimit {
    PerToken(usize),
    PerNode(usize),
}

impl AgentSocketCounter {
    pub fn acquire(
        &self,
        token_id: &str,
        per_token: usize,
        per_node: usize,
    ) -> Result<SocketSlot, SocketLimit> {
        let mut counts = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if counts.total >= per_node {
            return Err(SocketLimit::PerNode(per_node));
        }
        let n = counts.per_token.entry(token_id.to_string()).or_insert(0);
        if *n >= per_token {
            return Err(SocketLimit::PerToken(per_token));
        }
        *n += 1;
        counts.total += 1;
        Ok(SocketSlot {
            counter: self.clone(),
            token_id: token_id.to_string(),
        })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut counts = self.counter.inner.lock().unwrap_or_else(|p| p.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_token.get_mut(&self.token_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_token.remove(&self.token_id);
            }
        }
    }
}

pub async fn upgrade(
    State(state): State<AppState>,
    p: Principal,
    ws: WebSocketUpgrade,
) -> Response {
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
    let ws = crate::transport::websocket_settings(ws, &state.config.limits);
    let tracker = state.tasks.clone();
    ws.on_upgrade(move |socket| {
        let span = info_span!("agent_socket", tenant = %p.tenant_id, token = %p.token_id);
        tracker.track_future(serve(socket, state, p, slot).instrument(span))
    })
    .into_response()
}

/// Requests still running, by the agent's id: the task and whether it was answered.
type Running = HashMap<String, (JoinHandle<()>, Arc<AtomicBool>)>;

/// The socket's write half, shared by the tasks answering requests: each answer is
/// written by the task that produced it, with no extra hop.
#[derive(Clone)]
struct Outgoing {
    sink: Arc<tokio::sync::Mutex<SplitSink<WebSocket, Message>>>,
    /// How long one write (waiting for the writers before it included) may take.
    stall: std::time::Duration,
    /// Cancelled when the socket ends (the agent left, or stopped reading and a
    /// write stalled): everything holding a clone lets go, so the socket is dropped.
    ended: tokio_util::sync::CancellationToken,
}

/// Why an answer could not be written.
#[derive(Debug)]
enum SendError {
    Closed,
    Stalled,
}

impl Outgoing {
    async fn send(&self, text: String) -> Result<(), SendError> {
        telemetry::frame("out", "agent", text.len());
        let write = async {
            self.sink
                .lock()
                .await
                .send(Message::Text(text.into()))
                .await
        };
        match tokio::time::timeout(self.stall, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SendError::Closed),
            Err(_) => {
                if !self.ended.is_cancelled() {
                    telemetry::refused("write_stalled");
                    debug!("agent stopped reading: socket dropped");
                    self.ended.cancel();
                }
                Err(SendError::Stalled)
            }
        }
    }
}

/// The answer frame for request `id`; a result is written as the raw JSON it is,
/// in one copy into a string of the exact length.
fn reply(id: &str, result: Result<RawResult, ErrorBody>) -> String {
    match result {
        Ok(result) => {
            let id = serde_json::to_string(id).unwrap_or_else(|_| "\"\"".to_string());
            let result = result.get();
            let mut frame = String::with_capacity(id.len() + result.len() + 16);
            frame.push_str(r#"{"id":"#);
            frame.push_str(&id);
            frame.push_str(r#","result":"#);
            frame.push_str(result);
            frame.push('}');
            frame
        }
        Err(error) => Frame::Error(ErrorFrame {
            id: id.to_string(),
            error,
        })
        .to_text(),
    }
}

fn event_frame(event: &SessionEvent) -> String {
    let name = match event {
        SessionEvent::WindowClosed { .. } => "session.window_closed",
        SessionEvent::UserInterrupt { .. } => "session.user_interrupt",
        SessionEvent::SessionEnded { .. } => "session.ended",
    };
    let payload = serde_json::to_value(event).unwrap_or_default();
    Frame::Event(EventFrame {
        event: name.to_string(),
        payload,
    })
    .to_text()
}

async fn serve(socket: WebSocket, state: AppState, p: Principal, _slot: SocketSlot) {
    metrics::gauge!(telemetry::AGENT_SOCKETS_OPEN).increment(1.0);
    if let Err(panic) = std::panic::AssertUnwindSafe(serve_socket(socket, state, p))
        .catch_unwind()
        .await
    {
        telemetry::task_panicked("agent_socket", panic.as_ref());
    }
    metrics::gauge!(telemetry::AGENT_SOCKETS_OPEN).decrement(1.0);
}

async fn serve_socket(socket: WebSocket, state: AppState, p: Principal) {
    let (sink, mut stream) = socket.split();
    let out_tx = Outgoing {
        sink: Arc::new(tokio::sync::Mutex::new(sink)),
        stall: std::time::Duration::from_millis(state.config.limits.write_stall_timeout_ms),
        ended: tokio_util::sync::CancellationToken::new(),
    };
    let running: Arc<Mutex<Running>> = Arc::default();
    let closing = state.closing.clone();
    // What every request's task needs, shared: one reference count per request
    // rather than a copy of the principal's strings and of every handle in the state.
    let caller = Arc::new((state, p));
    let (state, p) = (&caller.0, &caller.1);
    // Set when the agent broke the WebSocket protocol: the code to close with.
    let mut violation = None;
    loop {
        let msg = tokio::select! {
            m = stream.next() => m,
            _ = closing.cancelled() => break,
            _ = out_tx.ended.cancelled() => break,
        };
        let text = match msg {
            Some(Ok(Message::Text(t))) => {
                telemetry::frame("in", "agent", t.len());
                t
            }
            Some(Err(e)) => {
                violation = crate::transport::close_for_read_error(&e);
                break;
            }
            Some(Ok(Message::Close(_))) => {
                crate::transport::finish_peer_close(&mut stream).await;
                break;
            }
            None => break,
            Some(Ok(_)) => continue,
        };
        let request = match Frame::parse(text.as_str()) {
            Ok(Frame::Request(r)) => r,
            Ok(_) => {
                let e = ErrorBody::new(
                    ErrorCode::InvalidRequest,
                    "only requests are accepted on the agent socket",
                );
                let _ = out_tx.send(reply("", Err(e))).await;
                continue;
            }
            Err(e) => {
                let e = ErrorBody::new(
                    ErrorCode::InvalidRequest,
                    format!("frame does not parse: {e}"),
                );
                let _ = out_tx.send(reply("", Err(e))).await;
                continue;
            }
        };
        if request.method == "cancel" {
            let target = request
                .params
                .as_ref()
                .and_then(|p| p.get("rpc_id"))
                .and_then(Value::as_str);
            let entry =
                target.and_then(|t| running.lock().unwrap_or_else(|p| p.into_inner()).remove(t));
            // Whoever claims `answered` first answers the request: exactly once.
            let claimed = entry.filter(|(_, answered)| !answered.swap(true, Ordering::SeqCst));
            let cancelled = claimed.is_some();
            if let (Some((task, _)), Some(target)) = (claimed, target) {
                // Aborting drops the call: a forwarded call sends `cancel` to the
                // extension; one not yet forwarded sends nothing.
                task.abort();
                let e = ErrorBody::new(ErrorCode::Cancelled, "cancelled by the agent");
                let _ = out_tx.send(reply(target, Err(e))).await;
            }
            let _ = out_tx
                .send(reply(
                    &request.id,
                    Ok(to_value(&json!({ "cancelled": cancelled }))),
                ))
                .await;
            continue;
        }
        // Cancels are never refused: stopping work must always be possible.
        if let Err(limited) = state.agent_limiter.check(&p.tenant_id, &p.token_id) {
            telemetry::refused("rate_limited");
            let _ = out_tx
                .send(reply(&request.id, Err(limited.error_body())))
                .await;
            continue;
        }
        let duplicate = {
            let mut map = running.lock().unwrap_or_else(|p| p.into_inner());
            map.retain(|_, (t, _)| !t.is_finished());
            map.contains_key(&request.id)
        };
        if duplicate {
            let e = ErrorBody::new(
                ErrorCode::InvalidRequest,
                "a request with this id is still running",
            );
            let _ = out_tx.send(reply(&request.id, Err(e))).await;
            continue;
        }
        let id = request.id.clone();
        let (caller, out, running_ref) = (caller.clone(), out_tx.clone(), running.clone());
        let answered = Arc::new(AtomicBool::new(false));
        let answered_by_task = answered.clone();
        // A `traceparent` in the params joins the agent's trace; it is not forwarded.
        let mut request = request;
        let traceparent = request
            .params
            .as_mut()
            .and_then(|v| v.as_object_mut())
            .and_then(|m| m.remove("traceparent"))
            .and_then(|v| v.as_str().map(str::to_string));
        let span = tracing::info_span!(
            "agent_request",
            method = telemetry::method_label(&request.method)
        );
        if let Some(tp) = &traceparent {
            crate::telemetry::otel::adopt_traceparent(&span, tp);
        }
        let task = tokio::spawn(async move {
            let request_id = request.id.clone();
            let (state, p) = &*caller;
            let result =
                tracing::Instrument::instrument(handle(state, p, request, &out), span).await;
            if answered_by_task.swap(true, Ordering::SeqCst) {
                return;
            }
            running_ref
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&request_id);
            let _ = out.send(reply(&request_id, result)).await;
        });
        running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (task, answered));
    }
    // The agent is gone, or the server is closing: cancel everything still in
    // flight. On a shutdown each request still gets its one answer, then 1001.
    let left: Vec<(String, JoinHandle<()>, Arc<AtomicBool>)> = running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .map(|(id, (t, answered))| (id, t, answered))
        .collect();
    let shutting_down = closing.is_cancelled() && !out_tx.ended.is_cancelled();
    for (id, task, answered) in left {
        task.abort();
        if shutting_down && !answered.swap(true, Ordering::SeqCst) {
            let _ = out_tx.send(reply(&id, Err(calls::shutting_down()))).await;
        }
    }
    let close_with = if shutting_down {
        Some(latchkey_protocol::CloseCode::GoingAway)
    } else {
        violation
    };
    if let Some(code) = close_with {
        let close = Message::Close(Some(axum::extract::ws::CloseFrame {
            code: code.code(),
            reason: code.reason().into(),
        }));
        let _ = tokio::time::timeout(out_tx.stall, async {
            out_tx.sink.lock().await.send(close).await
        })
        .await;
    }
    out_tx.ended.cancel();
    debug!("agent socket closed");
}

fn params_of<T: serde::de::DeserializeOwned>(params: Option<Value>) -> Result<T, ErrorBody> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|e| ErrorBody::new(ErrorCode::InvalidParams, e.to_string()))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionRef {
    session_id: String,
}

async fn handle(
    state: &AppState,
    p: &Principal,
    request: RequestFrame,
    out: &Outgoing,
) -> Result<RawResult, ErrorBody> {
    match request.method.as_str() {
        "browser.list" => {
            let list = super::browsers::browser_list(state, p)
                .await
                .map_err(|e| ErrorBody {
                    code: e.code,
                    message: e.message,
                    data: e.data,
                })?;
            Ok(to_value(&list))
        }
        "session.list" => Ok(to_value(&super::sessions::owned_sessions(state, p))),
        "session.start" => {
            let req: StartSessionRequest = params_of(request.params)?;
            let session = lifecycle::start(state, p, req).await?;
            // Push this session's events on this socket.
            let mut events = session.subscribe();
            let out = out.clone();
            tokio::spawn(async move {
                loop {
                    let event = tokio::select! {
                        e = events.recv() => match e {
                            Ok(e) => e,
                            Err(_) => break,
                        },
                        _ = out.ended.cancelled() => break,
                    };
                    let last = matches!(event, SessionEvent::SessionEnded { .. });
                    if out.send(event_frame(&event)).await.is_err() || last {
                        break;
                    }
                }
            });
            Ok(to_value(&session.view()))
        }
        "session.stop" => {
            let r: SessionRef = params_of(request.params)?;
            let session = state.sessions.owned(p, &r.session_id)?;
            Ok(to_value(
                &lifecycle::stop(state, &session, "stopped").await?,
            ))
        }
        m if m.starts_with("tool.") => {
            let mut params = calls::params_object(request.params)?;
            let session_id = params
                .remove("session_id")
                .and_then(|v| v.as_str().map(str::to_string))
                .ok_or_else(|| {
                    ErrorBody::new(ErrorCode::InvalidParams, format!("{m} requires session_id"))
                })?;
            let session = state.sessions.owned(p, &session_id)?;
            let call = ToolCall {
                method: request.method,
                params,
                timeout_ms: None,
            };
            calls::call(state, &session, call).await
        }
        other => Err(ErrorBody::new(
            ErrorCode::UnknownMethod,
            format!("{other} is not an agent method"),
        )),
    }
}

/// A result body as the JSON of a success frame.
fn to_value<T: serde::Serialize>(v: &T) -> RawResult {
    crate::router::link::raw(v)
}
