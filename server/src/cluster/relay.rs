//! The holder's side of calls across replicas (docs/cluster.md, "Calls across
//! replicas"): requests for the sockets here from sessions on other replicas,
//! their cancels, and the device events those sessions must hear.
//!
//! A relayed request is input from the network like a notice: bounded before
//! it is parsed, checked against the socket it names (team, device, and the
//! very connection), and put through the device's own in-flight cap and
//! outbox, as a local call is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::cluster::relay::{
    self, RelayAnswer, RelayCall, RelayCancel, RelayEvent, RelayFailure,
};
use latchkey_protocol::effect::{
    CANCEL_GRACE_MS, MAX_CALL_TIMEOUT_MS, SESSION_START, SESSION_STOP,
};

use crate::app::AppState;
use crate::core_error::CoreError;

/// The longest a holder waits for the device on a relayed request: past any
/// call's deadline and a start's consent prompt, plus the cancel grace. The
/// caller gives up earlier and says so with a cancel; this bound only frees
/// the slot of a caller that vanished.
const LONGEST_WAIT: Duration = Duration::from_millis(
    MAX_CALL_TIMEOUT_MS + latchkey_protocol::additions::CONSENT_TIMEOUT_MS + 2 * CANCEL_GRACE_MS,
);

/// One device socket's sessions on other replicas: the socket's
/// `connected_at_ms`, and session id → the replica it lives on.
type DeviceRoutes = (i64, HashMap<String, Arc<str>>);

/// Sessions living on other replicas of devices whose sockets are here, by
/// device id.
#[derive(Debug, Default)]
pub struct SessionRoutes {
    map: Mutex<HashMap<String, DeviceRoutes>>,
}

impl SessionRoutes {
    fn map(&self) -> MutexGuard<'_, HashMap<String, DeviceRoutes>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, device_id: &str, connected_at_ms: i64, session_id: &str, node: &str) {
        let mut map = self.map();
        let entry = map
            .entry(device_id.to_string())
            .or_insert_with(|| (connected_at_ms, HashMap::new()));
        if entry.0 != connected_at_ms {
            *entry = (connected_at_ms, HashMap::new());
        }
        entry.1.insert(session_id.to_string(), Arc::from(node));
    }

    fn remove(&self, device_id: &str, session_id: &str) {
        if let Some((_, sessions)) = self.map().get_mut(device_id) {
            sessions.remove(session_id);
        }
    }

    /// Where the device's session lives, if on another replica.
    pub fn node_of(&self, device_id: &str, session_id: &str) -> Option<Arc<str>> {
        self.map()
            .get(device_id)
            .and_then(|(_, s)| s.get(session_id).cloned())
    }

    /// The device's socket opened at `connected_at_ms` ended.
    pub fn forget_device(&self, device_id: &str, connected_at_ms: i64) {
        let mut map = self.map();
        if map
            .get(device_id)
            .is_some_and(|(at, _)| *at == connected_at_ms)
        {
            map.remove(device_id);
        }
    }
}

/// What a relayed request's failure is called on the wire.
fn failure_of(e: &CoreError) -> RelayFailure {
    match e {
        CoreError::DeviceRevoked => RelayFailure::DeviceRevoked,
        CoreError::DeviceExpired => RelayFailure::DeviceExpired,
        CoreError::ShuttingDown => RelayFailure::ShuttingDown,
        CoreError::SessionEnded(latchkey_protocol::EndReason::KillSwitch) => {
            RelayFailure::KillSwitch
        }
        CoreError::CallsInFlight => RelayFailure::CallsInFlight,
        CoreError::OutboxFull => RelayFailure::OutboxFull,
        _ => RelayFailure::BrowserDisconnected,
    }
}

/// Answer what other replicas send this one, until the node closes.
pub(super) async fn listen(client: async_nats::Client, base: Arc<str>, state: AppState) {
    let Some(node) = state.peers.node_id().map(relay::subject_token) else {
        return;
    };
    let subject = relay::node_wildcard(&base, &node);
    let Some(mut messages) = super::nats::subscribe(&client, &subject, &state.closing).await else {
        return;
    };
    state.peers.set_listening();
    let closing = state.closing.clone();
    loop {
        let message = tokio::select! {
            m = messages.next() => m,
            _ = closing.cancelled() => break,
        };
        let Some(message) = message else { break };
        if message.payload.len() > state.config.limits.max_message_bytes + 4096 {
            tracing::warn!(
                bytes = message.payload.len(),
                "cluster: relayed message too long; dropped"
            );
            continue;
        }
        match message.subject.rsplit('.').next() {
            Some(relay::CALL) => {
                state
                    .calls
                    .spawn(answer_call(state.clone(), client.clone(), message));
            }
            Some(relay::CANCEL) => on_cancel(&state, &message.payload),
            Some(relay::EVENT) => on_event(&state, &message.payload),
            _ => {}
        }
    }
    let _ = messages.unsubscribe().await;
}

