//! The audit trail's hash chain and its signed checkpoints (docs/operations.md,
//! "Tamper evidence"), shared by the gateway (`latchkeyd audit verify`) and the
//! CLI's offline check of an export (`latchkey audit verify-file`), so both
//! judge a chain by the same code.
//!
//! Each tenant's rows form one chain: row `seq` (1, 2, …) stores
//! `SHA-256(hash of row seq-1 ‖ "\n" ‖ canonical content)`, the first row
//! chaining from [`GENESIS`]. The canonical content is the JSON array
//! `[tenant_id, seq, at, actor, action, target, outcome, detail]`. Now and then
//! the gateway appends an `audit.checkpoint` row whose detail is a [`Checkpoint`]:
//! the place and hash of the row before it, signed with the gateway's Ed25519
//! audit key. A signature covers every row up to that place, so whoever holds the
//! public key can tell a chain the gateway wrote from one recomputed by someone
//! who could write the database but not sign.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The hash a tenant's first row chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The action of a checkpoint row.
pub const CHECKPOINT_ACTION: &str = "audit.checkpoint";
/// The actor of the rows the gateway writes about the trail itself.
pub const GATEWAY_ACTOR: &str = "gateway";

/// What a row's hash covers.
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
        let mut digest = Sha256::new();
        digest.update(prev.as_bytes());
        digest.update(b"\n");
        // The canonical form, a compact JSON array, streamed into the digest
        // (a row per tool call is hashed on the node's busiest path).
        let canonical = (
            self.tenant_id,
            seq,
            self.at,
            self.actor,
            self.action,
            self.target,
            self.outcome,
            self.detail,
        );
        // Writing into a digest cannot fail, nor can serialising strings and
        // numbers: there is no error to lose.
        let _ = serde_json::to_writer(Hashing(&mut digest), &canonical);
        hex::encode(digest.finalize())
    }

    fn is_checkpoint(&self) -> bool {
        self.action == CHECKPOINT_ACTION && self.actor == GATEWAY_ACTOR
    }
}

/// A checkpoint row's detail: the gateway's signature over the place and hash of
/// the row before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The place of the last row covered (the checkpoint row's own place - 1).
    pub seq: i64,
    /// That row's hash.
    pub hash: String,
    /// The audit key that signed.
    pub kid: String,
    /// Ed25519 over [`Checkpoint::message`], base64url without padding.
    pub sig: String,
}

impl Checkpoint {
    /// The bytes signed: the tenant, place, hash and the checkpoint row's time,
    /// under a fixed label so a signature made for anything else never verifies.
    pub fn message(tenant_id: &str, seq: i64, hash: &str, at: i64) -> Vec<u8> {
        format!("latchkey audit checkpoint v1\n{tenant_id}\n{seq}\n{hash}\n{at}").into_bytes()
    }
}

/// The public audit keys a chain is checked against, by key id.
#[derive(Debug, Clone, Default)]
pub struct VerifyingKeys(HashMap<String, Vec<u8>>);

/// A JWK as the gateway publishes its audit keys (`OKP`, `Ed25519`).
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, utoipa::ToSchema,
)]
pub struct AuditJwk {
    pub kty: String,
    pub crv: String,
    pub kid: String,
    /// The raw public key, base64url.
    pub x: String,
}

/// `{"keys": [...]}`: what `GET /v1/admin/audit/keys` and `latchkeyd audit keys`
/// print, and what `latchkey audit verify-file --keys` reads.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
    utoipa::ToSchema,
)]
pub struct AuditKeySet {
    pub keys: Vec<AuditJwk>,
}

impl AuditJwk {
    /// The JWK of a raw Ed25519 public key.
    pub fn ed25519(kid: &str, public: &[u8]) -> Self {
        Self {
            kty: "OKP".into(),
            crv: "Ed25519".into(),
            kid: kid.into(),
            x: URL_SAFE_NO_PAD.encode(public),
        }
    }
}

