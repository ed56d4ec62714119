//! Keeping the audit trail over time (docs/operations.md, "Tamper evidence" and
//! "Retention"): a signed checkpoint in every chain that has grown, every
//! `checkpoint_interval_secs` and when the node stops; and rows past their team's
//! retention pruned, up to a checkpoint, so what is left still verifies.

use std::path::PathBuf;
use std::time::Duration;

use latchkey_protocol::audit_chain::GATEWAY_ACTOR;
use serde::{Deserialize, Serialize};

use crate::audit::{Event, Priority, action};
use crate::core::Core;
use crate::store::StoreError;

/// The `[audit]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// How often a chain that has grown gets a signed checkpoint. The rows after
    /// the last one are covered by the chain but not yet by a signature.
    pub checkpoint_interval_secs: u64,
    /// How long a team keeps its rows unless it sets its own retention.
    pub retention_days: u32,
    /// How often rows past retention are pruned.
    pub prune_interval_secs: u64,
    /// An Ed25519 key (PKCS#8 PEM) to sign checkpoints with, kept outside the
    /// store; without it the key is made on first start and kept in the store.
    pub signing_key_file: Option<PathBuf>,
}

/// The longest retention a team may set: ten years.
pub const MAX_RETENTION_DAYS: i64 = 3_660;

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            checkpoint_interval_secs: 600,
            retention_days: 180,
            prune_interval_secs: 3_600,
            signing_key_file: None,
        }
    }
}

impl AuditConfig {
    /// Each broken rule, worded for the operator.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !(1..=86_400).contains(&self.checkpoint_interval_secs) {
            out.push("audit.checkpoint_interval_secs must be 1..=86400".into());
        }
        if !(1..=MAX_RETENTION_DAYS).contains(&i64::from(self.retention_days)) {
            out.push(format!(
                "audit.retention_days must be 1..={MAX_RETENTION_DAYS}"
            ));
        }
        if !(60..=86_400).contains(&self.prune_interval_secs) {
            out.push("audit.prune_interval_secs must be 60..=86400".into());
        }
        if let Some(path) = &self.signing_key_file
            && !path.is_file()
        {
            out.push(format!(
                "audit.signing_key_file {} is not a readable file",
                path.display()
            ));
        }
        out
    }
}

/// Tenants read per query when writing the checkpoints due.
const DUE_PAGE: i64 = 100;
/// Pages of due tenants per round: rows arriving meanwhile wait for the next.
const DUE_PAGES_PER_ROUND: usize = 100;

/// Sign the tenant's chain as it is now; the checkpoint's place, or `None` when
/// its last row already is one.
pub async fn checkpoint(core: &Core, tenant_id: &str) -> Result<Option<i64>, StoreError> {
    let at = core.clock.now_ms();
    let keys = core.audit_keys.clone();
    let sign = move |seq: i64, hash: &str| Ok(keys.sign_checkpoint(tenant_id, seq, hash, at));
    core.store
        .write_audit_checkpoint(tenant_id, at, &sign)
        .await
}

/// A checkpoint in every chain that has grown since its last; how many.
pub async fn checkpoint_all(core: &Core) -> Result<u64, StoreError> {
    let mut written = 0;
    for _ in 0..DUE_PAGES_PER_ROUND {
        let due = core.store.audit_checkpoints_due(DUE_PAGE).await?;
        for tenant in &due {
            written += u64::from(checkpoint(core, tenant).await?.is_some());
        }
        if (due.len() as i64) < DUE_PAGE {
            break;
        }
    }
    Ok(written)
}

/// Prune every team's rows past its retention; how many rows went.
pub async fn prune_all(core: &Core) -> Result<u64, StoreError> {
    let now = core.clock.now_ms();
    let default_days = i64::from(core.config.audit.retention_days);
    let mut removed = 0;
    for (tenant, days) in core.store.audit_retentions().await? {
        let days = days.unwrap_or(default_days);
        let cutoff = now.saturating_sub(days.saturating_mul(86_400_000));
        let Some(pruned) = core.store.prune_audit(&tenant, cutoff).await? else {
            continue;
        };
        removed += pruned.rows;
        core.audit
            .record_with(
                Priority::Background,
                Event {
                    tenant_id: &tenant,
                    actor: GATEWAY_ACTOR.into(),
                    action: action::AUDIT_PRUNE,
                    target: format!("chain:{}", pruned.kept_from),
                    outcome: "ok",
                    detail: Some(format!(
                        "{} rows before row {} removed: older than {days} days",
                        pruned.rows, pruned.kept_from
                    )),
                },
            )
            .await;
        tracing::info!(tenant = %tenant, rows = pruned.rows, kept_from = pruned.kept_from, "audit rows past retention pruned");
    }
    Ok(removed)
}

/// The node's keeper: checkpoints every interval, pruning every prune interval
/// (first at start-up), until the node drains. The last checkpoints are written
/// by the drain itself, after the last rows ([`crate::ServerHandle::shutdown`]).
pub async fn keeper(core: Core) {
    let cfg = &core.config.audit;
    let mut checkpoints = tokio::time::interval(Duration::from_secs(cfg.checkpoint_interval_secs));
    let mut prunes = tokio::time::interval(Duration::from_secs(cfg.prune_interval_secs));
    checkpoints.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    prunes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first checkpoint tick fires at once: skip it, a new node has nothing
    // of its own to sign yet.
    checkpoints.tick().await;
    loop {
        tokio::select! {
            _ = checkpoints.tick() => {
                if let Err(e) = checkpoint_all(&core).await {
                    tracing::warn!(error = %e, "audit checkpoints not written");
                }
            }
            _ = prunes.tick() => {
                if let Err(e) = prune_all(&core).await {
                    tracing::warn!(error = %e, "audit rows past retention not pruned");
                }
            }
            _ = core.shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_hold_and_each_bound_is_named() {
        assert_eq!(AuditConfig::default().problems(), Vec::<String>::new());
        let bad = AuditConfig {
            checkpoint_interval_secs: 0,
            retention_days: 0,
            prune_interval_secs: 10,
            signing_key_file: Some("/nonexistent/audit-key.pem".into()),
        };
        let problems = bad.problems();
        for key in [
            "checkpoint_interval_secs",
            "retention_days",
            "prune_interval_secs",
            "signing_key_file",
        ] {
            assert!(
                problems.iter().any(|p| p.contains(key)),
                "{key}: {problems:?}"
            );
        }
    }
}
