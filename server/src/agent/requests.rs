//! What the agent socket does with each frame (docs/agents.md, "Agent WebSocket"):
//! parse and judge it (bounds, the rate limit, `cancel`), then answer a request as a
//! future inside the socket's task; and the frames it writes back.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use futures_util::future::AbortHandle;
use latchkey_protocol::agent::{SessionEvent, StartSessionRequest};
use latchkey_protocol::{ErrorBody, ErrorCode, ErrorFrame, EventFrame, Frame, RequestFrame, text};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info_span};

use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::core_error::CoreError;
use crate::devices::link::RawResult;
use crate::sessions::calls::{self, ToolCall};
use crate::sessions::routed::{self, Scope};
use crate::sessions::start_stop;
use crate::telemetry::metrics as telemetry;

/// One request being answered: the agent's id and the answer.
pub(super) type Answering<'a> = Pin<Box<dyn Future<Output = (String, Reply)> + Send + 'a>>;

pub(super) type Reply = Result<RawResult, ErrorBody>;

/// How `session.start` pushes its session's events on this socket: through the
/// socket's loop, which writes them between answers.
pub(super) struct EventOut {
    pub(super) frames: mpsc::Sender<String>,
    /// Cancelled when the socket ends: the pushers stop.
    pub(super) ended: CancellationToken,
}

/// The answer frame for request `id`; a result is written as the raw JSON it is,
/// in one copy into a string of the exact length.
pub(super) fn reply(id: &str, result: Reply) -> String {
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
    let payload = serde_json::to_value(event).unwrap_or_default();
    Frame::Event(EventFrame {
        event: event.socket_name().to_string(),
        payload,
    })
    .to_text()
}

/// What the loop does with one frame from the agent.
pub(super) enum Inbound {
    /// Answer at once (a refusal, or `cancel`'s own frames).
    Answer(Vec<String>),
    /// Start answering a request.
    Run(RequestFrame),
}

/// Parse one frame from the agent and decide what to do with it. `cancel` is
/// answered here, and so is anything refused; nothing else is started.
pub(super) fn inbound(
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
    // Ids are echoed and kept while a request runs, methods are matched and
    // counted: both are bounded (docs/security.md).
    if request.id.chars().count() > text::MAX_REQUEST_ID_CHARS {
        return refuse(
            "",
            ErrorCode::InvalidRequest,
            &format!(
                "id must be at most {} characters",
                text::MAX_REQUEST_ID_CHARS
            ),
        );
    }
    if let Err(e) = calls::check_method(&request.method) {
        return Inbound::Answer(vec![reply(&request.id, Err(e.into_body()))]);
    }
    // Every request is charged, cancels too; a refused one is answered
    // `rate_limited` and changes nothing.
    let limited = state.agent_limiter.check(&p.tenant_id, &p.token_id).err();
    if limited.is_some() {
        telemetry::refused("rate_limited");
    }
    if request.method == "cancel" {
        let target = request
            .params
            .as_ref()
            .and_then(|p| p.get("rpc_id"))
            .and_then(Value::as_str);
        let found = target.and_then(|t| running.remove(t).map(|abort| (t, abort)));
        let mut frames = Vec::new();
        match (found, limited) {
            // Stopping work in flight stays possible over the limit: there is at
            // most one such cancel per running request.
            (Some((target, abort)), _) => {
                // The request's future is dropped at the loop's next turn: a
                // forwarded call then sends `cancel` to the browser; one not yet
                // forwarded sends nothing.
                abort.abort();
                let e = ErrorBody::new(ErrorCode::Cancelled, "cancelled by the agent");
                frames.push(reply(target, Err(e)));
                frames.push(reply(
                    &request.id,
                    Ok(to_value(&json!({ "cancelled": true }))),
                ));
            }
            (None, Some(limited)) => frames.push(reply(&request.id, Err(limited.error_body()))),
            (None, None) => {
                frames.push(reply(
                    &request.id,
                    Ok(to_value(&json!({ "cancelled": false }))),
                ));
            }
        }
        return Inbound::Answer(frames);
    }
    if let Some(limited) = limited {
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
pub(super) fn answer<'a>(
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

/// Params that do not decode into the method's request type are `invalid_request`,
/// as a REST body that does not decode is; a value that decodes but breaks a rule
/// is `invalid_params` (docs/error-codes.md).
fn params_of<T: serde::de::DeserializeOwned>(params: Option<Value>) -> Result<T, ErrorBody> {
    serde_json::from_value(params.unwrap_or_else(|| json!({})))
        .map_err(|e| ErrorBody::new(ErrorCode::InvalidRequest, e.to_string()))
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
                .map_err(ErrorBody::from)?;
            Ok(to_value(&list))
        }
        "session.list" => Ok(to_value(&routed::list(state, Scope::Agent(p)).await)),
        "session.start" => {
            let req: StartSessionRequest = params_of(request.params)?;
            let session = start_stop::start(state, p, req).await?;
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
            let stopped = routed::stop(state, Scope::Agent(p), &r.session_id).await?;
            Ok(to_value(&stopped))
        }
        m if m.starts_with("tool.") => {
            let mut params = calls::params_object(request.params)?;
            let session_id = params
                .remove("session_id")
                .and_then(|v| v.as_str().map(str::to_string))
                .ok_or_else(|| {
                    CoreError::invalid_field("session_id", format!("{m} requires session_id"))
                })?;
            let call = ToolCall {
                method: request.method,
                params,
                timeout_ms: None,
                limit: p.delegation.as_ref().map(|d| d.limit.clone()),
            };
            Ok(routed::call(state, p, &session_id, call).await?)
        }
        other => Err(ErrorBody::new(
            ErrorCode::UnknownMethod,
            format!("{other} is not an agent method"),
        )),
    }
}

/// A result body as the JSON of a success frame.
fn to_value<T: serde::Serialize>(v: &T) -> RawResult {
    crate::devices::link::raw(v)
}
