//! A `Store` decorator that times every operation into
//! `latchkey_store_query_seconds{op}` (both backends, one place).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::*;
use crate::telemetry::metrics::STORE_QUERY;

#[derive(Clone)]
pub struct TimedStore {
    pub(super) inner: Arc<dyn Store>,
}

impl TimedStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self { inner }
    }
}

macro_rules! timed {
    ($op:literal, $call:expr) => {{
        let started = Instant::now();
        let result = $call.await;
        metrics::histogram!(STORE_QUERY, "op" => $op).record(started.elapsed().as_secs_f64());
        result
    }};
}

#[async_trait]
impl Store for TimedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn migrate(&self) -> Result<(), StoreError> {
        timed!("migrate", self.inner.migrate())
    }
    async fn ping(&self) -> Result<(), StoreError> {
        timed!("ping", self.inner.ping())
    }
    async fn create_tenant(&self, tenant: &TenantRecord) -> Result<(), StoreError> {
        timed!("create_tenant", self.inner.create_tenant(tenant))
    }
    async fn list_tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        timed!("list_tenants", self.inner.list_tenants())
    }
    async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantRecord>, StoreError> {
        timed!("tenant_by_name", self.inner.tenant_by_name(name))
    }
    async fn bootstrap(
        &self,
        tenant: &TenantRecord,
        token: &ApiTokenRecord,
    ) -> Result<bool, StoreError> {
        timed!("bootstrap", self.inner.bootstrap(tenant, token))
    }
    async fn insert_api_token(&self, token: &ApiTokenRecord) -> Result<(), StoreError> {
        timed!("insert_api_token", self.inner.insert_api_token(token))
    }
    async fn api_token_by_hash(&self, hash: &str) -> Result<Option<ApiTokenRecord>, StoreError> {
        timed!("api_token_by_hash", self.inner.api_token_by_hash(hash))
    }
    async fn list_api_tokens(&self, tenant_id: &str) -> Result<Vec<ApiTokenRecord>, StoreError> {
        timed!("list_api_tokens", self.inner.list_api_tokens(tenant_id))
    }
    async fn revoke_api_token(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<ApiTokenRecord>, StoreError> {
        timed!(
            "revoke_api_token",
            self.inner.revoke_api_token(tenant_id, id, now)
        )
    }
    async fn touch_api_token(&self, tenant_id: &str, id: &str, now: i64) -> Result<(), StoreError> {
        timed!(
            "touch_api_token",
            self.inner.touch_api_token(tenant_id, id, now)
        )
    }
    async fn insert_pairing(
        &self,
        pairing: &NewPairing,
        now: i64,
        quota: PairingQuota,
    ) -> Result<PairingInsert, StoreError> {
        timed!(
            "insert_pairing",
            self.inner.insert_pairing(pairing, now, quota)
        )
    }
    async fn redeem_pairing(
        &self,
        secret_hash: &str,
        device: &NewDevice,
    ) -> Result<Option<DeviceRecord>, StoreError> {
        timed!(
            "redeem_pairing",
            self.inner.redeem_pairing(secret_hash, device)
        )
    }
    async fn devices_by_token_hash(
        &self,
        hashes: &[String],
    ) -> Result<Vec<DeviceRecord>, StoreError> {
        timed!(
            "devices_by_token_hash",
            self.inner.devices_by_token_hash(hashes)
        )
    }
    async fn device_for_bearer(
        &self,
        bearer_hash: &str,
    ) -> Result<Option<(String, String)>, StoreError> {
        timed!(
            "device_for_bearer",
            self.inner.device_for_bearer(bearer_hash)
        )
    }
    async fn rotate_device_token(
        &self,
        bearer_hash: &str,
        next_hash: &str,
        grant: GrantTimes,
    ) -> Result<RotateOutcome, StoreError> {
        timed!(
            "rotate_device_token",
            self.inner
                .rotate_device_token(bearer_hash, next_hash, grant)
        )
    }
    async fn device(&self, tenant_id: &str, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        timed!("device", self.inner.device(tenant_id, id))
    }
    async fn list_devices(&self, tenant_id: &str) -> Result<Vec<DeviceRecord>, StoreError> {
        timed!("list_devices", self.inner.list_devices(tenant_id))
    }
    async fn device_grants(
        &self,
        tenant_id: &str,
        ids: &[String],
    ) -> Result<Vec<DeviceGrant>, StoreError> {
        timed!("device_grants", self.inner.device_grants(tenant_id, ids))
    }
    async fn charge_peer(&self, peer: &str, minute: i64) -> Result<u32, StoreError> {
        timed!("charge_peer", self.inner.charge_peer(peer, minute))
    }
    async fn prune_peer_charges(&self, minute: i64) -> Result<u64, StoreError> {
        timed!("prune_peer_charges", self.inner.prune_peer_charges(minute))
    }
    async fn unrevoked_token_ids(
        &self,
        tenant_id: &str,
        ids: &[String],
    ) -> Result<Vec<String>, StoreError> {
        timed!(
            "unrevoked_token_ids",
            self.inner.unrevoked_token_ids(tenant_id, ids)
        )
    }
    async fn rename_device(
        &self,
        tenant_id: &str,
        id: &str,
        label: &str,
    ) -> Result<Option<DeviceRecord>, StoreError> {
        timed!(
            "rename_device",
            self.inner.rename_device(tenant_id, id, label)
        )
    }
    async fn revoke_device(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<DeviceRecord>, StoreError> {
        timed!(
            "revoke_device",
            self.inner.revoke_device(tenant_id, id, now)
        )
    }
    async fn revoke_all_devices(
        &self,
        tenant_id: &str,
        now: i64,
    ) -> Result<(Vec<String>, u64), StoreError> {
        timed!(
            "revoke_all_devices",
            self.inner.revoke_all_devices(tenant_id, now)
        )
    }
    async fn ensure_local_device(
        &self,
        tenant_id: &str,
        device: &NewDevice,
    ) -> Result<DeviceRecord, StoreError> {
        timed!(
            "ensure_local_device",
            self.inner.ensure_local_device(tenant_id, device)
        )
    }
    async fn forget_device(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Forget, StoreError> {
        timed!(
            "forget_device",
            self.inner.forget_device(tenant_id, id, now)
        )
    }
    async fn record_activity(
        &self,
        seen: &[crate::store::DeviceSeen],
        events: &[NewAuditEvent],
    ) -> Result<(), StoreError> {
        timed!("record_activity", self.inner.record_activity(seen, events))
    }
    async fn insert_audit(&self, event: &NewAuditEvent) -> Result<(), StoreError> {
        timed!("insert_audit", self.inner.insert_audit(event))
    }
    async fn list_audit(
        &self,
        tenant_id: &str,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        timed!(
            "list_audit",
            self.inner.list_audit(tenant_id, filter, limit)
        )
    }
}

#[async_trait]
impl MemberStore for TimedStore {
    async fn insert_member(&self, member: &MemberRecord) -> Result<(), StoreError> {
        timed!("insert_member", self.inner.insert_member(member))
    }
    async fn list_members(
        &self,
        tenant_id: &str,
        include_removed: bool,
    ) -> Result<Vec<MemberRecord>, StoreError> {
        timed!(
            "list_members",
            self.inner.list_members(tenant_id, include_removed)
        )
    }
    async fn member(&self, tenant_id: &str, id: &str) -> Result<Option<MemberRecord>, StoreError> {
        timed!("member", self.inner.member(tenant_id, id))
    }
    async fn member_by_email(
        &self,
        tenant_id: &str,
        email: &str,
    ) -> Result<Option<MemberRecord>, StoreError> {
        timed!(
            "member_by_email",
            self.inner.member_by_email(tenant_id, email)
        )
    }
    async fn set_member_role(
        &self,
        tenant_id: &str,
        id: &str,
        role: &str,
    ) -> Result<Option<MemberRecord>, StoreError> {
        timed!(
            "set_member_role",
            self.inner.set_member_role(tenant_id, id, role)
        )
    }
    async fn insert_member_token(&self, token: &ApiTokenRecord) -> Result<bool, StoreError> {
        timed!("insert_member_token", self.inner.insert_member_token(token))
    }
    async fn remove_member(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<MemberRemoved>, StoreError> {
        timed!(
            "remove_member",
            self.inner.remove_member(tenant_id, id, now)
        )
    }
}

#[async_trait]
impl PendingPairingStore for TimedStore {
    async fn pending_pairings(
        &self,
        tenant_id: &str,
        now: i64,
    ) -> Result<Vec<PendingPairingRecord>, StoreError> {
        timed!(
            "pending_pairings",
            self.inner.pending_pairings(tenant_id, now)
        )
    }
    async fn void_pairing(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<PendingPairingRecord>, StoreError> {
        timed!("void_pairing", self.inner.void_pairing(tenant_id, id, now))
    }
}

#[async_trait]
impl PolicyStore for TimedStore {
    async fn team_policy(&self, tenant_id: &str) -> Result<Option<String>, StoreError> {
        timed!("team_policy", self.inner.team_policy(tenant_id))
    }
    async fn set_team_policy(
        &self,
        tenant_id: &str,
        policy: Option<&str>,
    ) -> Result<(), StoreError> {
        timed!(
            "set_team_policy",
            self.inner.set_team_policy(tenant_id, policy)
        )
    }
    async fn device_policies(
        &self,
        tenant_id: &str,
        device_id: &str,
    ) -> Result<Option<PolicyRows>, StoreError> {
        timed!(
            "device_policies",
            self.inner.device_policies(tenant_id, device_id)
        )
    }
    async fn set_device_policy(
        &self,
        tenant_id: &str,
        device_id: &str,
        policy: Option<&str>,
    ) -> Result<bool, StoreError> {
        timed!(
            "set_device_policy",
            self.inner.set_device_policy(tenant_id, device_id, policy)
        )
    }
}

#[async_trait]
impl DelegationStore for TimedStore {
    async fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>, StoreError> {
        timed!("signing_keys", self.inner.signing_keys())
    }
    async fn rotate_signing_key(&self, key: &SigningKeyRecord) -> Result<(), StoreError> {
        timed!("rotate_signing_key", self.inner.rotate_signing_key(key))
    }
    async fn drop_signing_keys(&self, before: i64) -> Result<u64, StoreError> {
        timed!("drop_signing_keys", self.inner.drop_signing_keys(before))
    }
    async fn insert_delegation(&self, d: &DelegationRecord) -> Result<(), StoreError> {
        timed!("insert_delegation", self.inner.insert_delegation(d))
    }
    async fn delegation(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Option<DelegationRecord>, StoreError> {
        timed!("delegation", self.inner.delegation(tenant_id, id))
    }
    async fn live_delegation(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<DelegationRecord>, StoreError> {
        timed!(
            "live_delegation",
            self.inner.live_delegation(tenant_id, id, now)
        )
    }
    async fn delegations_under(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Vec<DelegationRecord>, StoreError> {
        timed!(
            "delegations_under",
            self.inner.delegations_under(tenant_id, id)
        )
    }
    async fn live_delegations(
        &self,
        tenant_id: &str,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DelegationRecord>, StoreError> {
        timed!(
            "live_delegations",
            self.inner.live_delegations(tenant_id, now, limit)
        )
    }
    async fn revoke_delegation(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<Vec<String>, StoreError> {
        timed!(
            "revoke_delegation",
            self.inner.revoke_delegation(tenant_id, id, now)
        )
    }
}

pub(super) use timed;
