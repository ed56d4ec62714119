//! The session's replica's side of "Sessions by id on any replica"
//! (docs/cluster.md): from a session's start until a while after its end, this
//! replica answers for it on the session's own NATS subject, and publishes its
//! events for streams opened on other replicas.
//!
//! A request arrives already authenticated by the replica the agent reached;
//! here it is checked against the session exactly as a local request is (team,
//! and the token for an agent), then run through the same core functions, so
//! a relayed call has the local call's deadline, cancel, serialisation, policy
//! and audit row, and its error the local code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::EndReason;
use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::cluster::session_route::{
    self, Asker, SessionOp, SessionReply, SessionRequest,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::Peers;
use super::remote_link::RelayClient;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::sessions::calls::{self, ToolCall};
use crate::sessions::start_stop;
use crate::sessions::table::Session;

/// How long the session's subject is still answered after its end, so that a
/// request from another replica hears `session_ended` with the reason, as a
/// local one does, rather than `not_found`.
pub const ANSWERED_AFTER_END: Duration = Duration::from_secs(60);

/// The longest the subscription waits to be known to the NATS server before
/// the session's id goes to its agent. Past it (NATS away) the session works
/// here at once and from other replicas once the client has subscribed again.
const SUBSCRIBED_WITHIN: Duration = Duration::from_secs(1);

/// Requests in progress here for other replicas, by their request id: what a
/// cancel cancels.
type InFlight = Arc<Mutex<HashMap<String, CancellationToken>>>;

impl Peers {
    /// Answer for `session` on its subject from now on. A no-op on one node.
    pub async fn host_session(&self, core: &Core, session: &Arc<Session>) {
        let Some(shared) = &self.inner else { return };
        let relay = shared.relay.clone();
        let subject = session_route::session_subject(&relay.base, &session.id);
        let requests = match tokio::time::timeout(
            SUBSCRIBED_WITHIN,
            relay.client.subscribe(subject),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(session = %session.id, "cluster: the session cannot be reached from other replicas");
                return;
            }
        };
        // Known to the server before the agent learns the id, so a request for
        // it on another replica never finds "no responders". While NATS is away
        // the start does not wait: the client subscribes once it is back.
        if relay.connected()
            && !matches!(
                tokio::time::timeout(SUBSCRIBED_WITHIN, relay.client.flush()).await,
                Ok(Ok(()))
            )
        {
            tracing::warn!(session = %session.id, "cluster: NATS did not confirm the session's subscription in time");
        }
        let events = session.subscribe();
        tokio::spawn(serve(
            core.clone(),
            session.clone(),
            relay,
            requests,
            events,
        ));
    }
}

