//! The session core's handle: what sessions, calls, device connections and the
//! sweeps need, and nothing a surface owns (no HTTP, no rate limiters, no pairing).
//!
//! Every surface reaches the core through this door: the extension endpoints hand
//! it a device socket, the agent REST and WebSocket APIs (and the surfaces to come)
//! start sessions and make calls with it. `AppState` holds one and derefs to it, so
//! a handler passes `&state` where the core asks for `&Core`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::audit::Audit;
use crate::clock::Clock;
use crate::config::{Config, Limits};
use crate::devices::DeviceRegistry;
use crate::devices::link::Link;
use crate::sessions::SessionTable;
use crate::store::Store;

/// Cheap to clone: every field is a shared handle.
#[derive(Clone)]
pub struct Core {
    /// Grants, devices and the audit trail's rows.
    pub store: Arc<dyn Store>,
    /// The node's configuration; the core reads its limits.
    pub config: Arc<Config>,
    /// Wall-clock time, movable in tests.
    pub clock: Clock,
    /// Which device's socket is here, and the door to close it.
    pub registry: DeviceRegistry,
    /// Every open session on this node.
    pub sessions: SessionTable,
    /// The audit trail and the connection bookkeeping, written in group commits.
    pub audit: Audit,
    /// Cancelled when the node starts draining: nothing new is taken.
    pub shutdown: CancellationToken,
    /// Cancelled when the drain's grace for calls is over: every socket closes.
    pub closing: CancellationToken,
    /// Every call and session start in flight, so the drain can wait for them.
    pub calls: TaskTracker,
    /// Team names, for what a browser is told about the team it serves.
    pub team_names: crate::devices::TeamNames,
    /// Signs the audit trail's checkpoints.
    pub audit_keys: crate::audit_keys::AuditKeys,
    /// The other replicas, in cluster mode: what must reach their sockets
    /// (a revocation, a device that moved here) is told through it.
    pub peers: crate::cluster::Peers,
}

impl Core {
    /// The code sockets close with when this node drains: 1012 (service
    /// restart) in cluster mode, where other replicas take the sockets over at
    /// once, else 1001 (going away). Both mean "reconnect" to a peer.
    pub fn shutdown_close(&self) -> latchkey_protocol::CloseCode {
        if self.config.cluster.enabled() {
            latchkey_protocol::CloseCode::ServiceRestart
        } else {
            latchkey_protocol::CloseCode::GoingAway
        }
    }

    /// How calls reach the tenant's device: its socket here, else (in cluster
    /// mode) the replica that holds it (docs/cluster.md, "Calls across
    /// replicas"). The session logic does not tell them apart.
    pub fn link(&self, tenant_id: &str, device_id: &str) -> Option<Arc<dyn Link>> {
        if let Some(link) = self.registry.link(device_id) {
            return Some(link);
        }
        self.peers.remote_link(
            &self.sessions,
            self.config.limits.max_calls_in_flight_per_device,
            tenant_id,
            device_id,
        )
    }

    /// Whether the tenant's device is online here or on another replica.
    pub fn is_online(&self, tenant_id: &str, device_id: &str) -> bool {
        self.registry
            .link_in_tenant(tenant_id, device_id, None)
            .is_some()
            || self.peers.holds_elsewhere(tenant_id, device_id)
    }

    /// Ids of the tenant's online devices, here and on the other replicas.
    pub fn online_in_tenant(&self, tenant_id: &str) -> Vec<String> {
        let mut ids = self.registry.online_in_tenant(tenant_id);
        ids.extend(self.peers.online_elsewhere(tenant_id));
        ids.sort();
        ids.dedup();
        ids
    }

    /// Wait until the tenant has an online device anywhere (`device_id`, when
    /// one is named), or `deadline` passes.
    pub async fn wait_online(
        &self,
        tenant_id: &str,
        device_id: Option<&str>,
        deadline: std::time::Duration,
    ) -> bool {
        let end = tokio::time::Instant::now() + deadline;
        let online = || match device_id {
            Some(id) => self.is_online(tenant_id, id),
            None => !self.online_in_tenant(tenant_id).is_empty(),
        };
        loop {
            // Armed before the check, so a device arriving in between wakes it.
            let (here, elsewhere) = (self.registry.came_online(), self.peers.learnt_online());
            if online() {
                return true;
            }
            tokio::select! {
                () = here => {}
                () = elsewhere => {}
                () = tokio::time::sleep_until(end) => return online(),
            }
        }
    }

    /// The tunables the core runs under.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("backend", &self.store.backend())
            .finish_non_exhaustive()
    }
}
