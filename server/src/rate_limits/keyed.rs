//! A rate limiter keyed by strings that only authenticated callers reach (token,
//! tenant and device ids), so the number of keys is bounded by what exists; idle keys
//! are still swept once the table grows, so it never holds more than it must.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

type KeyedLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// Sweep idle keys once the table holds this many.
const SWEEP_AT: usize = 4096;

/// Look at the table's size once per this many checks: counting a keyed table
/// visits every shard, too much for every agent frame.
const SIZE_CHECK_EVERY: u64 = 1024;

pub struct SweptLimiter {
    keyed: KeyedLimiter,
    clock: DefaultClock,
    sweep: Mutex<()>,
    checks: AtomicU64,
}

impl std::fmt::Debug for SweptLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweptLimiter").finish_non_exhaustive()
    }
}

impl SweptLimiter {
    /// `n` a second per key, bursting to one second's worth.
    pub fn per_second(n: u32) -> Self {
        Self::new(Quota::per_second(non_zero(n)))
    }

    /// `n` a minute per key, bursting to one minute's worth.
    pub fn per_minute(n: u32) -> Self {
        Self::new(Quota::per_minute(non_zero(n)))
    }

    fn new(quota: Quota) -> Self {
        Self {
            keyed: RateLimiter::keyed(quota),
            clock: DefaultClock::default(),
            sweep: Mutex::new(()),
            checks: AtomicU64::new(0),
        }
    }

    /// Admit one request of `key`, or say how long until one would be.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        self.sweep_if_large();
        let now = self.clock.now();
        self.keyed
            .check_key(&key.to_string())
            .map_err(|not_until| not_until.wait_time_from(now))
    }

    fn sweep_if_large(&self) {
        if self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SIZE_CHECK_EVERY)
            && self.keyed.len() >= SWEEP_AT
            && let Ok(_guard) = self.sweep.try_lock()
        {
            self.keyed.retain_recent();
            self.keyed.shrink_to_fit();
        }
    }
}

fn non_zero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n.max(1)).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_has_its_own_budget() {
        let l = SweptLimiter::per_minute(2);
        assert!(l.check("a").is_ok());
        assert!(l.check("a").is_ok());
        assert!(l.check("a").is_err());
        assert!(l.check("b").is_ok(), "another key is untouched");
    }
}