/// Answer requests for `session` and publish its events, until a while after
/// it ended or the node closes.
async fn serve(
    core: Core,
    session: Arc<Session>,
    relay: RelayClient,
    mut requests: async_nats::Subscriber,
    mut events: broadcast::Receiver<SessionEvent>,
) {
    let events_subject = session_route::events_subject(&relay.base, &session.id);
    let in_flight: InFlight = Arc::default();
    // Events still travel (the end's own comes just after the session is
    // marked ended).
    let mut open = true;
    // The session has ended: the linger runs, whether or not its end event
    // comes (a session may end without one).
    let mut ended = false;
    let linger = tokio::time::sleep(Duration::MAX);
    tokio::pin!(linger);
    loop {
        tokio::select! {
            biased;
            event = events.recv(), if open => match event {
                Ok(event) => {
                    let last = matches!(event, SessionEvent::SessionEnded { .. });
                    publish_event(&relay, &events_subject, &event).await;
                    if last {
                        open = false;
                        linger.as_mut().reset(tokio::time::Instant::now() + ANSWERED_AFTER_END);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    open = false;
                    linger.as_mut().reset(tokio::time::Instant::now() + ANSWERED_AFTER_END);
                }
            },
            () = session.ended(), if !ended => {
                ended = true;
                linger.as_mut().reset(tokio::time::Instant::now() + ANSWERED_AFTER_END);
            }
            message = requests.next() => {
                let Some(message) = message else { break };
                on_request(&core, &session, &relay, &in_flight, message);
            }
            () = &mut linger => break,
            () = core.closing.cancelled() => break,
        }
    }
    // Dropping the subscriber unsubscribes: from now on a request for the
    // session finds nobody, and is answered `not_found` where it was made.
}

async fn publish_event(relay: &RelayClient, subject: &str, event: &SessionEvent) {
    let Ok(payload) = serde_json::to_vec(event) else {
        return;
    };
    if let Err(e) = relay
        .client
        .publish(subject.to_string(), payload.into())
        .await
    {
        tracing::debug!(error = %e, "cluster: a session event was not published");
    }
}

/// The session as `asker` may act on it, or the answer a local request gets.
fn check(core: &Core, session: &Session, asker: &Asker) -> Result<Arc<Session>, CoreError> {
    match &asker.owner_token_id {
        Some(owner) => core.sessions.owned_by(&asker.tenant_id, owner, &session.id),
        None => core
            .sessions
            .get_in_tenant(&asker.tenant_id, &session.id)
            .ok_or(CoreError::SessionNotFound),
    }
}

fn on_request(
    core: &Core,
    session: &Session,
    relay: &RelayClient,
    in_flight: &InFlight,
    message: async_nats::Message,
) {
    // Input from the network: bounded before it is parsed.
    if message.payload.len() > core.config.limits.max_message_bytes + 4096 {
        tracing::warn!(
            bytes = message.payload.len(),
            "cluster: session request too long; dropped"
        );
        return;
    }
    let Ok(request) = serde_json::from_slice::<SessionRequest>(&message.payload) else {
        tracing::warn!("cluster: a session request does not parse; dropped");
        return;
    };
    if request.op == SessionOp::Cancel {
        let cancel = lock(in_flight).remove(&request.request_id);
        if let Some(cancel) = cancel {
            cancel.cancel();
        }
        return;
    }
    let Some(reply_to) = message.reply else {
        return;
    };
    let target = check(core, session, &request.asker);
    let (core, relay, in_flight) = (core.clone(), relay.clone(), in_flight.clone());
    let cancel = CancellationToken::new();
    lock(&in_flight).insert(request.request_id.clone(), cancel.clone());
    tokio::spawn(async move {
        let answer = match target {
            // Refused before it reached the session: nothing ran.
            Err(e) => SessionReply::unserved_text(e.into_body()),
            Ok(session) => tokio::select! {
                answer = run(&core, &session, request.asker.owner_token_id.is_none(), request.op) => answer,
                // Dropping the call is what the agent going away does locally:
                // the browser gets its cancel.
                () = cancel.cancelled() => SessionReply::error_text(
                    CoreError::Cancelled("the agent went away").into_body(),
                ),
            },
        };
        lock(&in_flight).remove(&request.request_id);
        if let Err(e) = relay.client.publish(reply_to, answer.into()).await {
            tracing::debug!(error = %e, "cluster: a session answer was not published");
        }
    });
}

/// Run `op` on `session` here; the JSON text of the reply.
async fn run(core: &Core, session: &Arc<Session>, by_admin: bool, op: SessionOp) -> String {
    let result = match op {
        SessionOp::Call {
            method,
            params,
            timeout_ms,
            limit,
        } => {
            let call = ToolCall {
                method,
                params,
                timeout_ms,
                limit: limit.map(|l| Arc::new(*l)),
            };
            calls::call(core, session, call)
                .await
                .map(|raw| SessionReply::ok_text(raw.get()))
        }
        SessionOp::Stop => {
            let reason = if by_admin {
                EndReason::StoppedByAdmin
            } else {
                EndReason::Stopped
            };
            start_stop::stop(core, session, reason).await.map(|r| {
                SessionReply::ok_text(&serde_json::to_string(&r).unwrap_or_else(|_| "{}".into()))
            })
        }
        SessionOp::StopForOwner { member_id } if by_admin => {
            start_stop::stop_for_owner(core, session, &member_id)
                .await
                .map(|r| {
                    SessionReply::ok_text(
                        &serde_json::to_string(&r).unwrap_or_else(|_| "{}".into()),
                    )
                })
        }
        SessionOp::StopForOwner { .. } => Err(CoreError::SessionNotFound),
        SessionOp::Watch => Ok(SessionReply::ok_text("true")),
        SessionOp::Cancel => Err(CoreError::Internal("a cancel is not a request")),
    };
    result.unwrap_or_else(|e| SessionReply::error_text(e.into_body()))
}

fn lock(in_flight: &InFlight) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
    in_flight.lock().unwrap_or_else(|p| p.into_inner())
}
