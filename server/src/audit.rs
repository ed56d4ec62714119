//! The audit trail: who did what to which target, and how it ended. Metadata only:
//! never a parameter value, a label typed by a user beyond the device label, or a
//! secret. A failure to write an audit event is logged and does not fail the action
//! it describes (the action already happened).

use std::sync::Arc;

use crate::clock::Clock;
use crate::store::{NewAuditEvent, Store};

/// Stable action names.
pub mod action {
    pub const TENANT_BOOTSTRAP: &str = "tenant.bootstrap";
    pub const TENANT_CREATE: &str = "tenant.create";
    pub const PAIRING_CREATE: &str = "pairing.create";
    pub const DEVICE_PAIR: &str = "device.pair";
    pub const DEVICE_RENEW: &str = "device.renew";
    pub const DEVICE_RENEW_RETRY: &str = "device.renew_retry";
    pub const DEVICE_RENEW_REFUSED: &str = "device.renew_refused";
    pub const DEVICE_CONNECT: &str = "device.connect";
    pub const DEVICE_DISCONNECT: &str = "device.disconnect";
    pub const DEVICE_RENAME: &str = "device.rename";
    pub const DEVICE_REVOKE: &str = "device.revoke";
    pub const DEVICE_REVOKE_ALL: &str = "device.revoke_all";
    pub const TOKEN_CREATE: &str = "token.create";
    pub const TOKEN_REVOKE: &str = "token.revoke";
}

#[derive(Clone)]
pub struct Audit {
    store: Arc<dyn Store>,
    clock: Clock,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Audit")
    }
}

/// One event to record.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub tenant_id: &'a str,
    pub actor: String,
    pub action: &'static str,
    pub target: String,
    pub outcome: &'a str,
    pub detail: Option<String>,
}

impl Audit {
    pub fn new(store: Arc<dyn Store>, clock: Clock) -> Self {
        Self { store, clock }
    }

    pub async fn record(&self, e: Event<'_>) {
        let row = NewAuditEvent {
            tenant_id: e.tenant_id.to_string(),
            at: self.clock.now_ms(),
            actor: e.actor,
            action: e.action.to_string(),
            target: e.target,
            outcome: e.outcome.to_string(),
            detail: e.detail,
        };
        if let Err(err) = self.store.insert_audit(&row).await {
            tracing::warn!(error = %err, action = row.action, "audit event not written");
        }
    }
}

/// `token:<name>` — an API token acting.
pub fn token_actor(name: &str) -> String {
    format!("token:{name}")
}

/// `device:<id>` — a device acting, or a device as a target.
pub fn device_ref(id: &str) -> String {
    format!("device:{id}")
}
