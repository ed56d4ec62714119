//! A request with a delegation token (docs/delegation.md): the signature checked
//! with the public key in memory, the claims with the node's clock (within
//! [`CLOCK_SKEW_SECS`]), then one store read that the delegation and the API
//! token at its root are still live. Any failure answers 401 `unauthorized`,
//! exactly as an unknown API token does.

use std::collections::HashSet;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, Validation};
use latchkey_protocol::api::Role;
use latchkey_protocol::delegation::{
    AUDIENCE, CLOCK_SKEW_SECS, DelegationClaims, MAX_CHAIN, MAX_TTL_SECS,
};

use super::{Delegated, limit_of};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::store::ApiTokenRecord;

/// Whether a bearer credential is a JWT rather than an API token (`lk_…`).
pub fn is_jwt(credential: &str) -> bool {
    credential.starts_with("eyJ") && credential.bytes().filter(|b| *b == b'.').count() == 2
}

/// The claims of `jwt` if its signature, algorithm, issuer, audience and times
/// hold at `now_ms`; `None` otherwise, whatever the reason.
pub async fn claims(state: &AppState, jwt: &str, now_ms: i64) -> Option<DelegationClaims> {
    let header = jsonwebtoken::decode_header(jwt).ok()?;
    // One algorithm, fixed by the gateway: `none`, HMAC with the public key as
    // its secret, or any other confusion is refused before a key is looked up.
    if header.alg != Algorithm::EdDSA {
        return None;
    }
    let key = state
        .signing_keys
        .verifier(state.store.as_ref(), header.kid.as_deref()?, now_ms)
        .await?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&[state.public_base.as_ref()]);
    // Times are judged below with the node's clock, which tests can move.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims = ["exp", "nbf", "iss", "aud", "sub"]
        .into_iter()
        .map(String::from)
        .collect::<HashSet<_>>();
    let c = jsonwebtoken::decode::<DelegationClaims>(jwt, &key, &validation)
        .ok()?
        .claims;
    let now = now_ms.div_euclid(1_000);
    let lifetime = c.exp - c.nbf;
    let sane = c.jti == c.sub
        && c.chain.last() == Some(&c.sub)
        && (2..=MAX_CHAIN).contains(&c.chain.len())
        && lifetime > 0
        && lifetime <= i64::try_from(MAX_TTL_SECS).unwrap_or(i64::MAX);
    let in_time = now < c.exp + CLOCK_SKEW_SECS && now >= c.nbf - CLOCK_SKEW_SECS;
    (sane && in_time).then_some(c)
}

/// The caller a delegation token stands for.
pub async fn principal(state: &AppState, jwt: &str) -> Result<Principal, ApiError> {
    let now = state.clock.now_ms();
    let c = claims(state, jwt, now)
        .await
        .ok_or_else(ApiError::unauthorized)?;
    // Honoured up to the skew past its `exp`, and never past the minted expiry.
    let expires_at = (c.exp + CLOCK_SKEW_SECS).saturating_mul(1_000);
    // As for API tokens: a revocation signalled between the read and the lease
    // sends us back to the store.
    let (record, lease) = loop {
        let epoch = state.tokens.epoch();
        let record = state
            .store
            .live_delegation(&c.tid, &c.sub, now)
            .await?
            .ok_or_else(ApiError::unauthorized)?;
        let as_token = ApiTokenRecord {
            id: record.id.clone(),
            tenant_id: record.tenant_id.clone(),
            name: record.name.clone(),
            role: Role::Agent.as_str().into(),
            token_hash: String::new(),
            created_at: record.created_at,
            expires_at: Some(record.expires_at.min(expires_at)),
            revoked_at: None,
            last_used_at: None,
            member_id: None,
        };
        if let Ok(lease) = state.tokens.lease(&as_token, epoch, &state.clock) {
            break (record, lease);
        }
    };
    tracing::Span::current().record("tenant", tracing::field::display(&record.tenant_id));
    let delegator = c
        .chain
        .get(c.chain.len().saturating_sub(2))
        .cloned()
        .unwrap_or_default();
    Ok(Principal {
        tenant_id: record.tenant_id,
        token_id: record.id.clone(),
        token_name: format!("{}/{}", record.name, record.id),
        role: Role::Agent,
        member_id: None,
        expires_at: Some(expires_at.min(record.expires_at)),
        lease,
        delegation: Some(Arc::new(Delegated {
            id: record.id,
            root_token_id: record.root_token_id,
            delegator,
            chain: c.chain,
            limit: Arc::new(limit_of(&c.scope)),
            scope: c.scope,
        })),
        person_actor: None,
    })
}
