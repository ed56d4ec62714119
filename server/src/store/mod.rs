//! All persistence. One trait, two implementations (SQLite, the embedded default, and
//! PostgreSQL for production) generated from the same SQL by [`sql`].
//!
//! Rules every method keeps:
//! - tenant data is always addressed with its tenant id, so a foreign id behaves
//!   exactly like an unknown one;
//! - secrets arrive already hashed ([`crate::auth::secret::SecretHash`]); nothing here
//!   ever sees a plaintext credential;
//! - a multi-statement change runs in one transaction and is durable before the
//!   method returns (the authorize endpoint relies on this to reply only after commit).

mod audit_chain;
pub mod audit_keeping;
mod audit_reads;
pub mod commit_thread;
mod console_sessions;
mod delegations;
mod error;
pub mod expiry_notices;
pub mod group_commit;
mod mcp_choices;
mod members;
mod pending_pairings;
mod policies;
mod postgres;
mod records;
mod sql;
mod sql_batches;
mod sql_pairings;
mod sqlite;
mod timed;
mod timed_keeping;
pub mod token_reads;
pub mod webhooks;
pub(crate) mod write_tx;

use async_trait::async_trait;

pub use audit_chain::AuditChainStore;
pub use audit_keeping::{AuditKeepingStore, AuditKeyRecord};
pub use console_sessions::{ConsoleSessionRecord, ConsoleSessionStore};
pub use delegations::{DelegationRecord, DelegationStore, SigningKeyRecord};
pub use error::StoreError;
pub use expiry_notices::ExpiryNoticeStore;
pub use mcp_choices::{ChoiceKey, MAX_CHOICES_PER_TOKEN, McpChoiceRecord, McpChoiceStore};
pub use members::MemberStore;
pub use pending_pairings::{PendingPairingRecord, PendingPairingStore};
pub use policies::{PolicyRows, PolicyStore};
pub use webhooks::WebhookStore;

/// Ids per query when sweeping grants: well under SQLite's 32,766 bound variables.
pub const GRANT_BATCH: usize = 500;
/// Token hashes per query when upgrades read their grants together.
pub const TOKEN_BATCH: usize = 64;
pub use postgres::PostgresStore;
pub use records::*;
pub use sqlite::{SQLITE_FILE, SQLITE_MAX_CONNECTIONS, SqliteStore};
pub use timed::TimedStore;

/// What `rotate_device_token` found.
#[derive(Debug, Clone)]
pub enum RotateOutcome {
    /// The bearer was the current token: rotated, new grant returned.
    Rotated(DeviceRecord),
    /// The bearer was the previous token and the successor matches: identical grant.
    ExactRetry(DeviceRecord),
    /// Refused. When the bearer matched a device (as current or previous token), its
    /// tenant and id are given so the refusal can be audited in that tenant.
    Refused(Option<(String, String)>),
}

/// What `forget_device` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forget {
    /// Deleted.
    Forgotten,
    /// The device's grant is still live: nothing was changed.
    Live,
    /// No such device in this tenant.
    NotFound,
}

/// What `insert_pairing` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingInsert {
    Inserted,
    /// The tenant has as many unused links as it may.
    QuotaReached,
    /// The member the link is for has as many unused links as they may.
    MemberQuotaReached,
    /// The member the link was for is not (or no longer) in the team.
    NoSuchMember,
}

/// How many unused, unexpired pairing links may be held.
#[derive(Debug, Clone, Copy)]
pub struct PairingQuota {
    pub per_tenant: i64,
    pub per_member: i64,
}

/// Inputs of a new pairing.
#[derive(Debug, Clone)]
pub struct NewPairing {
    pub id: String,
    pub tenant_id: String,
    pub secret_hash: String,
    pub label: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    /// The member the link is for: the device will be theirs.
    pub owner_id: Option<String>,
}

/// The device created when a pairing is redeemed.
#[derive(Debug, Clone)]
pub struct NewDevice {
    pub id: String,
    pub label: String,
    pub token_hash: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub renew_after: i64,
}

/// The new grant written by a renewal.
#[derive(Debug, Clone, Copy)]
pub struct GrantTimes {
    pub now: i64,
    pub expires_at: i64,
    pub renew_after: i64,
}

/// What a connection event tells the store about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSeen {
    pub tenant_id: String,
    pub device_id: String,
    pub at: i64,
    /// (name, version) from the handshake; None keeps what is stored.
    pub browser: Option<(String, String)>,
}

