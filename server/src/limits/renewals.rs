//! Renewals get a budget of their own, per device, apart from the per-peer budget of
//! pairing attempts: a renewal presents a device token, so once the store has said
//! whose it is, it is charged to that device alone. No amount of pairing guesses,
//! from however many addresses, can then refuse a real device its renewal. A bearer
//! that is no device's token is a guess, and is charged to the peer's budget like a
//! pairing attempt (`extension::authorize`).
//!
//! Keys are device ids that passed the store lookup, so their number is bounded by
//! the devices that exist; idle keys are swept once the table grows.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::DefaultClock;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

type KeyedLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// Sweep idle keys once the table holds this many.
const SWEEP_AT: usize = 4096;
/// Look at the table's size once per this many checks.
const SIZE_CHECK_EVERY: u64 = 256;

pub struct RenewalLimiter {
    per_device: KeyedLimiter,
    sweep: Mutex<()>,
    checks: AtomicU64,
}

impl std::fmt::Debug for RenewalLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenewalLimiter").finish_non_exhaustive()
    }
}

impl RenewalLimiter {
    /// `per_minute` renewals per device, bursting to the same number.
    pub fn per_minute(per_minute: u32) -> Self {
        let n = NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        Self {
            per_device: RateLimiter::keyed(Quota::per_minute(n)),
            sweep: Mutex::new(()),
            checks: AtomicU64::new(0),
        }
    }

    /// Admit one renewal of `device_id`, or refuse it.
    pub fn check(&self, device_id: &str) -> bool {
        if self
            .checks
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SIZE_CHECK_EVERY)
            && self.per_device.len() >= SWEEP_AT
            && let Ok(_guard) = self.sweep.try_lock()
        {
            self.per_device.retain_recent();
            self.per_device.shrink_to_fit();
        }
        self.per_device.check_key(&device_id.to_string()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_device_has_its_own_budget() {
        let l = RenewalLimiter::per_minute(2);
        assert!(l.check("a"));
        assert!(l.check("a"));
        assert!(!l.check("a"));
        assert!(l.check("b"), "another device is untouched");
    }
}
