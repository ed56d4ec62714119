//! The one rule that decides whether a device may stay connected, and the one
//! fail-closed policy for when the store cannot say (docs/protocol.md, "The upgrade"
//! and "Liveness"; docs/security.md, "Fail closed").
//!
//! Every path that judges a grant goes through here: the upgrade, the connection's
//! start (the re-check after the upgrade), its expiry timer, and the node's grant
//! sweep. Each verdict has exactly one close code, so a revoked device is told
//! "revoked" whichever path noticed it first.

use std::time::Duration;

use latchkey_protocol::CloseCode;
use tokio::time::Instant;

use crate::store::{DeviceGrant, DeviceRecord};

/// What a grant says at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Good: the device may connect and stay connected.
    Live,
    /// Revoked by an administrator, revoked with the rest of its tenant, or gone
    /// from the store (deleted): pair again.
    Revoked,
    /// Past its expiry: pair again.
    Expired,
    /// The store could not confirm the grant for longer than the fail-closed policy
    /// allows: the credential is no longer confirmed; reconnect later.
    Unconfirmed,
}

impl Verdict {
    /// Judge a grant read from the store: `None` (no such device in its tenant)
    /// is revoked; a revocation wins over an expiry, because a revoked grant must
    /// never be told "renew" (renewal refuses revoked devices).
    pub fn of(grant: Option<&impl Grant>, now_ms: i64) -> Verdict {
        match grant {
            None => Verdict::Revoked,
            Some(g) if g.revoked_at().is_some() => Verdict::Revoked,
            Some(g) if g.expires_at() <= now_ms => Verdict::Expired,
            Some(_) => Verdict::Live,
        }
    }

    /// The close code a socket is closed with on this verdict; `None` for a live
    /// grant.
    pub const fn close_code(self) -> Option<CloseCode> {
        match self {
            Verdict::Live => None,
            Verdict::Revoked => Some(CloseCode::Revoked),
            Verdict::Expired => Some(CloseCode::Expired),
            Verdict::Unconfirmed => Some(CloseCode::Unauthorized),
        }
    }

    /// A short reason for logs and the disconnect metric.
    pub const fn why(self) -> &'static str {
        match self {
            Verdict::Live => "grant live",
            Verdict::Revoked => "revoked",
            Verdict::Expired => "grant expired",
            Verdict::Unconfirmed => "store unreadable: failing closed",
        }
    }
}

/// A stored grant: the two fields the rule reads.
pub trait Grant {
    fn revoked_at(&self) -> Option<i64>;
    fn expires_at(&self) -> i64;
}

impl Grant for DeviceRecord {
    fn revoked_at(&self) -> Option<i64> {
        self.revoked_at
    }
    fn expires_at(&self) -> i64 {
        self.expires_at
    }
}

impl Grant for DeviceGrant {
    fn revoked_at(&self) -> Option<i64> {
        self.revoked_at
    }
    fn expires_at(&self) -> i64 {
        self.expires_at
    }
}

/// The fail-closed policy: how long a grant the store cannot read keeps its socket.
///
/// A grant confirmed since the last revocation this node heard of keeps its socket
/// for `grace` of consecutive failed reads: a store restart or a failover of a few
/// seconds must not drop every browser, and a revocation written through this node
/// closes by push anyway. A grant that was *not* confirmed since (the re-check after
/// the upgrade, which runs only because a revocation was signalled meanwhile) has no
/// grace: its first failed read is [`Verdict::Unconfirmed`] at once.
#[derive(Debug, Clone)]
pub struct FailClosed {
    grace: Duration,
    failing_since: Option<Instant>,
}

impl FailClosed {
    /// For a grant confirmed before: closes after `grace` of failures.
    pub fn with_grace(grace: Duration) -> Self {
        Self {
            grace,
            failing_since: None,
        }
    }

    /// A read succeeded: the failure streak is over.
    pub fn confirmed(&mut self) {
        self.failing_since = None;
    }

    /// A read failed at `now`. [`Verdict::Unconfirmed`] once the store has been
    /// failing for the whole grace, else `None` (keep the socket, read again later).
    pub fn failed(&mut self, now: Instant) -> Option<Verdict> {
        let since = *self.failing_since.get_or_insert(now);
        (now.duration_since(since) >= self.grace).then_some(Verdict::Unconfirmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_at: i64, revoked_at: Option<i64>) -> DeviceGrant {
        DeviceGrant {
            id: "d".into(),
            expires_at,
            revoked_at,
        }
    }

    #[test]
    fn one_verdict_per_state_and_one_code_per_verdict() {
        assert_eq!(Verdict::of(Some(&grant(100, None)), 99), Verdict::Live);
        assert_eq!(Verdict::of(Some(&grant(100, None)), 100), Verdict::Expired);
        assert_eq!(
            Verdict::of(Some(&grant(100, Some(5))), 50),
            Verdict::Revoked
        );
        // Revoked and expired: revoked.
        assert_eq!(
            Verdict::of(Some(&grant(100, Some(5))), 500),
            Verdict::Revoked
        );
        assert_eq!(Verdict::of(None::<&DeviceGrant>, 0), Verdict::Revoked);
        assert_eq!(Verdict::Live.close_code(), None);
        assert_eq!(Verdict::Revoked.close_code(), Some(CloseCode::Revoked));
        assert_eq!(Verdict::Expired.close_code(), Some(CloseCode::Expired));
        assert_eq!(
            Verdict::Unconfirmed.close_code(),
            Some(CloseCode::Unauthorized)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fail_closed_after_the_grace_of_consecutive_failures() {
        let mut policy = FailClosed::with_grace(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(policy.failed(start), None);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(policy.failed(Instant::now()), None);
        // A success in between starts the streak again.
        policy.confirmed();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(policy.failed(Instant::now()), None);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(policy.failed(Instant::now()), None);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(policy.failed(Instant::now()), Some(Verdict::Unconfirmed));
    }
}