impl VerifyingKeys {
    /// The keys of a key set; an entry that is not an Ed25519 key is an error.
    pub fn from_set(set: &AuditKeySet) -> Result<Self, String> {
        let mut keys = Self::default();
        for k in &set.keys {
            if k.kty != "OKP" || k.crv != "Ed25519" {
                return Err(format!("key {} is not an Ed25519 key", k.kid));
            }
            let raw = URL_SAFE_NO_PAD
                .decode(&k.x)
                .ok()
                .filter(|r| r.len() == 32)
                .ok_or_else(|| format!("key {}'s x is not a 32-byte base64url key", k.kid))?;
            keys.0.insert(k.kid.clone(), raw);
        }
        Ok(keys)
    }

    pub fn insert(&mut self, kid: String, public: Vec<u8>) {
        self.0.insert(kid, public);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `sig` is `kid`'s signature of `message`; `None` for an unknown key.
    fn verify(&self, kid: &str, message: &[u8], sig: &str) -> Option<bool> {
        use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
        let public = self.0.get(kid)?;
        let Ok(sig) = URL_SAFE_NO_PAD.decode(sig) else {
            return Some(false);
        };
        Some(
            UnparsedPublicKey::new(&ED25519, public)
                .verify(message, &sig)
                .is_ok(),
        )
    }
}

/// One row of a chain, as a verifier reads it.
#[derive(Debug, Clone, Copy)]
pub struct RowRef<'a> {
    /// The row's id in the store (named in faults).
    pub id: i64,
    pub seq: i64,
    pub content: Content<'a>,
    pub hash: &'a str,
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
    /// A row whose place was already walked: a copy, or rows out of order.
    #[error("row {seq} (id {id}) is out of place: row {expected} comes next")]
    OutOfPlace { expected: i64, seq: i64, id: i64 },
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
    /// A checkpoint that does not hold: the chain before it was rewritten, or the
    /// checkpoint was forged.
    #[error("checkpoint row {seq} (id {id}) does not hold: {why}")]
    BadCheckpoint {
        seq: i64,
        id: i64,
        why: &'static str,
    },
    /// A checkpoint signed by a key the verifier was not given.
    #[error(
        "checkpoint row {seq} (id {id}) is signed by key {kid}, which is not among the keys given"
    )]
    UnknownKey { seq: i64, id: i64, kid: String },
}

/// What a walk found in an intact chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Rows walked.
    pub rows: i64,
    /// The first place walked (above 1 when older rows were pruned).
    pub first: i64,
    /// The last place walked.
    pub last: i64,
    /// Checkpoints verified.
    pub checkpoints: i64,
    /// The last place a verified signature covers (0: none).
    pub signed_through: i64,
}

impl Summary {
    /// Rows after the last checkpoint: chained, but no signature covers them yet.
    pub fn unsigned(&self) -> i64 {
        if self.checkpoints == 0 {
            self.rows
        } else {
            // The checkpoint row itself sits at `signed_through + 1`.
            self.last - self.signed_through - 1
        }
    }
}

/// A walk along one tenant's chain, a row at a time, in place order.
#[derive(Debug)]
pub struct Walk<'k> {
    keys: &'k VerifyingKeys,
    prev: String,
    summary: Summary,
}

impl<'k> Walk<'k> {
    /// A walk from the chain's start. The first row may be a checkpoint above
    /// place 1: the place older rows were pruned up to.
    pub fn new(keys: &'k VerifyingKeys) -> Self {
        Self::after(keys, 0, GENESIS.to_string())
    }

    /// A walk that starts after place `last`, whose hash is `prev` (an export
    /// that begins mid-chain).
    pub fn after(keys: &'k VerifyingKeys, last: i64, prev: String) -> Self {
        Self {
            keys,
            prev,
            summary: Summary {
                last,
                ..Summary::default()
            },
        }
    }

