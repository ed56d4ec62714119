//! The audit trail's hash chain in the gateway (docs/operations.md, "Tamper
//! evidence"): the rules are `latchkey_protocol::audit_chain`'s, shared with the
//! CLI's offline check of an export; this reads a tenant's chain from the store
//! and walks it.
//!
//! The store extends a chain only while holding the tenant's `audit_head` row
//! (`store/audit_chain.rs`), so writers on any number of replicas take turns.

pub use latchkey_protocol::audit_chain::{
    Content, Fault, GENESIS, RowRef, Summary, VerifyingKeys, Walk,
};

/// A chained row as stored: the event, and its id, place and hash.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChainedRow {
    pub id: i64,
    pub seq: i64,
    pub hash: String,
    #[sqlx(flatten)]
    pub event: crate::store::NewAuditEvent,
}

impl ChainedRow {
    /// The row as a walk reads it.
    pub fn as_row(&self) -> RowRef<'_> {
        RowRef {
            id: self.id,
            seq: self.seq,
            content: self.event.content(),
            hash: &self.hash,
        }
    }
}

/// Chain rows read per query while verifying.
const VERIFY_PAGE: i64 = 1000;

/// Walk the tenant's whole chain, checking each checkpoint against `keys`, up to
/// the head as it is when the walk starts (rows written meanwhile are the next
/// walk's). What it found when intact, else the first fault.
pub async fn verify(
    store: &dyn crate::store::Store,
    tenant_id: &str,
    keys: &VerifyingKeys,
) -> Result<Result<Summary, Fault>, crate::store::StoreError> {
    let head = store.audit_head(tenant_id).await?;
    let end = head.as_ref().map_or(0, |(seq, _)| *seq);
    if let Some(id) = store.audit_unchained(tenant_id).await? {
        return Ok(Err(Fault::Unchained { id }));
    }
    let mut walk = Walk::new(keys);
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
            if let Err(fault) = walk.step(&row.as_row()) {
                return Ok(Err(fault));
            }
        }
    }
    let summary = match walk.finish(head) {
        Ok(summary) => summary,
        Err(fault) => return Ok(Err(fault)),
    };
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
    Ok(Ok(summary))
}

/// An intact chain in words: its rows, and how far signatures cover it.
pub fn describe(s: &Summary) -> String {
    let mut out = if s.rows == 0 {
        "no audit rows yet".to_string()
    } else if s.first > 1 {
        format!(
            "{} audit rows (rows {}..{}; older ones pruned), chain intact",
            s.rows, s.first, s.last
        )
    } else {
        format!("{} audit rows, chain intact", s.rows)
    };
    if s.checkpoints > 0 {
        out.push_str(&format!(
            "; {} signed checkpoint{}, the last covering rows up to {}",
            s.checkpoints,
            if s.checkpoints == 1 { "" } else { "s" },
            s.signed_through
        ));
    }
    let unsigned = s.unsigned();
    if unsigned > 0 {
        out.push_str(&format!("; {unsigned} rows since are not yet signed"));
    }
    out
}
