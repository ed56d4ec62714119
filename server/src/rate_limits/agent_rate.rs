//! Agent API rate limits: calls per API token and per tenant, so one runaway agent
//! cannot starve its tenant and one tenant cannot starve the node.
//!
//! Every agent request counts, whatever the token's role: agent-API REST requests
//! (checked by `AgentPrincipal`) and each request frame on an agent WebSocket,
//! `cancel` included. Keys are token and
//! tenant ids, which only authenticated callers reach, so the key space is bounded
//! by what admins created; idle keys are still swept once the tables grow.

use std::time::Duration;

use latchkey_protocol::{ErrorBody, ErrorCode};

use super::keyed::SweptLimiter;

#[derive(Debug)]
pub struct AgentRateLimiter {
    per_token: SweptLimiter,
    per_tenant: SweptLimiter,
}

impl AgentRateLimiter {
    /// `per_token` and `per_tenant` calls per second, each bursting to one second's worth.
    pub fn per_second(per_token: u32, per_tenant: u32) -> Self {
        Self {
            per_token: SweptLimiter::per_second(per_token),
            per_tenant: SweptLimiter::per_second(per_tenant),
        }
    }

    /// Admit one request of `token_id` in `tenant_id`, or say when to retry.
    pub fn check(&self, tenant_id: &str, token_id: &str) -> Result<(), RateLimited> {
        self.per_token
            .check(token_id)
            .map_err(|retry_after| RateLimited {
                scope: "token",
                retry_after,
            })?;
        self.per_tenant
            .check(tenant_id)
            .map_err(|retry_after| RateLimited {
                scope: "tenant",
                retry_after,
            })
    }
}

/// A refused agent request: which budget ran out and when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    pub scope: &'static str,
    pub retry_after: Duration,
}

impl RateLimited {
    /// Whole seconds for `Retry-After` (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_millis().div_ceil(1000).max(1) as u64
    }

    /// The HTTP answer: 429 `rate_limited` with `Retry-After`.
    pub fn api_error(&self) -> crate::api_error::ApiError {
        let body = self.error_body();
        let mut e = crate::api_error::ApiError::new(body.code, body.message)
            .retry_after(self.retry_after_secs());
        e.data = body.data;
        e
    }

    /// The wire error: `rate_limited`, with the scope and the wait in `data`.
    pub fn error_body(&self) -> ErrorBody {
        let mut e = ErrorBody::new(
            ErrorCode::RateLimited,
            format!(
                "too many agent requests for this {}; retry later",
                self.scope
            ),
        );
        e.data = Some(serde_json::json!({
            "scope": self.scope,
            "retry_after_ms": u64::try_from(self.retry_after.as_millis()).unwrap_or(u64::MAX),
        }));
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_budget_then_tenant_budget() {
        let l = AgentRateLimiter::per_second(2, 3);
        assert!(l.check("t", "a").is_ok());
        assert!(l.check("t", "a").is_ok());
        let refused = l.check("t", "a").expect_err("third call of token a");
        assert_eq!(refused.scope, "token");
        assert!(refused.retry_after_secs() >= 1);
        // Another token of the same tenant: the tenant's third call passes, its fourth not.
        assert!(l.check("t", "b").is_ok());
        let refused = l.check("t", "b").expect_err("tenant budget");
        assert_eq!(refused.scope, "tenant");
        // Another tenant is untouched.
        assert!(l.check("u", "c").is_ok());
    }
}
