//! Whether and where a session may start (docs/sessions.md, docs/policy.md):
//! the browser it goes to, the policy it runs under, and what the start asks
//! of the extension beyond the base contract (site rules to enforce, the
//! person's consent).

use std::sync::Arc;

use latchkey_protocol::ErrorCode;
use latchkey_protocol::additions::{
    CONSENT_TIMEOUT_MS, ConsentRequest, Features, MAX_PURPOSE_CHARS, SessionAgent, SiteRules,
};
use latchkey_protocol::policy::{Consent, EffectivePolicy, Layer, PolicyReason};
use latchkey_protocol::text;
use serde_json::{Map, Value, json};

use crate::auth::principal::Principal;
use crate::core::Core;
use crate::core_error::{CoreError, LAST_SEEN_NAMED, LastSeen};
use crate::policy::{self, PolicyDenial};

/// Which online device of the tenant a new session goes to: among those the
/// caller's delegation names, if it is one (docs/delegation.md).
pub(super) fn choose_device(
    state: &Core,
    principal: &Principal,
    browser_id: Option<&str>,
) -> Result<String, CoreError> {
    let delegated = |reason, message: &str| {
        CoreError::Policy(PolicyDenial::new(reason, message, &[Layer::Delegation]))
    };
    let mut online = state.online_in_tenant(&principal.tenant_id);
    if let Some(d) = &principal.delegation {
        if d.scope.session_id.is_some() {
            return Err(delegated(
                PolicyReason::SessionNotDelegated,
                "this delegation acts in one session and starts none",
            ));
        }
        if let Some(allowed) = &d.scope.browsers {
            if browser_id.is_some_and(|id| !allowed.iter().any(|a| a == id)) {
                return Err(delegated(
                    PolicyReason::BrowserNotDelegated,
                    "this browser is not among those the delegation names",
                ));
            }
            online.retain(|id| allowed.contains(id));
        }
    }
    match browser_id {
        Some(id) => online
            .into_iter()
            .find(|d| d == id)
            .ok_or(CoreError::BrowserNotOnline),
        None => match online.len() {
            0 => Err(CoreError::NoBrowserConnected(Vec::new())),
            1 => Ok(online.into_iter().next().unwrap_or_default()),
            _ => Err(CoreError::MultipleBrowsersOnline(online)),
        },
    }
}

/// The tenant's live browsers that are not online, seen last first (those the
/// caller's delegation may use): what `no_browser_connected` names. A store that
/// cannot answer names none; the refusal stands either way.
pub(super) async fn last_seen(state: &Core, principal: &Principal) -> Vec<LastSeen> {
    let now = state.clock.now_ms();
    let Ok(mut devices) = state.store.list_devices(&principal.tenant_id).await else {
        return Vec::new();
    };
    let allowed = principal
        .delegation
        .as_ref()
        .and_then(|d| d.scope.browsers.as_ref());
    devices.retain(|d| d.is_live(now) && allowed.is_none_or(|a| a.contains(&d.id)));
    devices.sort_by_key(|d| std::cmp::Reverse(d.last_seen_at));
    devices
        .into_iter()
        .take(LAST_SEEN_NAMED)
        .map(|d| LastSeen {
            last_seen_at: d.last_seen_at.map(crate::clock::rfc3339),
            id: d.id,
            label: d.label,
        })
        .collect()
}

/// A start the policies let through: the policy the session runs under, and
/// what the extension is asked beyond the base contract.
pub(super) struct Admitted {
    pub policy: Arc<EffectivePolicy>,
    /// The team's name, for the consent prompt.
    pub team: String,
}

