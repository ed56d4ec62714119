//! API tokens in use on this node, and how everything a token holds ends at once
//! when it is revoked or expires.
//!
//! An HTTP request checks its token when it arrives; what outlives a request does
//! not ask again: an agent socket, a server-sent event stream, a session and the
//! call in flight on it. Each of those holds a [`TokenLease`] taken when the token
//! was authenticated. Revoking the token ([`TokenWatch::end_in_tenant`],
//! [`TokenWatch::end`]) or reaching its expiry (a timer per token in use) signals
//! every lease of it, and each holder ends: the socket closes with 4006 or 4007, the
//! stream ends, the session ends with reason `token_revoked` or `token_expired` and
//! its call in flight fails with the matching code (docs/security.md, "API tokens").
//!
//! A revocation that lands between a request's store read and its lease would be
//! missed by the lease, so every signalled end is counted (the epoch, under the
//! lock), a request notes the count before it reads the store, and a lease is only
//! granted if no end was signalled since; otherwise the request reads again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::{CloseCode, ErrorBody, ErrorCode};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::store::ApiTokenRecord;

/// Why a token stopped working while it was in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenEnd {
    Revoked,
    Expired,
}

impl TokenEnd {
    /// The error a call, request or session start running on the token gets.
    pub fn error(self) -> ErrorBody {
        match self {
            TokenEnd::Revoked => ErrorBody::new(
                ErrorCode::TokenRevoked,
                "the API token was revoked while in use",
            ),
            TokenEnd::Expired => ErrorBody::new(
                ErrorCode::TokenExpired,
                "the API token expired while in use",
            ),
        }
    }

    /// The close code of an agent socket that ran on the token.
    pub fn close_code(self) -> CloseCode {
        match self {
            TokenEnd::Revoked => CloseCode::TokenRevoked,
            TokenEnd::Expired => CloseCode::TokenExpired,
        }
    }

    /// The `reason` of the `session_ended` event of the token's sessions.
    pub fn reason(self) -> latchkey_protocol::EndReason {
        match self {
            TokenEnd::Revoked => latchkey_protocol::EndReason::TokenRevoked,
            TokenEnd::Expired => latchkey_protocol::EndReason::TokenExpired,
        }
    }
}

/// The store read a lease was granted on is older than a signalled end: read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadAgain;

#[derive(Debug)]
struct Entry {
    tenant_id: String,
    /// Leases alive; the entry goes with the last one.
    holders: usize,
    end: watch::Sender<Option<TokenEnd>>,
    /// Stops the expiry timer when the entry goes.
    timer: CancellationToken,
}

#[derive(Debug, Default)]
struct Inner {
    entries: Mutex<HashMap<String, Entry>>,
    /// Ends signalled so far, counted under the `entries` lock.
    epoch: AtomicU64,
}

/// The node's tokens in use. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct TokenWatch {
    inner: Arc<Inner>,
}

impl TokenWatch {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Every critical section is one lookup, insert or remove: a panic cannot
        // leave the map half-changed.
        self.inner.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many ends have been signalled. Note it before reading a token from the
    /// store, and hand it to [`Self::lease`].
    pub fn epoch(&self) -> u64 {
        self.inner.epoch.load(Ordering::Acquire)
    }

    /// A lease on `token`, read from the store after [`Self::epoch`] returned
    /// `epoch`. `Err(ReadAgain)` if an end was signalled since (the read may predate
    /// a revocation).
    pub fn lease(
        &self,
        token: &ApiTokenRecord,
        epoch: u64,
        clock: &Clock,
    ) -> Result<TokenLease, ReadAgain> {
        let mut entries = self.entries();
        if self.inner.epoch.load(Ordering::Acquire) != epoch {
            return Err(ReadAgain);
        }
        let entry = entries.entry(token.id.clone()).or_insert_with(|| {
            let (end, _) = watch::channel(None);
            let timer = CancellationToken::new();
            if let Some(expires_at) = token.expires_at {
                tokio::spawn(expire_at(
                    self.clone(),
                    token.id.clone(),
                    expires_at,
                    clock.clone(),
                    timer.clone(),
                ));
            }
            Entry {
                tenant_id: token.tenant_id.clone(),
                holders: 0,
                end,
                timer,
            }
        });
        entry.holders += 1;
        let rx = entry.end.subscribe();
        Ok(TokenLease {
            holder: Some(Holder {
                watch: self.clone(),
                token_id: Arc::from(token.id.as_str()),
            }),
            rx,
        })
    }

