//! `GET /v1/agent`: the agent WebSocket. Same envelope as the extension protocol:
//! requests `browser.list`, `session.start|stop|list`, `tool.*` (with `session_id` in
//! params) and `cancel` (`{rpc_id}`), each answered once; session events are pushed as
//! event frames. Requests run concurrently, as futures inside the socket's one task;
//! calls of one session still serialise. Closing the socket cancels every call it has
//! in flight.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures_util::future::{AbortHandle, Abortable, abortable};
use futures_util::stream::SplitSink;
use futures_util::{FutureExt, SinkExt, StreamExt};
use latchkey_protocol::agent::{SessionEvent, StartSessionRequest};
use latchkey_protocol::{ErrorBody, ErrorCode, ErrorFrame, EventFrame, Frame, RequestFrame};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::answers::Answers;
use super::socket_slots::{SocketLimit, SocketSlot};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::router::calls::{self, ToolCall};
use crate::router::lifecycle;
use crate::router::link::RawResult;
use crate::telemetry::metrics as telemetry;

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

/// One request being answered: the agent's id and the answer.
type Answering<'a> = Pin<Box<dyn Future<Output = (String, Reply)> + Send + 'a>>;

type Reply = Result<RawResult, ErrorBody>;

/// Session events waiting for the socket's loop; beyond this a session's event
/// pusher waits, as it would on a slow socket.
const EVENT_BACKLOG: usize = 64;

/// The socket's write half. Only the socket's own loop writes, so answers that are
/// ready together go out with one flush, and no lock or task hop is needed.
struct Writer {
    sink: SplitSink<WebSocket, Message>,
    /// How long one write may take before the agent counts as no longer reading.
    stall: Duration,
}

/// Why frames could not be written: the socket is finished either way.
#[derive(Debug)]
enum WriteFailed {
    Closed,
    Stalled,
}

impl Writer {
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
}

/// How `session.start` pushes its session's events on this socket: through the
/// socket's loop, which writes them between answers.
struct EventOut {
    frames: mpsc::Sender<String>,
    /// Cancelled when the socket ends: the pushers stop.
    ended: CancellationToken,
}

/// The answer frame for request `id`; a result is written as the raw JSON it is,
/// in one copy into a string of the exact length.
fn reply(id: &str, result: Reply) -> String {
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

/// What the loop does with one frame from the agent.
enum Inbound {
    /// Answer at once (a refusal, or `cancel`'s own frames).
    Answer(Vec<String>),
    /// Start answering a request.
    Run(RequestFrame),
}

/// The socket's loop. Requests are answered concurrently inside this one task (a
/// set of futures, not a task each): an answer from the browser wakes this task
/// directly, and answers that are ready together share one write.
async fn serve_socket(socket: WebSocket, state: AppState, p: Principal) {
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
    // Requests still being answered, by the agent's id. An id leaves the map when
    // its answer is written or when `cancel` answers it: whichever comes first
    // answers, so every request is answered exactly once.
    let mut running: HashMap<String, AbortHandle> = HashMap::new();
    let mut answering: Answers<Abortable<Answering<'_>>> = Answers::default();
    // Set when the agent broke the WebSocket protocol: the code to close with.
    let mut violation = None;
    let mut write_failed = false;
    loop {
        let written = tokio::select! {
            _ = closing.cancelled() => break,
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
    // The agent is gone, or the server is closing: what is still in flight is
    // dropped, which cancels it (a forwarded call sends `cancel` to the browser). On
    // a shutdown each request still gets its one answer, then 1001.
    let shutting_down = closing.is_cancelled() && !write_failed;
    let mut last = Vec::new();
    if shutting_down {
        last.extend(
            running
                .drain()
                .map(|(id, _)| reply(&id, Err(calls::shutting_down()))),
        );
    }
    drop(answering);
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
        let _ = writer.write(last).await;
        let _ = tokio::time::timeout(writer.stall, writer.sink.send(close)).await;
    }
    events.ended.cancel();
    debug!("agent socket closed");
}

/// Parse one frame from the agent and decide what to do with it. `cancel` is
/// answered here, and so is anything refused; nothing else is started.
fn inbound(
    state: &AppState,
    p: &Principal,
    text: &str,
    running: &mut HashMap<String, AbortHandle>,
) -> Inbound {
    let refuse = |id: &str, code, message: &str| {
        Inbound::Answer(vec![reply(id, Err(ErrorBody::new(code, message)))])
    };
    let request = match Frame::parse(text) {
        Ok(Frame::Request(r)) => r,
        Ok(_) => {
            return refuse(
                "",
                ErrorCode::InvalidRequest,
                "only requests are accepted on the agent socket",
            );
        }
        Err(e) => {
            return refuse(
                "",
                ErrorCode::InvalidRequest,
                &format!("frame does not parse: {e}"),
            );
        }
    };
    if request.method == "cancel" {
        let target = request
            .params
            .as_ref()
            .and_then(|p| p.get("rpc_id"))
            .and_then(Value::as_str);
        let mut frames = Vec::new();
        let found = target.and_then(|t| running.remove(t).map(|abort| (t, abort)));
        let cancelled = found.is_some();
        if let Some((target, abort)) = found {
            // The request's future is dropped at the loop's next turn: a forwarded
            // call then sends `cancel` to the browser; one not yet forwarded sends
            // nothing.
            abort.abort();
            let e = ErrorBody::new(ErrorCode::Cancelled, "cancelled by the agent");
            frames.push(reply(target, Err(e)));
        }
        let answer = to_value(&json!({ "cancelled": cancelled }));
        frames.push(reply(&request.id, Ok(answer)));
        return Inbound::Answer(frames);
    }
    // Cancels are never refused: stopping work must always be possible.
    if let Err(limited) = state.agent_limiter.check(&p.tenant_id, &p.token_id) {
        telemetry::refused("rate_limited");
        return Inbound::Answer(vec![reply(&request.id, Err(limited.error_body()))]);
    }
    if running.contains_key(&request.id) {
        return refuse(
            &request.id,
            ErrorCode::InvalidRequest,
            "a request with this id is still running",
        );
    }
    Inbound::Run(request)
}

/// Answer one request, in its own span (which joins the agent's trace when the
/// params carry a `traceparent`; that is not forwarded).
fn answer<'a>(
    state: &'a AppState,
    p: &'a Principal,
    mut request: RequestFrame,
    events: &'a EventOut,
) -> Answering<'a> {
    let traceparent = request
        .params
        .as_mut()
        .and_then(|v| v.as_object_mut())
        .and_then(|m| m.remove("traceparent"))
        .and_then(|v| v.as_str().map(str::to_string));
    let span = info_span!(
        "agent_request",
        method = telemetry::method_label(&request.method)
    );
    if let Some(tp) = &traceparent {
        crate::telemetry::otel::adopt_traceparent(&span, tp);
    }
    Box::pin(
        async move {
            let id = request.id.clone();
            (id, handle(state, p, request, events).await)
        }
        .instrument(span),
    )
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
    events: &EventOut,
) -> Reply {
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
            let mut session_events = session.subscribe();
            let (frames, ended) = (events.frames.clone(), events.ended.clone());
            tokio::spawn(async move {
                loop {
                    let event = tokio::select! {
                        e = session_events.recv() => match e {
                            Ok(e) => e,
                            Err(_) => break,
                        },
                        _ = ended.cancelled() => break,
                    };
                    let last = matches!(event, SessionEvent::SessionEnded { .. });
                    if frames.send(event_frame(&event)).await.is_err() || last {
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
