//! Ending what revoked API tokens and delegations hold, on every replica: the
//! one sequence each revocation (a token, a member's tokens, a delegation and
//! those below it) goes through (docs/security.md, "API tokens";
//! docs/cluster.md, "Notices").

use latchkey_protocol::cluster::Notice;

use crate::app::AppState;
use crate::auth::token_watch::TokenEnd;

/// Signal every lease of the tokens or delegations `ids` of the team here, and
/// tell the other replicas to do the same. Returns how many were in use here.
/// Called before a revocation commits and again after, like a device's close.
pub fn end_revoked(state: &AppState, tenant_id: &str, ids: &[String]) -> usize {
    let here = ids
        .iter()
        .filter(|id| state.tokens.end_in_tenant(tenant_id, id, TokenEnd::Revoked))
        .count();
    state.peers.tell_all(Notice::tokens_revoked(tenant_id, ids));
    here
}
