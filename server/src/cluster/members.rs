//! Who is in the cluster (docs/cluster.md, "Who is in the cluster"): the
//! replicas heard from lately. Every replica sends `alive` every
//! [`ALIVE_EVERY`] and `leaving` when its drain begins (and again at its end);
//! any notice counts as a sign of life, except that a replica that said
//! `leaving` counts again only after its own `alive` or `hello` (a draining
//! replica still tells of the sockets it closes). A request to every replica (a session list) waits for the
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

/// What a notice says of its sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// `alive` or `hello`: it is up, even after it said it was leaving.
    Up,
    /// Any other notice: up, unless it said it was leaving.
    Told,
    /// `leaving`: wait for it no more.
    Leaving,
}

/// The other replicas, by node id (as a subject token): when each was last
/// heard from, or `None` once it said it was leaving.
#[derive(Debug, Default)]
pub struct Members {
    seen: Mutex<HashMap<String, Option<Instant>>>,
}

impl Members {
    fn seen(&self) -> MutexGuard<'_, HashMap<String, Option<Instant>>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `node` told a notice now.
    pub fn heard(&self, node: &str, heard: Heard) {
        let now = Instant::now();
        let mut seen = self.seen();
        let known = seen.get(node).copied();
        let next = match (heard, known) {
            (Heard::Leaving, _) => None,
            (Heard::Told, Some(None)) => return,
            (Heard::Told | Heard::Up, _) => Some(now),
        };
        if known.is_none() && seen.len() >= MAX_MEMBERS {
            seen.retain(|_, at| at.is_some_and(|at| now.duration_since(at) < LIVE_FOR));
            if seen.len() >= MAX_MEMBERS {
                return;
            }
        }
        seen.insert(node.to_string(), next);
    }

    /// The other replicas heard from within [`LIVE_FOR`] that have not said
    /// they are leaving.
    pub fn live(&self) -> Vec<String> {
        let now = Instant::now();
        let mut seen = self.seen();
        seen.retain(|_, at| at.is_none_or(|at| now.duration_since(at) < LIVE_FOR));
        let mut live: Vec<String> = seen
            .iter()
            .filter(|(_, at)| at.is_some())
            .map(|(node, _)| node.clone())
            .collect();
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
        members.heard("b", Heard::Told);
        members.heard("c", Heard::Up);
        assert_eq!(members.live(), ["b", "c"]);
        members.heard("b", Heard::Leaving);
        assert_eq!(members.live(), ["c"]);
        tokio::time::advance(LIVE_FOR - Duration::from_millis(1)).await;
        members.heard("d", Heard::Told);
        assert_eq!(members.live(), ["c", "d"]);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(members.live(), ["d"], "c fell silent");
    }

    #[tokio::test(start_paused = true)]
    async fn a_leaving_replica_counts_again_only_when_it_says_it_is_up() {
        let members = Members::default();
        members.heard("b", Heard::Up);
        members.heard("b", Heard::Leaving);
        // Draining, it still tells of the sockets it closes.
        members.heard("b", Heard::Told);
        assert!(members.live().is_empty());
        // Restarted under the same id (a pod's name).
        members.heard("b", Heard::Up);
        assert_eq!(members.live(), ["b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn node_ids_from_the_network_are_bounded() {
        let members = Members::default();
        for n in 0..MAX_MEMBERS + 10 {
            members.heard(&format!("n{n}"), Heard::Told);
        }
        assert_eq!(members.live().len(), MAX_MEMBERS);
        tokio::time::advance(LIVE_FOR).await;
        members.heard("late", Heard::Told);
        assert_eq!(members.live(), ["late"]);
    }
}
