//! The audit trail: who did what to which target, and how it ended. Metadata only:
//! never a parameter value, a label typed by a user beyond the device label, or a
//! secret. A failure to write an audit event is logged and does not fail the action
//! it describes (the action already happened). The rows are written by the store's
//! group-commit writer (`store/group_commit.rs`), together with the connection
//! bookkeeping queued meanwhile.

use std::sync::Arc;

use latchkey_protocol::text;

use crate::clock::Clock;
use crate::store::group_commit::GroupCommit;
pub use crate::store::group_commit::Priority;
use crate::store::{DeviceSeen, NewAuditEvent, Store};

/// Stable action names.
pub mod action {
    pub const TENANT_BOOTSTRAP: &str = "tenant.bootstrap";
    pub const TENANT_CREATE: &str = "tenant.create";
    pub const PAIRING_CREATE: &str = "pairing.create";
    pub const PAIRING_VOID: &str = "pairing.void";
    pub const DEVICE_PAIR: &str = "device.pair";
    pub const DEVICE_RENEW: &str = "device.renew";
    pub const DEVICE_RENEW_RETRY: &str = "device.renew_retry";
    pub const DEVICE_RENEW_REFUSED: &str = "device.renew_refused";
    pub const DEVICE_CONNECT: &str = "device.connect";
    pub const DEVICE_DISCONNECT: &str = "device.disconnect";
    pub const DEVICE_RENAME: &str = "device.rename";
    pub const DEVICE_REVOKE: &str = "device.revoke";
    pub const DEVICE_REVOKE_ALL: &str = "device.revoke_all";
    pub const DEVICE_FORGET: &str = "device.forget";
    /// The browser's person forgot this server in our extension: the device revoked
    /// by its own credential.
    pub const DEVICE_UNPAIR: &str = "device.unpair";
    pub const TOKEN_CREATE: &str = "token.create";
    pub const TOKEN_REVOKE: &str = "token.revoke";
    pub const MEMBER_ADD: &str = "member.add";
    pub const MEMBER_REMOVE: &str = "member.remove";
    /// A member's role changed (`detail`: from and to).
    pub const MEMBER_ROLE: &str = "member.role";
    pub const SESSION_START: &str = "session.start";
    pub const SESSION_END: &str = "session.end";
    pub const SESSION_INTERRUPT: &str = "session.interrupt";
    pub const SESSION_CALL: &str = "session.call";
    /// An agent asked the browser's person for help (`tool.request_help`
    /// reached the browser); its `session.call` row says how it ended.
    pub const SESSION_HELP_REQUESTED: &str = "session.help_requested";
    /// The browser's person was asked whether an agent may start a session.
    pub const SESSION_CONSENT_REQUESTED: &str = "session.consent_requested";
    /// A device's grant runs out within 7 days, or within 1 day.
    pub const DEVICE_EXPIRING: &str = "device.expiring";
    pub const DEVICE_KILL_SWITCH: &str = "device.kill_switch";
    pub const POLICY_SET: &str = "policy.set";
    pub const POLICY_DENY: &str = "policy.deny";
    pub const DELEGATION_CREATE: &str = "delegation.create";
    pub const DELEGATION_REVOKE: &str = "delegation.revoke";
    /// Rows past the team's retention removed.
    pub const AUDIT_PRUNE: &str = "audit.prune";
    /// The team's retention changed.
    pub const AUDIT_RETENTION: &str = "audit.retention";
    /// The trail exported.
    pub const AUDIT_EXPORT: &str = "audit.export";
    pub const WEBHOOK_CREATE: &str = "webhook.create";
    pub const WEBHOOK_DELETE: &str = "webhook.delete";
    pub const WEBHOOK_ENABLE: &str = "webhook.enable";
    pub const WEBHOOK_REDELIVER: &str = "webhook.redeliver";
    /// An endpoint failing for `webhooks.disable_after_secs`, stopped.
    pub const WEBHOOK_DISABLED: &str = "webhook.disabled";
}

#[derive(Clone)]
pub struct Audit {
    clock: Clock,
    /// Writes the rows, in one transaction with whatever else is queued.
    writer: GroupCommit,
    /// When each throttled kind of row was last written ([`Audit::due`]).
    throttle: Arc<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>>,
}

/// Throttle keys kept before those that are due again are swept.
const THROTTLE_KEYS_SWEEP_AT: usize = 4096;

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

impl<'a> Event<'a> {
    /// A device's own act on itself (pairing, renewal, unpairing, the kill
    /// switch): actor and target are both the device.
    pub fn by_device(
        tenant_id: &'a str,
        device_id: &str,
        action: &'static str,
        outcome: &'a str,
        detail: Option<String>,
    ) -> Self {
        Self {
            tenant_id,
            actor: device_ref(device_id),
            action,
            target: device_ref(device_id),
            outcome,
            detail,
        }
    }
}

impl Audit {
    /// Starts the group-commit writer on the current runtime.
    pub fn new(store: Arc<dyn Store>, clock: Clock) -> Self {
        Self {
            clock,
            writer: GroupCommit::start(store),
            throttle: Arc::default(),
        }
    }

