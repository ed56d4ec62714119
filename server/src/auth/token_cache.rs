//! API tokens recently read from the store, so a request does not read its token
//! again while nothing about any token has changed (docs/security.md, "API
//! tokens").
//!
//! An entry is good only while the revocation epoch of [`super::token_watch`] is
//! the one noted before its store read: every revocation on this node (a token, a
//! member's tokens, a delegation) advances the epoch before and after its commit,
//! so a revoked token is never served from here, and one whose revocation raced
//! its read is read again. Expiry is checked on every use against the record's
//! `expires_at`. Entries also age out after [`MAX_AGE_MS`], which bounds how long
//! a change the epoch does not see (one made by another process on the same
//! store) can go unnoticed. Only tokens the store returned are kept: unknown
//! credentials are never cached, so guessing cannot fill it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::store::ApiTokenRecord;

/// How long an entry is trusted without a store read, whatever the epoch says.
pub const MAX_AGE_MS: i64 = 30_000;

/// Entries kept; past this the cache starts over (every token re-read once).
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug)]
struct Entry {
    token: ApiTokenRecord,
    /// The revocation epoch noted before the store read that produced `token`.
    epoch: u64,
    read_at_ms: i64,
}

/// Token records by the SHA-256 of their secret, as the store keys them.
#[derive(Debug, Clone, Default)]
pub struct TokenCache {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

impl TokenCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding this lock cannot leave an entry half-written.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The record for `hash`, if read under this `epoch` less than
    /// [`MAX_AGE_MS`] ago.
    pub fn get(&self, hash: &str, epoch: u64, now_ms: i64) -> Option<ApiTokenRecord> {
        let entries = self.entries();
        let entry = entries.get(hash)?;
        (entry.epoch == epoch && now_ms - entry.read_at_ms < MAX_AGE_MS)
            .then(|| entry.token.clone())
    }

    /// Keep `token`, read from the store after the epoch was `epoch`.
    pub fn put(&self, hash: String, token: ApiTokenRecord, epoch: u64, now_ms: i64) {
        let mut entries = self.entries();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&hash) {
            entries.clear();
        }
        entries.insert(
            hash,
            Entry {
                token,
                epoch,
                read_at_ms: now_ms,
            },
        );
    }

    /// Note that `hash`'s use was recorded at `now_ms`, so the next request does
    /// not record it again within the minute.
    pub fn touched(&self, hash: &str, now_ms: i64) {
        if let Some(entry) = self.entries().get_mut(hash) {
            entry.token.last_used_at = Some(now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str) -> ApiTokenRecord {
        ApiTokenRecord {
            id: id.into(),
            tenant_id: "tn_a".into(),
            name: "agent".into(),
            role: "agent".into(),
            token_hash: "h".into(),
            created_at: 0,
            expires_at: None,
            revoked_at: None,
            last_used_at: None,
            member_id: None,
        }
    }

    #[test]
    fn an_entry_serves_only_its_own_epoch() {
        let cache = TokenCache::default();
        cache.put("h".into(), token("tok_a"), 7, 1_000);
        assert_eq!(cache.get("h", 7, 1_001).map(|t| t.id), Some("tok_a".into()));
        // Any revocation since the read: read the store again.
        assert!(cache.get("h", 8, 1_001).is_none());
        assert!(cache.get("other", 7, 1_001).is_none());
    }

    #[test]
    fn an_entry_ages_out() {
        let cache = TokenCache::default();
        cache.put("h".into(), token("tok_a"), 1, 0);
        assert!(cache.get("h", 1, MAX_AGE_MS - 1).is_some());
        assert!(cache.get("h", 1, MAX_AGE_MS).is_none());
    }

    #[test]
    fn a_recorded_use_is_remembered() {
        let cache = TokenCache::default();
        cache.put("h".into(), token("tok_a"), 1, 0);
        cache.touched("h", 500);
        assert_eq!(
            cache.get("h", 1, 600).and_then(|t| t.last_used_at),
            Some(500)
        );
    }

    #[test]
    fn a_full_cache_starts_over() {
        let cache = TokenCache::default();
        for i in 0..MAX_ENTRIES {
            cache.put(format!("h{i}"), token("tok"), 1, 0);
        }
        cache.put("new".into(), token("tok_new"), 1, 0);
        assert!(cache.get("h0", 1, 0).is_none());
        assert!(cache.get("new", 1, 0).is_some());
    }
}
