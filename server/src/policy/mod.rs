//! Policies on the session path (docs/policy.md). A session start reads the
//! team's and the browser's policy from the store and keeps their intersection
//! on the session; each call is checked against it in memory before anything is
//! forwarded, so the check costs no store read. A policy written while sessions
//! run is pushed to them ([`refresh`]), and a session it no longer admits ends.

mod check;
mod refresh;

use latchkey_protocol::policy::{EffectivePolicy, Layer, Policy, PolicyReason};
use serde_json::{Map, Value, json};

use crate::audit::{Event, Priority, action};
use crate::core::Core;
use crate::core_error::CoreError;

pub use check::{check_call, check_start};
pub use refresh::refresh;

/// A `permission_denied` a policy gave: the rule (`reason`), a message for a
/// person, and what the agent needs to see which limit it hit (`from`, and the
/// pattern, host or class).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDenial {
    pub reason: PolicyReason,
    pub message: String,
    /// `data` beside `reason`.
    pub data: Map<String, Value>,
}

impl PolicyDenial {
    pub(crate) fn new(reason: PolicyReason, message: impl Into<String>, from: &[Layer]) -> Self {
        let mut data = Map::new();
        let layers: Vec<&str> = from.iter().map(|l| l.as_str()).collect();
        data.insert("from".into(), json!(layers));
        Self {
            reason,
            message: message.into(),
            data,
        }
    }

    pub(crate) fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.into(), value.into());
        self
    }

    /// One line for the audit trail: the rule and what it named.
    pub fn summary(&self) -> String {
        let mut out = self.reason.as_str().to_string();
        for key in ["capability", "host", "pattern", "scheme"] {
            if let Some(Value::String(v)) = self.data.get(key) {
                out.push_str(&format!(" {key}:{v}"));
            }
        }
        out
    }
}

/// The policy of a session nobody limited: every agent, every class, http and https.
#[cfg(test)]
pub fn unrestricted() -> std::sync::Arc<EffectivePolicy> {
    std::sync::Arc::new(EffectivePolicy::of(&[]))
}

/// A stored policy document. One that no longer parses (written by a newer
/// build, or edited by hand) refuses every session rather than allow them all.
pub(crate) fn parse_stored(text: Option<&str>) -> Result<Policy, CoreError> {
    match text {
        None => Ok(Policy::default()),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            tracing::error!(error = %e, "a stored policy does not parse; refusing sessions under it");
            CoreError::Internal("a stored policy could not be read")
        }),
    }
}

/// The policy sessions on `device_id` run under now; `None` when the team has
/// no such browser.
pub async fn effective(
    core: &Core,
    tenant_id: &str,
    device_id: &str,
) -> Result<Option<EffectivePolicy>, CoreError> {
    Ok(effective_named(core, tenant_id, device_id)
        .await?
        .map(|(policy, _)| policy))
}

/// [`effective`], with the team's name (read in the same query).
pub async fn effective_named(
    core: &Core,
    tenant_id: &str,
    device_id: &str,
) -> Result<Option<(EffectivePolicy, String)>, CoreError> {
    let rows = core
        .store
        .device_policies(tenant_id, device_id)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "reading policies failed");
            CoreError::Internal("the policy store is unavailable")
        })?;
    let Some(rows) = rows else {
        return Ok(None);
    };
    let team = parse_stored(rows.team.as_deref())?;
    let device = parse_stored(rows.device.as_deref())?;
    Ok(Some((
        EffectivePolicy::of(&[(Layer::Team, &team), (Layer::Device, &device)]),
        rows.team_name,
    )))
}

/// One `policy.deny` row: who was refused, on what (`target`), by which rule.
/// Written in the background, off the agent's path.
pub async fn audit_denial(
    core: &Core,
    tenant_id: &str,
    actor: String,
    target: String,
    denial: &PolicyDenial,
) {
    core.audit
        .record_with(
            Priority::Background,
            Event {
                tenant_id,
                actor,
                action: action::POLICY_DENY,
                target,
                outcome: "denied",
                detail: Some(denial.summary()),
            },
        )
        .await;
}