    /// Whether a row of kind `key` may be written now, at most once per `every`:
    /// for what a peer can repeat at will (a refused connection), so that it cannot
    /// grow the trail.
    pub fn due(&self, key: &str, every: std::time::Duration) -> bool {
        let now = std::time::Instant::now();
        let mut last = self.throttle.lock().unwrap_or_else(|p| p.into_inner());
        // Only keys due again are swept, so a full table of fresh keys is kept
        // (and a row for a new key waits until one is due): bounded either way.
        if last.len() >= THROTTLE_KEYS_SWEEP_AT {
            last.retain(|_, at| now.duration_since(*at) < every);
            if last.len() >= THROTTLE_KEYS_SWEEP_AT {
                return false;
            }
        }
        match last.get(key) {
            Some(at) if now.duration_since(*at) < every => false,
            _ => {
                last.insert(key.to_string(), now);
                true
            }
        }
    }

    pub async fn record(&self, e: Event<'_>) {
        self.record_with(Priority::Urgent, e).await;
    }

    /// Record an event; returns once it is committed (or the failure logged).
    pub async fn record_with(&self, priority: Priority, e: Event<'_>) {
        self.record_rows(priority, None, e).await;
    }

    /// Record an event at background priority from a caller that must not wait
    /// for it (a socket's read loop): committed in order with the writer's
    /// other background rows, off the caller's path.
    pub fn record_detached(&self, e: Event<'_>) {
        let audit = self.clone();
        let (tenant_id, outcome) = (e.tenant_id.to_string(), e.outcome.to_string());
        let (actor, action, target, detail) = (e.actor, e.action, e.target, e.detail);
        tokio::spawn(async move {
            let e = Event {
                tenant_id: &tenant_id,
                actor,
                action,
                target,
                outcome: &outcome,
                detail,
            };
            audit.record_with(Priority::Background, e).await;
        });
    }

    /// A device's last-seen time (and its browser, from a handshake) and an event
    /// about it (its connect or disconnect), committed together as one queued item.
    pub async fn record_seen(
        &self,
        priority: Priority,
        device_id: &str,
        at: i64,
        browser: Option<(&str, &str)>,
        e: Event<'_>,
    ) {
        let seen = DeviceSeen {
            tenant_id: e.tenant_id.to_string(),
            device_id: device_id.to_string(),
            at,
            browser: browser.map(|(n, v)| {
                (
                    text::clean(n, text::MAX_BROWSER_FIELD_CHARS),
                    text::clean(v, text::MAX_BROWSER_FIELD_CHARS),
                )
            }),
        };
        self.record_rows(priority, Some(seen), e).await;
    }

    /// Queue an event at background priority and return once it is queued, not
    /// committed ([`GroupCommit::enqueue`]): a tool call's row, on the agent's
    /// path. A full queue makes the caller wait; no row is dropped.
    ///
    /// [`GroupCommit::enqueue`]: crate::store::group_commit::GroupCommit::enqueue
    pub async fn queue(&self, e: Event<'_>) {
        let row = self.row(e);
        self.writer.enqueue(Priority::Background, row).await;
    }

    /// Returns once every row queued before it is committed (at shutdown).
    pub async fn flush(&self) {
        if let Err(err) = self.writer.commit(Priority::Background, None, None).await {
            tracing::warn!(error = %err, "audit rows could not be flushed");
        }
    }

    async fn record_rows(&self, priority: Priority, seen: Option<DeviceSeen>, e: Event<'_>) {
        let row = self.row(e);
        let action = row.action.clone();
        if let Err(err) = self.writer.commit(priority, seen, Some(row)).await {
            tracing::warn!(error = %err, action, "audit event not written");
        }
    }

    fn row(&self, e: Event<'_>) -> NewAuditEvent {
        // Whatever part of a row came from a peer is cleaned and bounded here, once
        // for every writer (docs/security.md).
        NewAuditEvent {
            tenant_id: e.tenant_id.to_string(),
            at: self.clock.now_ms(),
            actor: bounded(e.actor, text::MAX_AUDIT_REF_CHARS),
            action: e.action.to_string(),
            target: bounded(e.target, text::MAX_AUDIT_REF_CHARS),
            outcome: bounded(e.outcome.to_string(), text::MAX_AUDIT_REF_CHARS),
            detail: e.detail.map(|d| bounded(d, text::MAX_AUDIT_DETAIL_CHARS)),
        }
    }
}

/// `raw` without unsafe characters, cut to `max` characters (ending in `…` when
/// cut). Most rows need neither, and keep their strings uncopied: a tool
/// call's row is made on every call.
fn bounded(raw: String, max: usize) -> String {
    if text::is_clean(&raw, max) {
        return raw;
    }
    text::truncate(&text::clean(&raw, max.saturating_add(1)), max)
}

/// `token:<name>` — an API token acting.
pub fn token_actor(name: &str) -> String {
    format!("token:{name}")
}

/// `device:<id>` — a device acting, or a device as a target.
pub fn device_ref(id: &str) -> String {
    format!("device:{id}")
}

/// `member:<id>` — a member as a target, or a person signed in to the console
/// through single sign-on acting.
pub fn member_ref(id: &str) -> String {
    format!("member:{id}")
}

/// `session:<id>` — a session as a target.
pub fn session_ref(id: &str) -> String {
    format!("session:{id}")
}
