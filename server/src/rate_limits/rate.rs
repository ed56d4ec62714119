//! Per-peer rate limiting with a hard cap on keyed state.
//!
//! Keys are client addresses (IPv6 folded to its /64, so one host cannot rotate
//! through its prefix). At most `max_keys` peers are tracked; while the table is full
//! (after sweeping idle keys), requests share one overflow bucket, and an optional
//! global limiter caps the total. Idle keys are swept so a stream of fresh addresses
//! cannot grow memory.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::DefaultClock;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

type KeyedLimiter = RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock>;

/// A refusal: how long until the caller may try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

pub struct PeerRateLimiter {
    keyed: KeyedLimiter,
    overflow: DefaultDirectRateLimiter,
    global: Option<DefaultDirectRateLimiter>,
    max_keys: usize,
    /// Serialises the sweep-and-insert decision; the limiters themselves are lock-free.
    admission: Mutex<()>,
    retry_after: Duration,
}

impl std::fmt::Debug for PeerRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerRateLimiter")
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

/// Fold an address to the unit one party controls.
pub(crate) fn rate_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl PeerRateLimiter {
    /// `/extension/authorize` (docs/protocol.md, "Pairing and renewal"): `per_minute` per peer,
    /// bursting to the same number; one overflow bucket of the same size; a global cap of 16×;
    /// and the protocol's `Retry-After: 60`.
    pub fn per_minute(per_minute: u32, max_keys: usize) -> Self {
        let per_peer = NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        let global = per_peer.saturating_mul(NonZeroU32::new(16).unwrap_or(NonZeroU32::MIN));
        Self::new(
            per_peer,
            per_peer,
            Some(global),
            max_keys,
            Duration::from_secs(60),
        )
    }

    /// WebSocket upgrades: `per_minute` per peer, and no global cap (every home has
    /// its own address; after a restart they all come back at once). Peers beyond
    /// the tracked ones share an overflow bucket of 16× the per-peer rate. Refusals
    /// say when the next token is due.
    pub fn per_peer_only(per_minute: u32, max_keys: usize) -> Self {
        let per_peer = NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        let overflow = per_peer.saturating_mul(NonZeroU32::new(16).unwrap_or(NonZeroU32::MIN));
        let retry = Duration::from_secs(60_u64.div_ceil(u64::from(per_peer.get())).max(1));
        Self::new(per_peer, overflow, None, max_keys, retry)
    }

    fn new(
        per_peer: NonZeroU32,
        overflow: NonZeroU32,
        global: Option<NonZeroU32>,
        max_keys: usize,
        retry_after: Duration,
    ) -> Self {
        Self {
            keyed: RateLimiter::keyed(Quota::per_minute(per_peer)),
            overflow: RateLimiter::direct(Quota::per_minute(overflow)),
            global: global.map(|g| RateLimiter::direct(Quota::per_minute(g))),
            max_keys,
            admission: Mutex::new(()),
            retry_after,
        }
    }

    /// Admit or refuse one request from `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), RetryAfter> {
        let key = rate_key(ip);
        let refused = RetryAfter(self.retry_after);
        let tracked = {
            let _guard = self.admission.lock().unwrap_or_else(|p| p.into_inner());
            if self.keyed.len() >= self.max_keys {
                self.keyed.retain_recent();
                self.keyed.shrink_to_fit();
            }
            self.keyed.len() < self.max_keys
        };
        let admitted = if tracked {
            self.keyed.check_key(&key).is_ok()
        } else {
            self.overflow.check().is_ok()
        };
        // The global budget is charged only for what a peer's own budget admitted,
        // so one peer hammering away cannot spend everyone's share.
        if !admitted || self.global.as_ref().is_some_and(|g| g.check().is_err()) {
            return Err(refused);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_peer_burst_then_refusal_and_ipv6_folding() {
        let l = PeerRateLimiter::per_minute(3, 1024);
        let a: IpAddr = "127.0.0.2".parse().expect("ip");
        for _ in 0..3 {
            assert!(l.check(a).is_ok());
        }
        assert_eq!(l.check(a), Err(RetryAfter(Duration::from_secs(60))));
        assert!(l.check("127.0.0.3".parse().expect("ip")).is_ok());
        let v6a: IpAddr = "2001:db8::1".parse().expect("ip");
        let v6b: IpAddr = "2001:db8::ffff".parse().expect("ip");
        for _ in 0..3 {
            assert!(l.check(v6a).is_ok());
        }
        assert!(l.check(v6b).is_err(), "same /64 shares a bucket");
    }

    #[test]
    fn one_peer_cannot_spend_the_global_budget() {
        // 3 a minute per peer, 48 globally.
        let l = PeerRateLimiter::per_minute(3, 1024);
        let hammer: IpAddr = "127.0.0.2".parse().expect("ip");
        let admitted = (0..1_000).filter(|_| l.check(hammer).is_ok()).count();
        assert_eq!(admitted, 3);
        for i in 0..15u8 {
            assert!(l.check(IpAddr::from([127, 9, 0, i])).is_ok(), "peer {i}");
        }
    }

    #[test]
    fn keyed_state_is_capped() {
        let l = PeerRateLimiter::per_minute(60, 8);
        for i in 0..200u8 {
            let _ = l.check(IpAddr::from([127, 1, 0, i]));
        }
        assert!(l.keyed.len() <= 8, "tracked {}", l.keyed.len());
    }
}
