//! What the core asks of the other replicas about devices whose sockets are
//! not here (docs/cluster.md, "Calls across replicas"): whether one is online
//! elsewhere, the link to it, and what this replica learns when one moves or
//! goes. On one node every answer is "nothing elsewhere".

use std::sync::Arc;

use latchkey_protocol::EndReason;
use latchkey_protocol::additions::Features;
use latchkey_protocol::cluster::Notice;
use latchkey_protocol::cluster::relay::{self, RelayEvent};

use super::Peers;
use super::remote_link::{RemoteLink, end_for_error, error_for_end};
use crate::core_error::CoreError;
use crate::devices::link::Link;
use crate::sessions::SessionTable;
use crate::sessions::table::Abort;

impl Peers {
    /// The link to the tenant's device whose socket another replica holds.
    /// Sessions started through it end when it closes, for its reason.
    pub fn remote_link(
        &self,
        sessions: &SessionTable,
        max_in_flight: usize,
        tenant_id: &str,
        device_id: &str,
    ) -> Option<Arc<dyn Link>> {
        let shared = self.inner.as_ref()?;
        let (link, made) = shared.directory.link(tenant_id, device_id, |holder| {
            RemoteLink::new(holder, device_id, shared.relay.clone(), max_in_flight)
        })?;
        if made {
            let (link, sessions, peers) = (link.clone(), sessions.clone(), self.clone());
            tokio::spawn(async move {
                link.closed().await;
                end_sessions_of(&sessions, &link);
                if link.replica_gone()
                    && let Some(s) = &peers.inner
                {
                    for other in s.directory.forget_node(&link.node) {
                        other.close(CoreError::BrowserDisconnected);
                    }
                }
            });
        }
        Some(link as Arc<dyn Link>)
    }

    /// Whether another replica holds the tenant's device's socket.
    pub fn holds_elsewhere(&self, tenant_id: &str, device_id: &str) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|s| s.directory.holds(tenant_id, device_id))
    }

    /// The tenant's devices whose sockets other replicas hold.
    pub fn online_elsewhere(&self, tenant_id: &str) -> Vec<String> {
        self.inner
            .as_ref()
            .map(|s| s.directory.online_in_tenant(tenant_id))
            .unwrap_or_default()
    }

    /// Wait until another replica tells of a device coming online (never, on
    /// one node).
    pub fn learnt_online(&self) -> impl Future<Output = ()> + '_ {
        // Made now, not when first polled: a device learnt before then counts.
        let learnt = self.inner.as_ref().map(|s| s.directory.learnt());
        async move {
            match learnt {
                Some(learnt) => learnt.await,
                None => std::future::pending().await,
            }
        }
    }

    /// `node` told of the device's socket opened at `connected_at_ms`.
    pub(super) fn learn_connected(
        &self,
        tenant_id: &str,
        device_id: &str,
        node: &str,
        connected_at_ms: i64,
        features: Features,
    ) {
        let Some(s) = &self.inner else { return };
        if let Some(old) =
            s.directory
                .connected(tenant_id, device_id, node, connected_at_ms, features)
        {
            old.close(CoreError::BrowserDisconnected);
        }
    }

    /// `node` told that the device's socket there ended for `reason`.
    pub(super) fn learn_disconnected(
        &self,
        tenant_id: &str,
        device_id: &str,
        node: &str,
        connected_at_ms: i64,
        reason: EndReason,
    ) {
        let Some(s) = &self.inner else { return };
        if let Some(link) = s
            .directory
            .disconnected(tenant_id, device_id, node, connected_at_ms)
        {
            link.close(error_for_end(reason));
        }
    }

    /// The device's socket here, opened at `connected_at_ms`, ended for
    /// `reason`: the other replicas end the sessions they opened through it.
    pub fn device_gone(
        &self,
        tenant_id: &str,
        device_id: &str,
        connected_at_ms: i64,
        reason: EndReason,
    ) {
        let Some(s) = &self.inner else { return };
        s.routes.forget_device(device_id, connected_at_ms);
        self.tell(Notice::DeviceDisconnected {
            tenant_id: tenant_id.to_string(),
            device_id: device_id.to_string(),
            connected_at_ms,
            reason,
        });
    }

    /// Send a device's session event to the replica where the session lives,
    /// if it lives on another one. Returns whether it was sent.
    pub fn relay_event(
        &self,
        tenant_id: &str,
        device_id: &str,
        session_id: &str,
        event: &str,
        payload: &serde_json::Value,
    ) -> bool {
        let Some(s) = &self.inner else { return false };
        let Some(node) = s.routes.node_of(device_id, session_id) else {
            return false;
        };
        let Ok(bytes) = serde_json::to_vec(&RelayEvent {
            tenant_id: tenant_id.to_string(),
            device_id: device_id.to_string(),
            event: event.to_string(),
            payload: payload.clone(),
        }) else {
            return false;
        };
        let relay_client = s.relay.clone();
        tokio::spawn(async move { relay_client.publish(&node, relay::EVENT, bytes).await });
        true
    }
}

/// This replica drains: the sessions it holds on browsers whose sockets are on
/// other replicas (those sockets stay open) end `server_shutting_down`, and
/// their Agent Windows are closed in the background, tracked with the calls in
/// flight so the drain waits for them. Returns how many.
pub fn end_remote_sessions(core: &crate::core::Core) -> usize {
    let remote = core.sessions.list(|s| {
        core.registry.link(&s.device_id).is_none()
            && core.peers.holds_elsewhere(&s.tenant_id, &s.device_id)
    });
    let reason = EndReason::ServerShuttingDown;
    for session in &remote {
        crate::sessions::lifetime::end_now(core, session, reason, Abort::Ended(reason));
    }
    remote.len()
}

/// End the sessions started through `link`, which has closed.
fn end_sessions_of(sessions: &SessionTable, link: &RemoteLink) {
    let reason = end_for_error(&link.close_reason());
    let mut ended = 0;
    for id in link.sessions() {
        if let Some(session) = sessions.get_on_device(&link.device_id, &id) {
            ended += usize::from(sessions.finish(&session, reason, Abort::BrowserGone));
        }
    }
    if ended > 0 {
        tracing::info!(
            device = %link.device_id,
            node = %link.node,
            sessions = ended,
            reason = reason.as_str(),
            "sessions ended with the browser's socket on another replica"
        );
    }
}
