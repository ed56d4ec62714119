//! `GET /v1/sessions/{id}/events`: server-sent events for one session (window
//! closed, user interrupt, session ended). The stream ends after `session_ended`, or
//! with an `error` event: `token_revoked`, `token_expired` the moment the token it
//! was opened with ends, `server_shutting_down` when the node drains.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream;
use latchkey_protocol::agent::SessionEvent;

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::AgentPrincipal;
use crate::sessions::routed;

#[utoipa::path(
    get,
    operation_id = "sessions_events",
    path = "/v1/sessions/{id}/events",
    tag = "sessions",
    summary = "Follow a session's events",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, description = "Server-sent events: each event's name is its `type`, its data a SessionEvent; an `error` event when the token ends.", content_type = "text/event-stream", body = SessionEvent), crate::openapi::refusals::AgentSession),
)]
pub async fn stream(
    State(state): State<AppState>,
    AgentPrincipal(p): AgentPrincipal,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let source = routed::events(&state, &p, &id).await?;
    let lease = p.lease;
    let closing = state.closing.clone();
    let events = stream::unfold(Some((source, lease, closing)), |open| async move {
        let (mut source, lease, closing) = open?;
        let error = |body: latchkey_protocol::ErrorBody| {
            let data = serde_json::to_string(&body).unwrap_or_default();
            Some((Ok(Event::default().event("error").data(data)), None))
        };
        let received = tokio::select! {
            // What the session already said goes out before the token's end.
            biased;
            r = source.next() => r,
            end = lease.ended() => return error(end.error()),
            // The node drains: the stream ends with the code that says
            // "reconnect" (to another replica, in cluster mode), and does
            // not hold the drain up.
            () = closing.cancelled() => {
                return error(crate::core_error::CoreError::ShuttingDown.into_body());
            }
        };
        match received? {
            Ok(event) => {
                let last = matches!(event, SessionEvent::SessionEnded { .. });
                let name = event.stream_name();
                let data = serde_json::to_string(&event).unwrap_or_default();
                let item = Ok(Event::default().event(name).data(data));
                let next = (!last).then_some((source, lease, closing));
                Some((item, next))
            }
            // The session can no longer be followed (its replica is gone).
            Err(e) => error(e.into_body()),
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
