//! The audit trail's hash chain (docs/operations.md, "Tamper evidence"). Each
//! tenant's rows form one chain: row `seq` (1, 2, …) stores
//! `SHA-256(hash of row seq-1 ‖ "\n" ‖ canonical content)`, the first row chaining
//! from [`GENESIS`]. The canonical content is the JSON array
//! `[tenant_id, seq, at, actor, action, target, outcome, detail]`: every field a
//! reader sees, in a fixed order, in one unambiguous encoding. Changing, removing
//! or inserting a row breaks the chain at that row; [`Walk`] finds where.
//!
//! The store extends a chain only while holding the tenant's `audit_head` row
//! (`store/audit_chain.rs`), so writers on any number of replicas take turns.

use sha2::{Digest, Sha256};

/// The hash a tenant's first row chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a row's hash covers, borrowed from a row being written or read back.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    pub tenant_id: &'a str,
    pub at: i64,
    pub actor: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    pub outcome: &'a str,
    pub detail: Option<&'a str>,
}

impl Content<'_> {
    /// The row's hash at place `seq`, after the row whose hash is `prev`.
    pub fn hash(&self, prev: &str, seq: i64) -> String {
        let canonical = serde_json::json!([
            self.tenant_id,
            seq,
            self.at,
            self.actor,
            self.action,
            self.target,
            self.outcome,
            self.detail
        ])
        .to_string();
        let mut digest = Sha256::new();
        digest.update(prev.as_bytes());
        digest.update(b"\n");
        digest.update(canonical.as_bytes());
        hex::encode(digest.finalize())
    }
}

/// A chained row as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChainedRow {
    pub id: i64,
    pub tenant_id: String,
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub hash: String,
}

impl ChainedRow {
    pub fn content(&self) -> Content<'_> {
        Content {
            tenant_id: &self.tenant_id,
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            target: &self.target,
            outcome: &self.outcome,
            detail: self.detail.as_deref(),
        }
    }
}

/// Where a chain is broken: the first fault, in chain order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// The row's content or hash is not what the chain before it implies: it, or
    /// a row before it whose hash was recomputed, was changed.
    #[error("row {seq} (id {id}) was changed: it does not match the chain before it")]
    Changed { seq: i64, id: i64 },
    /// Rows are missing before this one.
    #[error("rows {expected}..{} are missing before row {seq} (id {id})", seq - 1)]
    Missing { expected: i64, seq: i64, id: i64 },
    /// The chain ends before its head: rows were removed from the end.
    #[error(
        "the chain ends at row {last} but its head says {head}: rows after {last} were removed"
    )]
    Truncated { last: i64, head: i64 },
    /// The head names a different last row than the chain has.
    #[error("the chain's head does not match its last row {last}")]
    HeadMismatch { last: i64 },
    /// A row outside the chain: written around the gateway.
    #[error("row id {id} is not in the chain: it was inserted around the gateway")]
    Unchained { id: i64 },
    /// A row placed after the chain's head: appended around the gateway.
    #[error("row {seq} (id {id}) comes after the chain's head: it was appended around the gateway")]
    BeyondHead { seq: i64, id: i64 },
}

/// A walk along one tenant's chain, a page of rows at a time.
#[derive(Debug)]
pub struct Walk {
    prev: String,
    last: i64,
}

impl Default for Walk {
    fn default() -> Self {
        Self {
            prev: GENESIS.to_string(),
            last: 0,
        }
    }
}

impl Walk {
    /// The next row, in seq order.
    pub fn step(&mut self, row: &ChainedRow) -> Result<(), Fault> {
        let expected = self.last + 1;
        if row.seq != expected {
            return Err(Fault::Missing {
                expected,
                seq: row.seq,
                id: row.id,
            });
        }
        let hash = row.content().hash(&self.prev, row.seq);
        if !crate::auth::secret::ct_eq(&hash, &row.hash) {
            return Err(Fault::Changed {
                seq: row.seq,
                id: row.id,
            });
        }
        self.prev = hash;
        self.last = row.seq;
        Ok(())
    }

    /// The last row seen.
    pub fn last(&self) -> i64 {
        self.last
    }

    /// After the last row: it must be the head the store keeps.
    pub fn finish(&self, head: Option<(i64, String)>) -> Result<i64, Fault> {
        let (head_seq, head_hash) = head.unwrap_or((0, GENESIS.to_string()));
        if head_seq > self.last {
            return Err(Fault::Truncated {
                last: self.last,
                head: head_seq,
            });
        }
        if head_seq != self.last || head_hash != self.prev {
            return Err(Fault::HeadMismatch { last: self.last });
        }
        Ok(self.last)
    }
}

/// Chain rows read per query while verifying.
const VERIFY_PAGE: i64 = 1000;

