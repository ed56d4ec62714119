//! Agent API rate limits: calls per API token and per tenant, so one runaway agent
//! cannot starve its tenant and one tenant cannot starve the node.
//!
//! Every agent request counts: REST requests (checked when the token is
//! authenticated) and each request frame on an agent WebSocket. Keys are token and
//! tenant ids, which only authenticated callers reach, so the key space is bounded
//! by what admins created; idle keys are still swept once the tables grow.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use latchkey_protocol::{ErrorBody, ErrorCode};

type KeyedLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// Sweep idle keys once a table holds this many.
const SWEEP_AT: usize = 4096;

/// Look at the tables' sizes once per this many checks: counting a keyed table
/// visits every shard, too much for every agent frame.
const SIZE_CHECK_EVERY: u64 = 1024;

pub struct AgentRateLimiter {
    per_token: KeyedLimiter,
    per_tenant: KeyedLimiter,
    clock: DefaultClock,
    sweep: Mutex<()>,
    checks: AtomicU64,
}

impl std::fmt::Debug for AgentRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRateLimiter").finish_non_exhaustive()
    }
}

fn quota(per_second: u32) -> Quota {
    Quota::per_second(NonZeroU32::new(per_second.max(1)).unwrap_or(NonZeroU32::MIN))
}

impl AgentRateLimiter {
    /// `per_token` and `per_tenant` calls per second, each bursting to one second's worth.
    pub fn per_second(per_token: u32, per_tenant: u32) -> Self {
        Self {
            per_token: RateLimiter::keyed(quota(per_token)),
            per_tenant: RateLimiter::keyed(quota(per_tenant)),
            clock: DefaultClock::default(),
            sweep: Mutex::new(()),
            checks: AtomicU64::new(0),
        }
    }

    /// Admit one request of `token_id` in `tenant_id`, or say when to retry.
    pub fn check(&self, tenant_id: &str, token_id: &str) -> Result<(), RateLimited> {
        self.sweep_if_large();
        let now = self.clock.now();
        let token_key = token_id.to_string();
        if let Err(not_until) = self.per_token.check_key(&token_key) {
            return Err(RateLimited {
                scope: "token",
                retry_after: not_until.wait_time_from(now),
            });
        }
        if let Err(not_until) = self.per_tenant.check_key(&tenant_id.to_string()) {
            return Err(RateLimited {
                scope: "tenant",
                retry_after: not_until.wait_time_from(now),
            });
        }
        Ok(())
    }

    fn sweep_if_large(&self) {
        if !self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SIZE_CHECK_EVERY)
        {
            return;
        }
        if self.per_token.len() < SWEEP_AT && self.per_tenant.len() < SWEEP_AT {
            return;
        }
        if let Ok(_guard) = self.sweep.try_lock() {
            self.per_token.retain_recent();
            self.per_token.shrink_to_fit();
            self.per_tenant.retain_recent();
            self.per_tenant.shrink_to_fit();
        }
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
