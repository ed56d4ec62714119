//! Sessions that ended lately, remembered so that an agent's next call on one
//! learns why it ended (`session_ended` with the reason) instead of a bare
//! "not found": the person pressed Stop, the kill switch, a revocation, the
//! browser went away (docs/sessions.md, "How a session ends").
//!
//! Bounded by count and by age, so remembering costs a fixed amount of memory
//! whatever the churn. Scoped exactly as the live table is: only the tenant and
//! token that owned a session hear why it ended; anyone else gets the answer
//! for an id that never existed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use latchkey_protocol::EndReason;
use tokio::time::Instant;

/// How many ended sessions are remembered on a node; the oldest go first.
pub const REMEMBERED: usize = 16_384;
/// How long an ended session is remembered.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(3600);

#[derive(Debug)]
struct Ended {
    tenant_id: String,
    token_id: String,
    reason: EndReason,
    /// Which burial made this entry (see `Inner::order`).
    seq: u64,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Ended>,
    /// Burial order, for pruning; an id buried again has a newer entry, and the
    /// older one is skipped when it comes up.
    order: VecDeque<(String, Instant, u64)>,
    next_seq: u64,
}

#[derive(Debug, Default)]
pub struct EndedSessions {
    inner: Mutex<Inner>,
}

impl EndedSessions {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remember that session `id` of `tenant_id`, opened by `token_id`, ended.
    pub fn bury(&self, id: &str, tenant_id: &str, token_id: &str, reason: EndReason) {
        let now = Instant::now();
        let mut inner = self.inner();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.by_id.insert(
            id.to_string(),
            Ended {
                tenant_id: tenant_id.to_string(),
                token_id: token_id.to_string(),
                reason,
                seq,
            },
        );
        inner.order.push_back((id.to_string(), now, seq));
        prune(&mut inner, now);
    }

    /// Why the session ended, if this tenant's token owned it and it ended
    /// lately; `None` exactly as for an id that never existed.
    pub fn reason(&self, tenant_id: &str, token_id: &str, id: &str) -> Option<EndReason> {
        let mut inner = self.inner();
        prune(&mut inner, Instant::now());
        inner
            .by_id
            .get(id)
            .filter(|e| e.tenant_id == tenant_id && e.token_id == token_id)
            .map(|e| e.reason)
    }

    /// Forget a session id (a new session took it).
    pub fn forget(&self, id: &str) {
        self.inner().by_id.remove(id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner().by_id.len()
    }
}

fn prune(inner: &mut Inner, now: Instant) {
    while let Some((id, at, seq)) = inner.order.front() {
        let too_many = inner.order.len() > REMEMBERED;
        if !too_many && now.duration_since(*at) < REMEMBERED_FOR {
            break;
        }
        // Only the entry this burial made: a later burial of the id stands.
        if inner.by_id.get(id).is_some_and(|e| e.seq == *seq) {
            inner.by_id.remove(id);
        }
        inner.order.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn only_the_owner_hears_why_and_only_for_a_while() {
        let ended = EndedSessions::default();
        ended.bury("abcd", "t1", "tok", EndReason::UserStopped);
        assert_eq!(
            ended.reason("t1", "tok", "abcd"),
            Some(EndReason::UserStopped)
        );
        assert_eq!(ended.reason("t2", "tok", "abcd"), None, "another tenant");
        assert_eq!(ended.reason("t1", "other", "abcd"), None, "another token");
        assert_eq!(ended.reason("t1", "tok", "wxyz"), None, "unknown id");
        tokio::time::advance(REMEMBERED_FOR).await;
        assert_eq!(ended.reason("t1", "tok", "abcd"), None, "forgotten");
        assert_eq!(ended.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_by_count_and_a_reburied_id_keeps_its_newest_end() {
        let ended = EndedSessions::default();
        ended.bury("same", "t", "tok", EndReason::Idle);
        for i in 0..REMEMBERED {
            ended.bury(&format!("s{i}"), "t", "tok", EndReason::Stopped);
            if i == 10 {
                ended.bury("same", "t", "tok", EndReason::KillSwitch);
            }
        }
        assert!(ended.len() <= REMEMBERED);
        assert_eq!(
            ended.reason("t", "tok", "s0"),
            None,
            "the oldest went first"
        );
        assert_eq!(
            ended.reason("t", "tok", "same"),
            Some(EndReason::KillSwitch),
            "the first burial's pruning left the second"
        );
        ended.forget("same");
        assert_eq!(ended.reason("t", "tok", "same"), None);
    }
}