/// Walk the tenant's whole chain, up to the head as it is when the walk starts
/// (rows written meanwhile are the next walk's). The number of rows when intact,
/// else the first fault.
pub async fn verify(
    store: &dyn crate::store::Store,
    tenant_id: &str,
) -> Result<Result<i64, Fault>, crate::store::StoreError> {
    let head = store.audit_head(tenant_id).await?;
    let end = head.as_ref().map_or(0, |(seq, _)| *seq);
    if let Some(id) = store.audit_unchained(tenant_id).await? {
        return Ok(Err(Fault::Unchained { id }));
    }
    let mut walk = Walk::default();
    'pages: loop {
        let page = store
            .audit_chain_page(tenant_id, walk.last(), VERIFY_PAGE)
            .await?;
        if page.is_empty() {
            break;
        }
        for row in &page {
            if row.seq > end {
                break 'pages;
            }
            if let Err(fault) = walk.step(row) {
                return Ok(Err(fault));
            }
        }
    }
    if let Err(fault) = walk.finish(head) {
        return Ok(Err(fault));
    }
    // Rows after the head: written since the walk began, or appended around the
    // gateway. Rows first, then the head: a row the gateway wrote meanwhile was
    // committed with its head, so the head read afterwards covers it.
    let after = store.audit_chain_page(tenant_id, end, VERIFY_PAGE).await?;
    let now = store.audit_head(tenant_id).await?.map_or(0, |(seq, _)| seq);
    if let Some(row) = after.iter().find(|r| r.seq > now) {
        return Ok(Err(Fault::BeyondHead {
            seq: row.seq,
            id: row.id,
        }));
    }
    Ok(Ok(walk.last()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<ChainedRow> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let mut row = ChainedRow {
                    id: seq * 10,
                    tenant_id: "tn_1".into(),
                    seq,
                    at: 1_000 + seq,
                    actor: "token:a".into(),
                    action: "session.call".into(),
                    target: format!("session:{seq}"),
                    outcome: "ok".into(),
                    detail: (seq % 2 == 0).then(|| "tool.click".to_string()),
                    hash: String::new(),
                };
                row.hash = row.content().hash(&prev, seq);
                prev = row.hash.clone();
                row
            })
            .collect()
    }

    fn walk(rows: &[ChainedRow], head: Option<(i64, String)>) -> Result<i64, Fault> {
        let mut w = Walk::default();
        for r in rows {
            w.step(r)?;
        }
        w.finish(head)
    }

    fn head(rows: &[ChainedRow]) -> Option<(i64, String)> {
        rows.last().map(|r| (r.seq, r.hash.clone()))
    }

    #[test]
    fn an_intact_chain_verifies_and_every_break_is_named() {
        let rows = chain(5);
        assert_eq!(walk(&rows, head(&rows)), Ok(5));
        assert_eq!(walk(&[], None), Ok(0));

        let mut changed = rows.clone();
        changed[2].detail = Some("tool.evaluate".into());
        assert_eq!(
            walk(&changed, head(&rows)),
            Err(Fault::Changed { seq: 3, id: 30 })
        );

        // Changed and re-hashed: the next row no longer follows.
        let mut rehashed = rows.clone();
        rehashed[2].outcome = "permission_denied".into();
        rehashed[2].hash = rehashed[2].content().hash(&rows[1].hash, 3);
        assert_eq!(
            walk(&rehashed, head(&rows)),
            Err(Fault::Changed { seq: 4, id: 40 })
        );

        let mut deleted = rows.clone();
        deleted.remove(1);
        assert_eq!(
            walk(&deleted, head(&rows)),
            Err(Fault::Missing {
                expected: 2,
                seq: 3,
                id: 30
            })
        );

        let truncated = &rows[..3];
        assert_eq!(
            walk(truncated, head(&rows)),
            Err(Fault::Truncated { last: 3, head: 5 })
        );

        let mut appended = rows.clone();
        let mut forged = appended[4].clone();
        forged.seq = 6;
        forged.id = 60;
        appended.push(forged);
        assert_eq!(
            walk(&appended, head(&rows)),
            Err(Fault::Changed { seq: 6, id: 60 })
        );
    }

    #[test]
    fn the_hash_covers_every_field_unambiguously() {
        let base = Content {
            tenant_id: "tn_1",
            at: 1,
            actor: "a",
            action: "b",
            target: "c",
            outcome: "ok",
            detail: None,
        };
        let h = base.hash(GENESIS, 1);
        assert_eq!(h.len(), 64);
        assert_ne!(h, base.hash(GENESIS, 2));
        assert_ne!(
            h,
            Content {
                detail: Some(""),
                ..base
            }
            .hash(GENESIS, 1)
        );
        // Moving text between fields changes the hash.
        assert_ne!(
            Content {
                actor: "ab",
                action: "",
                ..base
            }
            .hash(GENESIS, 1),
            Content {
                actor: "a",
                action: "b",
                ..base
            }
            .hash(GENESIS, 1)
        );
    }
}