    /// The next row.
    pub fn step(&mut self, row: &RowRef<'_>) -> Result<(), Fault> {
        let (seq, id) = (row.seq, row.id);
        let checkpoint = row.content.is_checkpoint().then(|| {
            row.content
                .detail
                .and_then(|d| serde_json::from_str::<Checkpoint>(d).ok())
        });
        let expected = self.summary.last + 1;
        if seq != expected {
            // A pruned chain starts at a checkpoint, which names the hash it
            // follows.
            match &checkpoint {
                Some(Some(cp)) if self.summary.rows == 0 && expected == 1 && cp.seq == seq - 1 => {
                    self.prev = cp.hash.clone();
                }
                _ if seq < expected => return Err(Fault::OutOfPlace { expected, seq, id }),
                _ => return Err(Fault::Missing { expected, seq, id }),
            }
        }
        let hash = row.content.hash(&self.prev, seq);
        if hash != row.hash {
            return Err(Fault::Changed { seq, id });
        }
        if let Some(cp) = checkpoint {
            let bad = |why| Fault::BadCheckpoint { seq, id, why };
            let cp = cp.ok_or(bad("its detail is not a checkpoint"))?;
            if cp.seq != seq - 1 || cp.hash != self.prev {
                return Err(bad("it covers a different chain than the one before it"));
            }
            let message =
                Checkpoint::message(row.content.tenant_id, cp.seq, &cp.hash, row.content.at);
            match self.keys.verify(&cp.kid, &message, &cp.sig) {
                None => {
                    return Err(Fault::UnknownKey {
                        seq,
                        id,
                        kid: cp.kid,
                    });
                }
                Some(false) => return Err(bad("its signature does not verify")),
                Some(true) => {}
            }
            self.summary.checkpoints += 1;
            self.summary.signed_through = cp.seq;
        }
        if self.summary.rows == 0 {
            self.summary.first = seq;
        }
        self.summary.rows += 1;
        self.summary.last = seq;
        self.prev = hash;
        Ok(())
    }

    /// The last place walked.
    pub fn last(&self) -> i64 {
        self.summary.last
    }

    /// What the walk found so far.
    pub fn summary(&self) -> Summary {
        self.summary
    }

    /// After the last row: it must be the head the store keeps.
    pub fn finish(&self, head: Option<(i64, String)>) -> Result<Summary, Fault> {
        let last = self.summary.last;
        let (head_seq, head_hash) = head.unwrap_or((0, GENESIS.to_string()));
        if head_seq > last {
            return Err(Fault::Truncated {
                last,
                head: head_seq,
            });
        }
        if head_seq != last || head_hash != self.prev {
            return Err(Fault::HeadMismatch { last });
        }
        Ok(self.summary)
    }
}

/// The first line of an export (`GET /v1/admin/audit/export`): where the rows
/// after it start, so the first of them can be checked too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportHeader {
    /// The format's version: 1.
    pub latchkey_audit_export: u32,
    pub tenant_id: String,
    pub team: String,
    /// When the export was made (RFC 3339).
    pub exported_at: String,
    /// The place of the row before the first exported one (0: the chain's start).
    pub after_seq: i64,
    /// That row's hash.
    pub after_hash: String,
}

/// Every line after the header: one row of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedRow {
    pub id: i64,
    pub seq: i64,
    /// RFC 3339, for reading; the hash covers `at_ms`.
    pub at: String,
    /// Unix milliseconds.
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub hash: String,
}

impl ExportedRow {
    /// The row as a walk reads it, in the tenant `tenant_id`.
    pub fn as_row<'a>(&'a self, tenant_id: &'a str) -> RowRef<'a> {
        RowRef {
            id: self.id,
            seq: self.seq,
            content: Content {
                tenant_id,
                at: self.at_ms,
                actor: &self.actor,
                action: &self.action,
                target: &self.target,
                outcome: &self.outcome,
                detail: self.detail.as_deref(),
            },
            hash: &self.hash,
        }
    }
}

/// The JSON Schemas of an export's lines, of a checkpoint row's detail and of
/// the key set (`protocol/schema/audit-export.json`), for verifiers written
/// elsewhere.
pub fn export_schema() -> serde_json::Value {
    serde_json::json!({
        "header": schemars::schema_for!(ExportHeader),
        "row": schemars::schema_for!(ExportedRow),
        "checkpoint": schemars::schema_for!(Checkpoint),
        "keys": schemars::schema_for!(AuditKeySet),
        "canonical_content": "[tenant_id, seq, at_ms, actor, action, target, outcome, detail] as a JSON array; hash = hex(SHA-256(previous hash ‖ \"\\n\" ‖ canonical content)); the first row follows 64 zeros",
        "checkpoint_message": "latchkey audit checkpoint v1\\n<tenant_id>\\n<seq>\\n<hash>\\n<at_ms of the checkpoint row>, signed with Ed25519",
    })
}

/// Bytes written into a SHA-256 digest.
struct Hashing<'a>(&'a mut Sha256);

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "audit_chain_tests.rs"]
mod tests;
