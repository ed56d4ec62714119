//! A policy written while sessions run reaches them at once: each open session
//! of the team (of one browser, for a browser's policy) is put under the new
//! effective policy before the write is answered, and a session the policy no
//! longer admits (its agent dropped from `agents`, consent now `deny`) ends with
//! reason `policy_changed`, its Agent Window closed.

use std::collections::HashMap;
use std::sync::Arc;

use latchkey_protocol::policy::EffectivePolicy;

use super::{check_start, effective};
use crate::core::Core;
use crate::sessions::start_stop::end_now;
use crate::sessions::table::Abort;

/// The `session_ended` reason of a session a policy change ended.
pub const POLICY_CHANGED: &str = "policy_changed";

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
                session.set_policy(p.clone());
                check_start(p, &session.root_token_id).is_ok()
            }
            None => false,
        };
        if !admitted {
            tracing::info!(session = %session.id, tenant = %tenant_id, "session ended by a policy change");
            end_now(core, &session, POLICY_CHANGED, Abort::SessionEnding);
            ended += 1;
        }
    }
    ended
}
