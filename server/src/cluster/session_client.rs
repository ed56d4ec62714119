//! The asking side of "Sessions by id on any replica" (docs/cluster.md): a
//! request for a session that does not live here goes to the session's own
//! subject, where its replica answers (`session_host`).
//!
//! - Nobody answers: the session is nowhere (or its replica is gone), and the
//!   agent hears `not_found` at once.
//! - The agent goes away before the answer: a cancel follows on the same
//!   subject, so the browser is told, as for a local call.
//! - NATS is away: `gateway_unavailable`, retryable; this replica cannot know
//!   whether the session lives elsewhere.

use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::cluster::session_route::{
    self, Asker, SessionOp, SessionReply, SessionRequest,
};
use serde_json::value::RawValue;

use super::Peers;
use super::remote_link::RelayClient;
use crate::auth::secret;
use crate::core_error::CoreError;

/// How often a stream of another replica's session events asks whether the
/// session is still there: a replica killed outright publishes no end, and the
/// stream must not wait forever.
pub const STILL_THERE_EVERY: Duration = Duration::from_secs(5);

/// The longest a `watch` (or a re-check) waits for the session's replica.
const WATCH_WAIT: Duration = Duration::from_secs(5);

/// Publishes a cancel for the request unless it was answered (dropped with the
/// agent's request).
struct CancelOnDrop {
    relay: RelayClient,
    subject: String,
    request: Option<SessionRequest>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(mut request) = self.request.take() else {
            return;
        };
        request.op = SessionOp::Cancel;
        let Ok(payload) = serde_json::to_vec(&request) else {
            return;
        };
        let (relay, subject) = (self.relay.clone(), std::mem::take(&mut self.subject));
        tokio::spawn(async move {
            if let Err(e) = relay.client.publish(subject, payload.into()).await {
                tracing::debug!(error = %e, "cluster: a session cancel was not published");
            }
        });
    }
}

impl Peers {
    /// The NATS side to ask about session `id` through: `not_found` for an id
    /// no session has (never put into a subject), `gateway_unavailable` while
    /// NATS is away.
    fn relay_for(&self, id: &str) -> Result<&RelayClient, CoreError> {
        let Some(shared) = &self.inner else {
            return Err(CoreError::SessionNotFound);
        };
        if !session_route::is_session_id(id) {
            return Err(CoreError::SessionNotFound);
        }
        if !shared.relay.connected() {
            return Err(CoreError::ReplicaUnreachable);
        }
        Ok(&shared.relay)
    }

    /// Whether a request for session `id` that is not here may be answered by
    /// another replica: in cluster mode, for an id of a session's shape.
    pub fn may_hold_session(&self, id: &str) -> bool {
        self.inner.is_some() && session_route::is_session_id(id)
    }

    /// Ask the replica session `id` lives on to run `op` for `asker`, waiting
    /// at most `wait` (past the session's own deadlines: the session's replica
    /// answers by then unless it is gone). The answer's result, or its error
    /// as that replica gave it.
    pub async fn ask_session(
        &self,
        asker: Asker,
        id: &str,
        op: SessionOp,
        wait: Duration,
    ) -> Result<Box<RawValue>, CoreError> {
        use async_nats::RequestErrorKind as Kind;
        let relay = self.relay_for(id)?;
        let subject = session_route::session_subject(&relay.base, id);
        let request = SessionRequest {
            asker,
            request_id: secret::random_hex(8),
            op,
        };
        let payload = serde_json::to_vec(&request)
            .map_err(|_| CoreError::Internal("a session request could not be encoded"))?;
        let mut cancel = CancelOnDrop {
            relay: relay.clone(),
            subject: subject.clone(),
            request: Some(request),
        };
        let asked = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(wait));
        let answer = relay.client.send_request(subject, asked).await;
        cancel.request = None;
        let message = match answer {
            Ok(message) => message,
            Err(e) => {
                return Err(match e.kind() {
                    Kind::NoResponders => CoreError::SessionNotFound,
                    Kind::MaxPayloadExceeded => CoreError::invalid(
                        "the call is larger than the cluster's NATS carries (max_payload)",
                    ),
                    _ => {
                        tracing::warn!(error = %e, "cluster: a request for a session on another replica failed");
                        CoreError::ReplicaUnreachable
                    }
                });
            }
        };
        match serde_json::from_slice::<SessionReply>(&message.payload) {
            Ok(SessionReply { ok: Some(raw), .. }) => Ok(raw.to_owned()),
            Ok(SessionReply {
                error: Some(body),
                unserved: true,
                ..
            }) => Err(CoreError::Unserved(body)),
            Ok(SessionReply {
                error: Some(body), ..
            }) => Err(CoreError::Replica(body)),
            _ => Err(CoreError::Internal("a replica's answer does not parse")),
        }
    }

    /// Whether session `id` on another replica is open to `asker`: `Ok` when it
    /// is; its replica's refusal (`session_ended` with the reason, `not_found`)
    /// or this side's (`not_found` when nobody answers) when it is not.
    pub async fn watch_session(&self, asker: Asker, id: &str) -> Result<(), CoreError> {
        self.ask_session(asker, id, SessionOp::Watch, WATCH_WAIT)
            .await
            .map(drop)
    }

    /// Follow the events of session `id` on another replica, if `asker` may.
    pub async fn follow_session(&self, asker: Asker, id: &str) -> Result<RemoteEvents, CoreError> {
        let relay = self.relay_for(id)?;
        // Subscribed before asking: no event between the answer and the
        // subscription can be missed.
        let subject = session_route::events_subject(&relay.base, id);
        let events = relay
            .client
            .subscribe(subject)
            .await
            .map_err(|_| CoreError::ReplicaUnreachable)?;
        relay
            .client
            .flush()
            .await
            .map_err(|_| CoreError::ReplicaUnreachable)?;
        self.watch_session(asker.clone(), id).await?;
        let mut still_there = tokio::time::interval(STILL_THERE_EVERY);
        still_there.reset();
        Ok(RemoteEvents {
            peers: self.clone(),
            asker,
            id: id.to_string(),
            events,
            still_there,
            max_bytes: 64 * 1024,
        })
    }
}

/// A session's events as its replica publishes them.
pub struct RemoteEvents {
    peers: Peers,
    asker: Asker,
    id: String,
    events: async_nats::Subscriber,
    still_there: tokio::time::Interval,
    /// An event longer than this is not one the gateway sent: dropped.
    max_bytes: usize,
}

impl RemoteEvents {
    /// The next event; an error once the session can no longer be followed
    /// (its replica is gone or says so); `None` when NATS closed the stream.
    pub async fn next(&mut self) -> Option<Result<SessionEvent, CoreError>> {
        loop {
            tokio::select! {
                message = self.events.next() => {
                    let message = message?;
                    if message.payload.len() > self.max_bytes {
                        continue;
                    }
                    match serde_json::from_slice::<SessionEvent>(&message.payload) {
                        Ok(event) => return Some(Ok(event)),
                        Err(_) => tracing::warn!("cluster: a session event does not parse; dropped"),
                    }
                }
                _ = self.still_there.tick() => {
                    let asked = self
                        .peers
                        .ask_session(self.asker.clone(), &self.id, SessionOp::Watch, WATCH_WAIT)
                        .await;
                    match asked {
                        Ok(_) => {}
                        // NATS away: the session may well be there; ask again later.
                        Err(CoreError::ReplicaUnreachable) => {}
                        Err(e) => return Some(Err(e)),
                    }
                }
            }
        }
    }
}