    /// Signal every lease of `token_id`, if this tenant's: for ending on a
    /// tenant's word before its store has confirmed the token is the tenant's (a
    /// foreign id ends nothing). Returns whether the token was in use here.
    pub fn end_in_tenant(&self, tenant_id: &str, token_id: &str, why: TokenEnd) -> bool {
        self.end_if(token_id, why, |e| e.tenant_id == tenant_id)
    }

    /// Signal every lease of `token_id`. Returns whether it was in use here.
    pub fn end(&self, token_id: &str, why: TokenEnd) -> bool {
        self.end_if(token_id, why, |_| true)
    }

    fn end_if(&self, token_id: &str, why: TokenEnd, admits: impl FnOnce(&Entry) -> bool) -> bool {
        let entries = self.entries();
        self.inner.epoch.fetch_add(1, Ordering::AcqRel);
        match entries.get(token_id) {
            Some(e) if admits(e) => {
                // The first end is the story: a revocation after expiry changes nothing.
                e.end.send_if_modified(|v| {
                    let first = v.is_none();
                    if first {
                        *v = Some(why);
                    }
                    first
                });
                true
            }
            _ => false,
        }
    }

    /// The tokens (and delegations) with a lease on this node, by tenant: what
    /// the token sweep re-reads.
    pub fn in_use_by_tenant(&self) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for (id, e) in self.entries().iter() {
            out.entry(e.tenant_id.clone()).or_default().push(id.clone());
        }
        out
    }

    #[cfg(test)]
    /// Tokens with a lease on this node.
    pub fn in_use(&self) -> usize {
        self.entries().len()
    }

    fn add_holder(&self, token_id: &str) {
        if let Some(e) = self.entries().get_mut(token_id) {
            e.holders += 1;
        }
    }

    fn drop_holder(&self, token_id: &str) {
        let mut entries = self.entries();
        let last = match entries.get_mut(token_id) {
            Some(e) => {
                e.holders = e.holders.saturating_sub(1);
                e.holders == 0
            }
            None => false,
        };
        if last && let Some(e) = entries.remove(token_id) {
            e.timer.cancel();
        }
    }
}

/// Signal `Expired` to the leases of `token_id` at the wall-clock instant
/// `expires_at` (re-planned when a test moves the clock), unless stopped first.
async fn expire_at(
    watch: TokenWatch,
    token_id: String,
    expires_at: i64,
    clock: Clock,
    stop: CancellationToken,
) {
    let mut changed = clock.changed();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(clock.until(expires_at)) => {
                if clock.now_ms() >= expires_at {
                    watch.end(&token_id, TokenEnd::Expired);
                    return;
                }
            }
            _ = changed.changed() => {}
        }
    }
}

#[derive(Debug)]
struct Holder {
    watch: TokenWatch,
    token_id: Arc<str>,
}

/// A hold on a token in use: says when it ended. Dropping the last lease of a token
/// forgets it (and stops its expiry timer).
#[derive(Debug)]
pub struct TokenLease {
    /// `None` for a lease no one can end (unit tests of what holds one).
    holder: Option<Holder>,
    rx: watch::Receiver<Option<TokenEnd>>,
}

impl TokenLease {
    /// A lease that never ends: for code under test without a token behind it,
    /// and for a console sign-in through single sign-on, which has no token and
    /// which its own row ends (docs/console.md, "Signing in").
    pub fn unwatched() -> Self {
        let (tx, rx) = watch::channel(None);
        // The receiver keeps its last value after the sender is gone.
        drop(tx);
        Self { holder: None, rx }
    }

