//! Delegation tokens (docs/delegation.md): a short-lived, narrower right an agent
//! hands a sub-agent or one workflow run, minted from its own token. A JWT signed
//! by the gateway (EdDSA, Ed25519), whose public keys are at
//! `/.well-known/jwks.json`; these are its claims and the API around it.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::tools::capability::Capability;

/// The `aud` of every delegation token.
pub const AUDIENCE: &str = "latchkey";
/// The longest a delegation may live, in seconds: a day.
pub const MAX_TTL_SECS: u64 = 86_400;
/// How far a verifier's clock may be off the minter's: `exp` and `nbf` are
/// honoured this many seconds late and early, no more.
pub const CLOCK_SKEW_SECS: i64 = 30;
/// A chain is at most this long (the root token and its delegations).
pub const MAX_CHAIN: usize = 8;

/// What a delegation may reach; each field absent means "as much as its
/// delegator", never more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegationScope {
    /// The browsers (device ids) it may start sessions on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browsers: Option<Vec<String>>,
    /// Host patterns it may open (as a policy's `allow_sites`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub sites: Option<Vec<String>>,
    /// The capability classes it may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub capabilities: Option<Vec<Capability>>,
    /// The one session (of its delegator) it may act in; it starts none of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub session_id: Option<String>,
}

/// `POST /v1/delegations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDelegationRequest {
    /// Lifetime in seconds: 1 … 86400, and no longer than the delegator's own.
    pub ttl_secs: u64,
    /// Named in the audit trail (default `delegation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub name: Option<String>,
    #[serde(flatten)]
    pub scope: DelegationScope,
}

/// A delegation as listed, and as minted (with its token, shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DelegationView {
    pub id: String,
    pub name: String,
    /// Who delegated to whom: the API token at the root, then each delegation.
    pub chain: Vec<String>,
    pub scope: DelegationScope,
    pub created_at: String,
    pub expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub revoked_at: Option<String>,
    /// The JWT, only in the answer to its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub token: Option<String>,
}

/// `GET /v1/delegations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DelegationList {
    pub delegations: Vec<DelegationView>,
}

/// `DELETE /v1/delegations/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DelegationRevoked {
    pub id: String,
    /// Every delegation revoked now: this one and those minted from it.
    pub revoked: Vec<String>,
}

/// The claims of a delegation token: what any replica verifies with the public
/// key alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationClaims {
    /// The gateway's public URL.
    pub iss: String,
    /// Always [`AUDIENCE`].
    pub aud: String,
    /// The delegation's id (`del_…`), also its `jti`.
    pub sub: String,
    pub jti: String,
    /// The team (tenant id).
    pub tid: String,
    /// Seconds since the epoch.
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    /// The API token at the root, then each delegation down to this one.
    pub chain: Vec<String>,
    pub name: String,
    pub scope: DelegationScope,
}