/// Relay a call to the device here and publish its answer to the caller.
async fn answer_call(state: AppState, client: async_nats::Client, message: async_nats::Message) {
    let Some(reply_to) = message.reply.clone() else {
        return;
    };
    let answer = match serde_json::from_slice::<RelayCall>(&message.payload) {
        Ok(call) => relayed(&state, call).await,
        Err(e) => {
            // Where and what kind, never serde's message: it can quote a
            // value, and a call's params may carry what the agent types.
            tracing::warn!(
                line = e.line(),
                column = e.column(),
                kind = ?e.classify(),
                "cluster: a relayed call does not parse"
            );
            RelayAnswer::failed_text(RelayFailure::Malformed)
        }
    };
    let answer = if answer.len() > client.server_info().max_payload.max(1024) {
        RelayAnswer::failed_text(RelayFailure::AnswerTooLarge)
    } else {
        answer
    };
    if let Err(e) = client.publish(reply_to, answer.into()).await {
        tracing::warn!(error = %e, "cluster: an answer to another replica was not sent");
    }
}

async fn relayed(state: &AppState, call: RelayCall) -> String {
    let failed = |e: &CoreError| RelayAnswer::failed_text(failure_of(e));
    let Some(link) =
        state
            .registry
            .link_in_tenant(&call.tenant_id, &call.device_id, Some(call.connected_at_ms))
    else {
        return RelayAnswer::failed_text(RelayFailure::BrowserDisconnected);
    };
    let Some(permit) = link.try_permit() else {
        return RelayAnswer::failed_text(RelayFailure::CallsInFlight);
    };
    let session = call
        .request
        .params
        .as_ref()
        .and_then(|p| p.get("session_id"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let method = call.request.method.clone();
    let rpc_id = call.request.id.clone();
    let routes = state.peers.inner.as_ref().map(|s| &s.routes);
    if let (SESSION_START, Some(s), Some(routes)) = (method.as_str(), &session, routes) {
        let origin = relay::subject_token(&call.origin);
        routes.add(&call.device_id, call.connected_at_ms, s, &origin);
    }
    let rx = match link.forward(call.request) {
        Ok(rx) => rx,
        Err(e) => return failed(&e),
    };
    let answer = match tokio::time::timeout(LONGEST_WAIT, rx).await {
        Ok(Ok(Ok(result))) => RelayAnswer::ok_text(result.get()),
        Ok(Ok(Err(CoreError::Browser(body)))) => serde_json::to_string(&RelayAnswer {
            ok: None,
            browser_error: Some(body),
            failed: None,
        })
        .unwrap_or_else(|_| RelayAnswer::failed_text(RelayFailure::BrowserDisconnected)),
        Ok(Ok(Err(e))) => failed(&e),
        Ok(Err(_)) => failed(&link.close_reason()),
        Err(_) => {
            link.forget(&rpc_id);
            RelayAnswer::failed_text(RelayFailure::BrowserDisconnected)
        }
    };
    drop(permit);
    if let (SESSION_STOP, Some(s), Some(routes)) = (method.as_str(), &session, routes) {
        routes.remove(&call.device_id, s);
    }
    answer
}

fn on_cancel(state: &AppState, payload: &[u8]) {
    let Ok(cancel) = serde_json::from_slice::<RelayCancel>(payload) else {
        return;
    };
    if let Some(link) = state
        .registry
        .link_in_tenant(&cancel.tenant_id, &cancel.device_id, None)
    {
        link.send_cancel(&cancel.rpc_id);
    }
}

/// A device event for a session that lives here, from the replica holding the
/// device's socket: handled as if the socket were here.
fn on_event(state: &AppState, payload: &[u8]) {
    let Ok(event) = serde_json::from_slice::<RelayEvent>(payload) else {
        return;
    };
    crate::devices::session_events::on_event(
        state,
        &event.tenant_id,
        &event.device_id,
        &event.event,
        &event.payload,
    );
}