impl DeviceSeen {
    /// One row per device, as `seen` would leave it applied one after another in
    /// time order: the latest time, and the browser of the latest row that has one.
    /// Rows of equal time count in slice order. A batch can hold a device's
    /// disconnect and its reconnect, queued in either order.
    pub fn latest_per_device(seen: &[DeviceSeen]) -> Vec<DeviceSeen> {
        // Each kept row with the time its browser was reported at.
        let mut rows: Vec<(DeviceSeen, i64)> = Vec::with_capacity(seen.len());
        let mut index: std::collections::HashMap<(&str, &str), usize> =
            std::collections::HashMap::with_capacity(seen.len());
        for s in seen {
            match index.get(&(s.tenant_id.as_str(), s.device_id.as_str())) {
                None => {
                    index.insert((&s.tenant_id, &s.device_id), rows.len());
                    rows.push((s.clone(), s.at));
                }
                Some(&i) => {
                    let (row, browser_at) = &mut rows[i];
                    row.at = row.at.max(s.at);
                    if s.browser.is_some() && (row.browser.is_none() || s.at >= *browser_at) {
                        row.browser.clone_from(&s.browser);
                        *browser_at = s.at;
                    }
                }
            }
        }
        rows.into_iter().map(|(row, _)| row).collect()
    }
}

