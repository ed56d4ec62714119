//! Scoped delegation tokens (docs/delegation.md): an agent mints, from its own
//! token, a short-lived JWT narrowed to browsers, sites, capability classes and
//! optionally one of its sessions, for a sub-agent or a workflow run; the chain
//! of who delegated to whom travels with it. Signed with the gateway's Ed25519
//! key (`keys.rs`), verified with the public key alone (`verify.rs`), minted
//! only ever narrower than the delegator (`mint.rs`), revocable by id.

pub mod keys;
pub mod mint;
pub mod verify;

use std::sync::Arc;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;

/// `/v1/delegations` and the public keys that verify what it mints.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(mint::create, mint::list))
        .routes(routes!(mint::revoke))
        .routes(routes!(mint::jwks))
}

use latchkey_protocol::delegation::DelegationScope;
use latchkey_protocol::policy::{EffectivePolicy, Layer, Policy};

/// What a caller with a delegation token carries besides its identity.
#[derive(Debug, Clone)]
pub struct Delegated {
    /// `del_…`, also the principal's token id.
    pub id: String,
    /// The API token at the root: revoking it ends this delegation too.
    pub root_token_id: String,
    /// Who minted it: the token or delegation a one-session delegation's
    /// session belongs to.
    pub delegator: String,
    pub chain: Vec<String>,
    pub scope: DelegationScope,
    /// The scope's sites and classes as a policy layer, checked on every call
    /// besides the session's own policy.
    pub limit: Arc<EffectivePolicy>,
}

/// The scope's sites and capability classes as a layer of its own.
pub fn limit_of(scope: &DelegationScope) -> EffectivePolicy {
    let layer = Policy {
        allow_sites: scope.sites.clone(),
        capabilities: scope.capabilities.clone(),
        ..Policy::default()
    };
    EffectivePolicy::of(&[(Layer::Delegation, &layer)])
}
