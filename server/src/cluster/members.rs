//! Who is in the cluster (docs/cluster.md, "Who is in the cluster"): the
//! replicas heard from lately. Every replica sends `alive` every
//! [`ALIVE_EVERY`] and `leaving` at the end of its drain; any notice counts as
//! a sign of life. A request to every replica (a session list) waits for the
//! answers of exactly these, so it is complete without a guessed timeout; a
//! replica killed outright is waited for (up to a bound) until [`LIVE_FOR`]
//! has passed without a word from it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// How often a replica says it is up.
pub const ALIVE_EVERY: Duration = Duration::from_secs(5);

/// How long a replica counts as up after its last notice: three missed
/// `alive`s.
pub const LIVE_FOR: Duration = Duration::from_secs(15);

/// The most replicas remembered: node ids come from the network.
const MAX_MEMBERS: usize = 1024;

/// The other replicas, by node id (as a subject token), with when each was
/// last heard from.
#[derive(Debug, Default)]
pub struct Members {
    seen: Mutex<HashMap<String, Instant>>,
}

impl Members {
    fn seen(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `node` said something now.
    pub fn heard(&self, node: &str) {
        let now = Instant::now();
        let mut seen = self.seen();
        if seen.len() >= MAX_MEMBERS && !seen.contains_key(node) {
            seen.retain(|_, at| now.duration_since(*at) < LIVE_FOR);
            if seen.len() >= MAX_MEMBERS {
                return;
            }
        }
        seen.insert(node.to_string(), now);
    }

    /// `node` left (its drain is over).
    pub fn left(&self, node: &str) {
        self.seen().remove(node);
    }

    /// The other replicas heard from within [`LIVE_FOR`].
    pub fn live(&self) -> Vec<String> {
        let now = Instant::now();
        let mut seen = self.seen();
        seen.retain(|_, at| now.duration_since(*at) < LIVE_FOR);
        let mut live: Vec<String> = seen.keys().cloned().collect();
        live.sort();
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_replica_counts_until_it_leaves_or_falls_silent() {
        let members = Members::default();
        members.heard("b");
        members.heard("c");
        assert_eq!(members.live(), ["b", "c"]);
        members.left("b");
        assert_eq!(members.live(), ["c"]);
        tokio::time::advance(LIVE_FOR - Duration::from_millis(1)).await;
        members.heard("d");
        assert_eq!(members.live(), ["c", "d"]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(members.live(), ["d"], "c fell silent");
    }

    #[tokio::test(start_paused = true)]
    async fn node_ids_from_the_network_are_bounded() {
        let members = Members::default();
        for n in 0..MAX_MEMBERS + 10 {
            members.heard(&format!("n{n}"));
        }
        assert_eq!(members.live().len(), MAX_MEMBERS);
        tokio::time::advance(LIVE_FOR).await;
        members.heard("late");
        assert_eq!(members.live(), ["late"]);
    }
}