#[async_trait]
pub trait Store:
    MemberStore
    + PendingPairingStore
    + PolicyStore
    + DelegationStore
    + AuditChainStore
    + AuditKeepingStore
    + ExpiryNoticeStore
    + WebhookStore
    + McpChoiceStore
    + ConsoleSessionStore
    + Send
    + Sync
    + 'static
{
    /// Which backend this is, for logs and `check-config`.
    fn backend(&self) -> &'static str;

    /// Apply pending migrations.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// A cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;

    // Tenants (operator-level: not tenant-scoped by definition).
    async fn create_tenant(&self, tenant: &TenantRecord) -> Result<(), StoreError>;
    async fn list_tenants(&self) -> Result<Vec<TenantRecord>, StoreError>;
    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantRecord>, StoreError>;
    /// Create `tenant` and its first admin token in one transaction, but only if the
    /// store has no tenant yet. Returns false when a tenant already existed.
    async fn bootstrap(
        &self,
        tenant: &TenantRecord,
        token: &ApiTokenRecord,
    ) -> Result<bool, StoreError>;

    // API tokens.
    async fn insert_api_token(&self, token: &ApiTokenRecord) -> Result<(), StoreError>;
    /// Global lookup by hash: the hash is what identifies the tenant.
    async fn api_token_by_hash(&self, hash: &str) -> Result<Option<ApiTokenRecord>, StoreError>;
    async fn list_api_tokens(&self, tenant_id: &str) -> Result<Vec<ApiTokenRecord>, StoreError>;
    /// Revoke; returns the token if it exists in this tenant (revoked now or before).
    async fn revoke_api_token(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<ApiTokenRecord>, StoreError>;
    async fn touch_api_token(&self, tenant_id: &str, id: &str, now: i64) -> Result<(), StoreError>;
    /// Count one pairing attempt of client address `peer` in the window `minute`
    /// (Unix minutes) and return the window's count: the per-address limit
    /// across replicas (docs/cluster.md, "Rate limits").
    async fn charge_peer(&self, peer: &str, minute: i64) -> Result<u32, StoreError>;
    /// Forget the windows before `minute`; returns how many went.
    async fn prune_peer_charges(&self, minute: i64) -> Result<u64, StoreError>;
    /// Of the tenant's API token and delegation ids `ids` (those in use on a
    /// node), the ones not revoked: a delegation also needs the API token at its
    /// root unrevoked. Expiry is not judged here (each lease has its timer).
    async fn unrevoked_token_ids(
        &self,
        tenant_id: &str,
        ids: &[String],
    ) -> Result<Vec<String>, StoreError>;

    // Pairings.
    /// Insert unless the tenant already has `quota.per_tenant` unused, unexpired
    /// pairings, the member it is for has `quota.per_member`, or that member is not
    /// in the team (all checked in the same transaction).
    async fn insert_pairing(
        &self,
        pairing: &NewPairing,
        now: i64,
        quota: PairingQuota,
    ) -> Result<PairingInsert, StoreError>;
    /// Atomically consume an unused, unexpired pairing and create its device.
    /// Exactly one of any number of concurrent callers wins; the others get `None`.
    async fn redeem_pairing(
        &self,
        secret_hash: &str,
        device: &NewDevice,
    ) -> Result<Option<DeviceRecord>, StoreError>;

    // Devices.
    /// The devices whose *current* token has one of these hashes, in any state, each
    /// once, in no particular order (hashes nobody holds are simply missing). One query per
    /// [`TOKEN_BATCH`] hashes: the upgrades of a reconnect storm read their grants
    /// together ([`token_reads`]).
    async fn devices_by_token_hash(
        &self,
        hashes: &[String],
    ) -> Result<Vec<DeviceRecord>, StoreError>;
    /// The device whose *current* token has this hash, in any state.
    async fn device_by_token_hash(&self, hash: &str) -> Result<Option<DeviceRecord>, StoreError> {
        let found = self.devices_by_token_hash(&[hash.to_string()]).await?;
        Ok(found.into_iter().find(|d| d.token_hash == hash))
    }
    /// Whose current or previous token has this hash: `(tenant id, device id)`. A
    /// renewal is charged to that device's budget, and a bearer no device holds to
    /// the peer's, before any write transaction (docs/security.md).
    async fn device_for_bearer(
        &self,
        bearer_hash: &str,
    ) -> Result<Option<(String, String)>, StoreError>;
    /// The exact-retry rotation of docs/pairing-and-grants.md, in one transaction.
    async fn rotate_device_token(
        &self,
        bearer_hash: &str,
        next_hash: &str,
        grant: GrantTimes,
    ) -> Result<RotateOutcome, StoreError>;
    async fn device(&self, tenant_id: &str, id: &str) -> Result<Option<DeviceRecord>, StoreError>;
    async fn list_devices(&self, tenant_id: &str) -> Result<Vec<DeviceRecord>, StoreError>;
    /// The grants of the tenant's devices among `ids` (missing ids are not returned),
    /// read in batches: one sweep of a node's online devices.
    async fn device_grants(
        &self,
        tenant_id: &str,
        ids: &[String],
    ) -> Result<Vec<DeviceGrant>, StoreError>;
    async fn rename_device(
        &self,
        tenant_id: &str,
        id: &str,
        label: &str,
    ) -> Result<Option<DeviceRecord>, StoreError>;
    /// Revoke one device; returns it if it exists in this tenant.
    async fn revoke_device(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<DeviceRecord>, StoreError>;
    /// Revoke every live device of the tenant and void its unused pairings, in one
    /// transaction. Returns the ids revoked now and the number of pairings voided.
    async fn revoke_all_devices(
        &self,
        tenant_id: &str,
        now: i64,
    ) -> Result<(Vec<String>, u64), StoreError>;
    /// Local mode: create the device for a local extension, or extend its grant if it
    /// exists and is not revoked. A revoked one is returned as it is, unchanged.
    async fn ensure_local_device(
        &self,
        tenant_id: &str,
        device: &NewDevice,
    ) -> Result<DeviceRecord, StoreError>;
    /// Delete a device whose grant has ended (revoked or expired) from the tenant's
    /// list; a live one is refused (revoke it first). Audit rows about it stay.
    async fn forget_device(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Forget, StoreError>;
    /// Last-seen (and browser) updates and audit events in one transaction: the
    /// group commit of [`crate::audit::Audit`], so a reconnect storm costs one
    /// commit per batch instead of one per connection event.
    async fn record_activity(
        &self,
        seen: &[DeviceSeen],
        events: &[NewAuditEvent],
    ) -> Result<(), StoreError>;

    // Audit.
    async fn insert_audit(&self, event: &NewAuditEvent) -> Result<(), StoreError>;
    /// Newest first, the rows `filter` admits.
    async fn list_audit(
        &self,
        tenant_id: &str,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError>;
}

/// Whether a connection released to the pool may be reused. A dropped transaction
/// queues its ROLLBACK; the ping runs it. If the connection still counts as in a
/// transaction afterwards, the ROLLBACK failed (SQLite rolls back by itself on
/// SQLITE_FULL, so the explicit one finds no transaction) and every later BEGIN on
/// it would fail: it is closed instead, and the pool opens a fresh one.
async fn release_clean<C: sqlx::Connection>(conn: &mut C) -> Result<bool, sqlx::Error> {
    // The common case costs nothing: no transaction was left behind.
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    if conn.is_in_transaction() {
        tracing::warn!("closing a store connection left inside a failed transaction");
        return Ok(false);
    }
    Ok(true)
}
