//! [`TimedStore`] for the audit trail's keeping, expiry notices and webhooks:
//! every operation timed into `latchkey_store_query_seconds{op}` like the rest.

use std::time::Instant;

use async_trait::async_trait;

use super::timed::{TimedStore, timed};
use super::webhooks::{DeliveryRecord, Progress, WebhookRecord};
use super::*;
use crate::telemetry::metrics::STORE_QUERY;

#[async_trait]
impl AuditChainStore for TimedStore {
    async fn audit_chain_page(
        &self,
        tenant_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::audit_chain::ChainedRow>, StoreError> {
        timed!(
            "audit_chain_page",
            self.inner.audit_chain_page(tenant_id, after, limit)
        )
    }
    async fn audit_head(&self, tenant_id: &str) -> Result<Option<(i64, String)>, StoreError> {
        timed!("audit_head", self.inner.audit_head(tenant_id))
    }
    async fn audit_unchained(&self, tenant_id: &str) -> Result<Option<i64>, StoreError> {
        timed!("audit_unchained", self.inner.audit_unchained(tenant_id))
    }
}

#[async_trait]
impl super::AuditKeepingStore for TimedStore {
    async fn audit_keys(&self) -> Result<Vec<super::AuditKeyRecord>, StoreError> {
        timed!("audit_keys", self.inner.audit_keys())
    }
    async fn add_audit_key(&self, key: &super::AuditKeyRecord) -> Result<(), StoreError> {
        timed!("add_audit_key", self.inner.add_audit_key(key))
    }
    async fn audit_checkpoints_due(&self, limit: i64) -> Result<Vec<String>, StoreError> {
        timed!(
            "audit_checkpoints_due",
            self.inner.audit_checkpoints_due(limit)
        )
    }
    async fn write_audit_checkpoint(
        &self,
        tenant_id: &str,
        at: i64,
        sign: super::audit_keeping::CheckpointSigner<'_>,
    ) -> Result<Option<i64>, StoreError> {
        timed!(
            "write_audit_checkpoint",
            self.inner.write_audit_checkpoint(tenant_id, at, sign)
        )
    }
    async fn audit_retentions(&self) -> Result<Vec<(String, Option<i64>)>, StoreError> {
        timed!("audit_retentions", self.inner.audit_retentions())
    }
    async fn set_audit_retention(
        &self,
        tenant_id: &str,
        days: Option<i64>,
    ) -> Result<(), StoreError> {
        timed!(
            "set_audit_retention",
            self.inner.set_audit_retention(tenant_id, days)
        )
    }
    async fn prune_audit(
        &self,
        tenant_id: &str,
        before_at: i64,
    ) -> Result<Option<super::audit_keeping::Pruned>, StoreError> {
        timed!("prune_audit", self.inner.prune_audit(tenant_id, before_at))
    }
    async fn audit_seq_bounds(
        &self,
        tenant_id: &str,
        since: Option<i64>,
        until: Option<i64>,
    ) -> Result<(Option<i64>, Option<i64>), StoreError> {
        timed!(
            "audit_seq_bounds",
            self.inner.audit_seq_bounds(tenant_id, since, until)
        )
    }
    async fn audit_next_checkpoint(
        &self,
        tenant_id: &str,
        from: i64,
    ) -> Result<Option<i64>, StoreError> {
        timed!(
            "audit_next_checkpoint",
            self.inner.audit_next_checkpoint(tenant_id, from)
        )
    }
}

#[async_trait]
impl super::ExpiryNoticeStore for TimedStore {
    async fn claim_expiry_notices(
        &self,
        now: i64,
        within_ms: i64,
        level: i64,
        detail: super::expiry_notices::NoticeDetail,
    ) -> Result<Vec<super::expiry_notices::ExpiryNotice>, StoreError> {
        timed!(
            "claim_expiry_notices",
            self.inner
                .claim_expiry_notices(now, within_ms, level, detail)
        )
    }
}

#[async_trait]
impl WebhookStore for TimedStore {
    async fn create_webhook(&self, w: &WebhookRecord, max: i64) -> Result<bool, StoreError> {
        timed!("create_webhook", self.inner.create_webhook(w, max))
    }
    async fn list_webhooks(&self, tenant_id: &str) -> Result<Vec<WebhookRecord>, StoreError> {
        timed!("list_webhooks", self.inner.list_webhooks(tenant_id))
    }
    async fn get_webhook(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Option<WebhookRecord>, StoreError> {
        timed!("get_webhook", self.inner.get_webhook(tenant_id, id))
    }
    async fn delete_webhook(&self, tenant_id: &str, id: &str) -> Result<bool, StoreError> {
        timed!("delete_webhook", self.inner.delete_webhook(tenant_id, id))
    }
    async fn enable_webhook(
        &self,
        tenant_id: &str,
        id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        timed!(
            "enable_webhook",
            self.inner.enable_webhook(tenant_id, id, now)
        )
    }
    async fn claim_webhooks(
        &self,
        now: i64,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<WebhookRecord>, StoreError> {
        timed!(
            "claim_webhooks",
            self.inner.claim_webhooks(now, lease_ms, limit)
        )
    }
    async fn release_webhook(&self, id: &str, p: &Progress) -> Result<(), StoreError> {
        timed!("release_webhook", self.inner.release_webhook(id, p))
    }
    async fn log_delivery(&self, d: &DeliveryRecord) -> Result<(), StoreError> {
        timed!("log_delivery", self.inner.log_delivery(d))
    }
    async fn list_deliveries(
        &self,
        endpoint_id: &str,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        timed!(
            "list_deliveries",
            self.inner.list_deliveries(endpoint_id, limit)
        )
    }
}
