//! A policy written while sessions run reaches them at once: each open session
//! of the team (of one browser, for a browser's policy) is put under the new
//! effective policy before the write is answered, and a session the policy no
//! longer admits (its agent dropped from `agents`, consent now `deny`) ends with
//! reason `policy_changed`, its Agent Window closed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::EndReason;
use latchkey_protocol::additions::{SESSION_RULES, SiteRules};
use latchkey_protocol::policy::EffectivePolicy;
use serde_json::{Map, Value, json};

use super::{check_start, effective};
use crate::core::Core;
use crate::sessions::calls::forward;
use crate::sessions::lifetime::end_now;
use crate::sessions::table::{Abort, Session};

/// The `session_ended` reason of a session a policy change ended.
pub const POLICY_CHANGED: EndReason = EndReason::PolicyChanged;

/// Put the open sessions of `tenant_id` (on `device_id` only, when given) under
/// the policy now stored; how many ended because it no longer admits them.
pub async fn refresh(core: &Core, tenant_id: &str, device_id: Option<&str>) -> usize {
    // Before listing: a start that is not in the list yet sees the epoch moved
    // and reads the policy again (sessions::table::SessionTable).
    core.sessions.policy_written();
    let sessions = core
        .sessions
        .list(|s| s.tenant_id == tenant_id && device_id.is_none_or(|d| s.device_id == d));
    let mut policies: HashMap<String, Option<Arc<EffectivePolicy>>> = HashMap::new();
    let mut ended = 0;
    for session in sessions {
        let policy = match policies.get(&session.device_id) {
            Some(p) => p.clone(),
            None => {
                // A policy that cannot be read ends the session: fail closed.
                let p = effective(core, tenant_id, &session.device_id)
                    .await
                    .ok()
                    .flatten()
                    .map(Arc::new);
                policies.insert(session.device_id.clone(), p.clone());
                p
            }
        };
        let admitted = match &policy {
            Some(p) => {
                let before = session.policy();
                session.set_policy(p.clone());
                let admitted = check_start(p, &session.root_token_id).is_ok();
                if admitted && SiteRules::of(&before) != SiteRules::of(p) {
                    push_site_rules(core, &session, SiteRules::of(p));
                }
                admitted
            }
            None => false,
        };
        if !admitted {
            tracing::info!(session = %session.id, tenant = %tenant_id, "session ended by a policy change");
            end_now(core, &session, POLICY_CHANGED, Abort::Ended(POLICY_CHANGED));
            ended += 1;
        }
    }
    ended
}

/// How long the browser has to take a session's new site rules.
const PUSH_BUDGET: Duration = Duration::from_secs(10);

/// Send a session's new site rules to an extension that enforces them
/// (docs/protocol.md, "Latchkey's additions"). One that does not take them in
/// time (or refuses them) would go on enforcing the old ones: the session
/// ends instead.
fn push_site_rules(core: &Core, session: &Arc<Session>, rules: SiteRules) {
    let Some(link) = core.link(&session.tenant_id, &session.device_id) else {
        return;
    };
    if !link.features().site_rules {
        return;
    }
    let (core, session) = (core.clone(), session.clone());
    tokio::spawn(async move {
        let mut params = Map::new();
        params.insert("session_id".into(), Value::String(session.id.clone()));
        params.insert("site_rules".into(), json!(rules));
        let pushed = forward(link, None, SESSION_RULES, params, PUSH_BUDGET, None).await;
        if let Err(e) = pushed
            && !session.is_ended()
        {
            tracing::warn!(session = %session.id, code = %e.code(), "the browser did not take new site rules; ending the session");
            end_now(
                &core,
                &session,
                POLICY_CHANGED,
                Abort::Ended(POLICY_CHANGED),
            );
        }
    });
}