    /// Whether (and why) the token has ended.
    pub fn ended_now(&self) -> Option<TokenEnd> {
        *self.rx.borrow()
    }

    /// Resolves when the token ends; never, for a lease that cannot end.
    pub async fn ended(&self) -> TokenEnd {
        let mut rx = self.rx.clone();
        // The guard is released before anything else is awaited.
        let end = rx
            .wait_for(Option::is_some)
            .await
            .map(|end| (*end).unwrap_or(TokenEnd::Revoked));
        match end {
            Ok(end) => end,
            Err(_) => std::future::pending().await,
        }
    }
}

impl Clone for TokenLease {
    fn clone(&self) -> Self {
        if let Some(h) = &self.holder {
            h.watch.add_holder(&h.token_id);
        }
        Self {
            holder: self.holder.as_ref().map(|h| Holder {
                watch: h.watch.clone(),
                token_id: h.token_id.clone(),
            }),
            rx: self.rx.clone(),
        }
    }
}

impl Drop for TokenLease {
    fn drop(&mut self) {
        if let Some(h) = &self.holder {
            h.watch.drop_holder(&h.token_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn token(id: &str, tenant: &str, expires_at: Option<i64>) -> ApiTokenRecord {
        ApiTokenRecord {
            id: id.into(),
            tenant_id: tenant.into(),
            name: "n".into(),
            role: "agent".into(),
            token_hash: String::new(),
            created_at: 0,
            expires_at,
            revoked_at: None,
            last_used_at: None,
            member_id: None,
        }
    }

    #[tokio::test]
    async fn an_end_reaches_every_lease_and_only_the_tenants_own() {
        let w = TokenWatch::default();
        let clock = Clock::system();
        let t = token("tok_a", "ta", None);
        let a = w.lease(&t, w.epoch(), &clock).expect("lease");
        let b = a.clone();
        assert!(
            !w.end_in_tenant("tb", "tok_a", TokenEnd::Revoked),
            "a foreign tenant ends nothing"
        );
        assert_eq!(a.ended_now(), None);
        assert!(w.end_in_tenant("ta", "tok_a", TokenEnd::Revoked));
        assert_eq!(b.ended().await, TokenEnd::Revoked);
        w.end("tok_a", TokenEnd::Expired);
        assert_eq!(
            a.ended_now(),
            Some(TokenEnd::Revoked),
            "the first end is the story"
        );
        drop((a, b));
        assert_eq!(w.in_use(), 0, "the last lease forgets the token");
    }

    #[tokio::test]
    async fn a_read_older_than_an_end_must_be_read_again() {
        let w = TokenWatch::default();
        let clock = Clock::system();
        let epoch = w.epoch();
        // Revoked between the store read and the lease: nothing held it yet.
        assert!(!w.end("tok_a", TokenEnd::Revoked));
        assert_eq!(
            w.lease(&token("tok_a", "ta", None), epoch, &clock)
                .map(|_| ()),
            Err(ReadAgain)
        );
        assert!(
            w.lease(&token("tok_a", "ta", None), w.epoch(), &clock)
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_ends_at_the_tokens_expiry_instant() {
        let w = TokenWatch::default();
        let clock = Clock::system();
        let expires = clock.now_ms() + 60_000;
        let lease = w
            .lease(&token("tok_e", "ta", Some(expires)), w.epoch(), &clock)
            .expect("lease");
        // Time moves on its own (paused runtime): the expiry timer fires at 60 s.
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert_eq!(lease.ended_now(), None);
        // The wall clock jumps to the expiry: the timer re-plans and fires.
        clock.advance(Duration::from_secs(61));
        assert_eq!(lease.ended().await, TokenEnd::Expired);
    }

    #[test]
    fn an_unwatched_lease_never_ends() {
        let lease = TokenLease::unwatched();
        assert_eq!(lease.ended_now(), None);
        let cloned = lease.clone();
        assert_eq!(cloned.ended_now(), None);
    }
}