/// The policy a session of `principal` on `device_id` runs under, if it lets
/// the session start at all (docs/policy.md); a refusal is audited. A policy
/// that asks the person first needs an extension that can ask: with one that
/// cannot, the start is refused rather than let through unasked.
pub(super) async fn admitted_by_policy(
    state: &Core,
    principal: &Principal,
    device_id: &str,
    features: Features,
) -> Result<Admitted, CoreError> {
    let (policy, team) = policy::effective_named(state, &principal.tenant_id, device_id)
        .await?
        .ok_or(CoreError::BrowserNotOnline)?;
    let verdict = policy::check_start(&policy, principal.quota_id()).and_then(|()| {
        if policy.consent.value == Consent::Ask && !features.consent {
            return Err(PolicyDenial::new(
                PolicyReason::ConsentUnavailable,
                "this browser's policy asks its person first, and its extension cannot ask \
                 (it does not offer Latchkey's consent prompt)",
                &policy.consent.from,
            ));
        }
        Ok(())
    });
    if let Err(denial) = verdict {
        refused(state, principal, device_id, &denial).await;
        return Err(CoreError::Policy(denial));
    }
    Ok(Admitted {
        policy: Arc::new(policy),
        team,
    })
}

/// Count and audit a start a policy (or the person) refused.
pub(super) async fn refused(
    state: &Core,
    principal: &Principal,
    device_id: &str,
    denial: &PolicyDenial,
) {
    crate::telemetry::metrics::refused("policy");
    policy::audit_denial(
        state,
        &principal.tenant_id,
        principal.actor(),
        format!("device:{device_id}"),
        denial,
    )
    .await;
}

/// Add to `tool.session_start`'s params what this browser's extension is
/// asked beyond the base contract (docs/protocol.md, "Latchkey's additions"):
/// the session's site rules, to an extension that enforces them, and the
/// consent request when the policy asks the person. True when it asks.
pub(super) fn start_additions(
    params: &mut Map<String, Value>,
    principal: &Principal,
    features: Features,
    admitted: &Admitted,
    purpose: Option<&str>,
) -> bool {
    let policy = &admitted.policy;
    if features.site_rules {
        params.insert("site_rules".into(), json!(SiteRules::of(policy)));
    }
    let agent = SessionAgent {
        agent_id: principal.quota_id().to_string(),
        name: text::clean(&principal.token_name, text::MAX_LABEL_CHARS),
        team: text::clean(&admitted.team, text::MAX_LABEL_CHARS),
        purpose: purpose.map(str::to_string),
    };
    if features.agent_info {
        params.insert("agent".into(), json!(agent));
    }
    if policy.consent.value != Consent::Ask {
        return false;
    }
    let request = ConsentRequest {
        agent_id: agent.agent_id,
        agent: agent.name,
        team: agent.team,
        purpose: agent.purpose,
        capabilities: policy.capabilities.value.clone(),
        timeout_ms: CONSENT_TIMEOUT_MS,
    };
    params.insert("consent".into(), json!(request));
    true
}

/// The purpose an agent gave, cleaned for showing to a person and storing;
/// one over the limit is refused.
pub(super) fn purpose(raw: Option<&str>) -> Result<Option<String>, CoreError> {
    let Some(raw) = raw else { return Ok(None) };
    if raw.chars().count() > MAX_PURPOSE_CHARS {
        return Err(CoreError::invalid(format!(
            "purpose must be at most {MAX_PURPOSE_CHARS} characters"
        )));
    }
    let clean = text::clean(raw, MAX_PURPOSE_CHARS);
    Ok((!clean.trim().is_empty()).then(|| clean.trim().to_string()))
}

/// Whether a browser's error is the person saying no to a consent prompt.
pub(super) fn consent_refused(e: &CoreError) -> Option<PolicyDenial> {
    let CoreError::Browser(body) = e else {
        return None;
    };
    let reason = body.data.as_ref()?.get("reason")?.as_str()?;
    (body.code == ErrorCode::PermissionDenied && reason == PolicyReason::ConsentDenied.as_str())
        .then(|| {
            PolicyDenial::new(
                PolicyReason::ConsentDenied,
                "the browser's person did not let this session start",
                &[],
            )
        })
}
