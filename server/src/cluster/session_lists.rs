//! Session lists across the cluster (docs/cluster.md, "Sessions by id on any
//! replica"): an agent's or an admin's list names the sessions on every
//! replica, whichever one the request reached.
//!
//! The asking replica publishes the asker on `<subject>.sessions` with a reply
//! inbox of its own; every other replica answers with its sessions the asker
//! may see. The answers awaited are those of the replicas heard from lately
//! ([`super::members`]), each for at most [`ANSWER_WITHIN`]; one that does not
//! answer in time is left out of the list and logged.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::agent::SessionView;
use latchkey_protocol::cluster::relay::subject_token;
use latchkey_protocol::cluster::session_route::Asker;
use serde::{Deserialize, Serialize};

use super::Peers;
use crate::app::AppState;
use crate::core::Core;
use crate::sessions::table::Session;

/// The longest a list waits for the other replicas' answers.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// The subject every replica answers lists on.
pub fn lists_subject(base: &str) -> String {
    format!("{base}.sessions")
}

/// One replica's answer.
#[derive(Debug, Serialize, Deserialize)]
struct ListAnswer {
    node: String,
    sessions: Vec<SessionView>,
}

/// Whether `asker` may see `session` in a list: an agent its own token's, an
/// admin the team's.
pub fn visible(session: &Session, asker: &Asker) -> bool {
    session.tenant_id == asker.tenant_id
        && asker
            .owner_token_id
            .as_ref()
            .is_none_or(|t| *t == session.token_id)
}

impl Peers {
    /// The sessions on the other replicas that `asker` may see (none on one
    /// node, or while NATS is away).
    pub async fn sessions_elsewhere(&self, asker: &Asker) -> Vec<SessionView> {
        let Some(shared) = &self.inner else {
            return Vec::new();
        };
        let awaited = shared.members.live();
        if awaited.is_empty() || !shared.relay.connected() {
            return Vec::new();
        }
        let client = &shared.relay.client;
        let inbox = client.new_inbox();
        let Ok(mut answers) = client.subscribe(inbox.clone()).await else {
            return Vec::new();
        };
        let Ok(payload) = serde_json::to_vec(asker) else {
            return Vec::new();
        };
        let subject = lists_subject(&shared.relay.base);
        if client
            .publish_with_reply(subject, inbox, payload.into())
            .await
            .is_err()
        {
            return Vec::new();
        }
        let mut waiting: std::collections::HashSet<String> = awaited.into_iter().collect();
        let mut found = Vec::new();
        let deadline = tokio::time::Instant::now() + ANSWER_WITHIN;
        while !waiting.is_empty() {
            let Ok(Some(message)) = tokio::time::timeout_at(deadline, answers.next()).await else {
                tracing::warn!(missing = ?waiting, "cluster: replicas did not answer a session list in time; their sessions are left out");
                break;
            };
            let Ok(answer) = serde_json::from_slice::<ListAnswer>(&message.payload) else {
                continue;
            };
            if waiting.remove(&answer.node) {
                found.extend(answer.sessions);
            }
        }
        let _ = answers.unsubscribe().await;
        found
    }
}

/// Answer other replicas' lists until the node closes.
pub(super) async fn listen(client: async_nats::Client, base: Arc<str>, state: AppState) {
    let Some(node) = state.peers.node_id().map(subject_token) else {
        return;
    };
    let subject = lists_subject(&base);
    let Some(mut requests) = super::nats::subscribe(&client, &subject, &state.closing).await else {
        return;
    };
    state.peers.set_listening();
    loop {
        let message = tokio::select! {
            m = requests.next() => m,
            _ = state.closing.cancelled() => break,
        };
        let Some(message) = message else { break };
        let Some(reply) = message.reply else { continue };
        if message.payload.len() > 4096 {
            continue;
        }
        let Ok(asker) = serde_json::from_slice::<Asker>(&message.payload) else {
            continue;
        };
        let answer = ListAnswer {
            node: node.clone(),
            sessions: local(&state, &asker),
        };
        let Ok(payload) = serde_json::to_vec(&answer) else {
            continue;
        };
        if let Err(e) = client.publish(reply, payload.into()).await {
            tracing::debug!(error = %e, "cluster: a session list answer was not published");
        }
    }
}

/// The sessions here that `asker` may see.
pub fn local(core: &Core, asker: &Asker) -> Vec<SessionView> {
    core.sessions
        .list(|s| visible(s, asker))
        .iter()
        .map(|s| s.view())
        .collect()
}
