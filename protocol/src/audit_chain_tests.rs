use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};

use super::*;

/// A row as a store holds it.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    seq: i64,
    at: i64,
    actor: String,
    action: String,
    target: String,
    outcome: String,
    detail: Option<String>,
    hash: String,
}

impl Row {
    fn content(&self) -> Content<'_> {
        Content {
            tenant_id: "tn_1",
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            target: &self.target,
            outcome: &self.outcome,
            detail: self.detail.as_deref(),
        }
    }
    fn as_ref(&self) -> RowRef<'_> {
        RowRef {
            id: self.id,
            seq: self.seq,
            content: self.content(),
            hash: &self.hash,
        }
    }
}

struct Signer {
    pair: Ed25519KeyPair,
    keys: VerifyingKeys,
}

fn signer() -> Signer {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let set = AuditKeySet {
        keys: vec![AuditJwk::ed25519("ak_1", pair.public_key().as_ref())],
    };
    let keys = VerifyingKeys::from_set(&set).unwrap();
    Signer { pair, keys }
}

/// `n` rows, a checkpoint at every place in `checkpoints`.
fn chain(n: i64, checkpoints: &[i64], s: &Signer) -> Vec<Row> {
    let mut prev = GENESIS.to_string();
    (1..=n)
        .map(|seq| {
            let at = 1_000 + seq;
            let mut row = if checkpoints.contains(&seq) {
                let sig = s
                    .pair
                    .sign(&Checkpoint::message("tn_1", seq - 1, &prev, at));
                let cp = Checkpoint {
                    seq: seq - 1,
                    hash: prev.clone(),
                    kid: "ak_1".into(),
                    sig: URL_SAFE_NO_PAD.encode(sig.as_ref()),
                };
                Row {
                    id: seq * 10,
                    seq,
                    at,
                    actor: GATEWAY_ACTOR.into(),
                    action: CHECKPOINT_ACTION.into(),
                    target: format!("chain:{}", seq - 1),
                    outcome: "ok".into(),
                    detail: Some(serde_json::to_string(&cp).unwrap()),
                    hash: String::new(),
                }
            } else {
                Row {
                    id: seq * 10,
                    seq,
                    at,
                    actor: "token:a".into(),
                    action: "session.call".into(),
                    target: format!("session:{seq}"),
                    outcome: "ok".into(),
                    detail: (seq % 2 == 0).then(|| "tool.click".to_string()),
                    hash: String::new(),
                }
            };
            row.hash = row.content().hash(&prev, seq);
            prev = row.hash.clone();
            row
        })
        .collect()
}

fn walk(rows: &[Row], head: Option<(i64, String)>, keys: &VerifyingKeys) -> Result<Summary, Fault> {
    let mut w = Walk::new(keys);
    for r in rows {
        w.step(&r.as_ref())?;
    }
    w.finish(head)
}

fn head(rows: &[Row]) -> Option<(i64, String)> {
    rows.last().map(|r| (r.seq, r.hash.clone()))
}

/// Recompute every hash from place `from` on, as someone who can write the
/// database (but not sign) would after changing a row.
fn rehash(rows: &mut [Row], from: usize) {
    let mut prev = if from == 0 {
        GENESIS.to_string()
    } else {
        rows[from - 1].hash.clone()
    };
    for r in &mut rows[from..] {
        r.hash = r.content().hash(&prev, r.seq);
        prev = r.hash.clone();
    }
}

#[test]
fn an_intact_chain_verifies_and_every_break_is_named() {
    let s = signer();
    let rows = chain(5, &[], &s);
    let ok = walk(&rows, head(&rows), &s.keys).unwrap();
    assert_eq!((ok.rows, ok.first, ok.last, ok.checkpoints), (5, 1, 5, 0));
    assert_eq!(walk(&[], None, &s.keys).unwrap().rows, 0);

    let mut changed = rows.clone();
    changed[2].detail = Some("tool.evaluate".into());
    assert_eq!(
        walk(&changed, head(&rows), &s.keys),
        Err(Fault::Changed { seq: 3, id: 30 })
    );

    // Changed and re-hashed: the next row no longer follows.
    let mut rehashed = rows.clone();
    rehashed[2].outcome = "permission_denied".into();
    rehashed[2].hash = rehashed[2].content().hash(&rows[1].hash, 3);
    assert_eq!(
        walk(&rehashed, head(&rows), &s.keys),
        Err(Fault::Changed { seq: 4, id: 40 })
    );

    let mut deleted = rows.clone();
    deleted.remove(1);
    assert_eq!(
        walk(&deleted, head(&rows), &s.keys),
        Err(Fault::Missing {
            expected: 2,
            seq: 3,
            id: 30
        })
    );

    assert_eq!(
        walk(&rows[..3], head(&rows), &s.keys),
        Err(Fault::Truncated { last: 3, head: 5 })
    );

    let mut copied = rows.clone();
    copied.insert(3, rows[1].clone());
    assert_eq!(
        walk(&copied, head(&rows), &s.keys),
        Err(Fault::OutOfPlace {
            expected: 4,
            seq: 2,
            id: 20
        })
    );

    let mut appended = rows.clone();
    let mut forged = appended[4].clone();
    forged.seq = 6;
    forged.id = 60;
    appended.push(forged);
    assert_eq!(
        walk(&appended, head(&rows), &s.keys),
        Err(Fault::Changed { seq: 6, id: 60 })
    );
}

#[test]
fn checkpoints_catch_a_chain_recomputed_without_the_key() {
    let s = signer();
    let rows = chain(8, &[4, 8], &s);
    let ok = walk(&rows, head(&rows), &s.keys).unwrap();
    assert_eq!((ok.checkpoints, ok.signed_through), (2, 7));

    // A row changed and every hash after it recomputed: the chain is whole, but
    // the next checkpoint signed the old hash.
    let mut rewritten = rows.clone();
    rewritten[1].outcome = "permission_denied".into();
    rehash(&mut rewritten, 1);
    let head_now = head(&rewritten);
    assert_eq!(
        walk(&rewritten, head_now, &s.keys),
        Err(Fault::BadCheckpoint {
            seq: 4,
            id: 40,
            why: "it covers a different chain than the one before it"
        })
    );

    // The checkpoint's own claim rewritten to match: its signature fails.
    let mut resigned = rewritten.clone();
    let mut cp: Checkpoint = serde_json::from_str(resigned[3].detail.as_deref().unwrap()).unwrap();
    cp.hash = resigned[2].hash.clone();
    resigned[3].detail = Some(serde_json::to_string(&cp).unwrap());
    rehash(&mut resigned, 3);
    let head_now = head(&resigned);
    assert!(matches!(
        walk(&resigned, head_now, &s.keys),
        Err(Fault::BadCheckpoint {
            seq: 4,
            why: "its signature does not verify",
            ..
        })
    ));

    // Another key under the same id does not verify; no key at all is named.
    let other = signer();
    assert!(matches!(
        walk(&rows, head(&rows), &other.keys),
        Err(Fault::BadCheckpoint {
            seq: 4,
            why: "its signature does not verify",
            ..
        })
    ));
    assert_eq!(
        walk(&rows, head(&rows), &VerifyingKeys::default()),
        Err(Fault::UnknownKey {
            seq: 4,
            id: 40,
            kid: "ak_1".into()
        })
    );

    // A checkpoint row whose detail is not a checkpoint.
    let mut garbled = rows.clone();
    garbled[3].detail = Some("{}".into());
    rehash(&mut garbled, 3);
    let head_now = head(&garbled);
    assert!(matches!(
        walk(&garbled, head_now, &s.keys),
        Err(Fault::BadCheckpoint {
            seq: 4,
            why: "its detail is not a checkpoint",
            ..
        })
    ));
}

#[test]
fn a_pruned_chain_starts_at_a_checkpoint_and_nowhere_else() {
    let s = signer();
    let rows = chain(8, &[4, 8], &s);
    let pruned = &rows[3..];
    let ok = walk(pruned, head(&rows), &s.keys).unwrap();
    assert_eq!((ok.rows, ok.first, ok.last), (5, 4, 8));

    // Cut anywhere but at a checkpoint: rows are missing.
    assert_eq!(
        walk(&rows[2..], head(&rows), &s.keys),
        Err(Fault::Missing {
            expected: 1,
            seq: 3,
            id: 30
        })
    );

    // An export that starts mid-chain, given the hash before it.
    let mut w = Walk::after(&s.keys, 5, rows[4].hash.clone());
    for r in &rows[5..] {
        w.step(&r.as_ref()).unwrap();
    }
    assert_eq!(w.finish(head(&rows)).unwrap().rows, 3);
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

#[test]
fn a_key_set_refuses_what_is_not_an_ed25519_key() {
    let bad = AuditKeySet {
        keys: vec![AuditJwk {
            kty: "RSA".into(),
            crv: "".into(),
            kid: "k".into(),
            x: "".into(),
        }],
    };
    assert!(VerifyingKeys::from_set(&bad).is_err());
    let short = AuditKeySet {
        keys: vec![AuditJwk::ed25519("k", &[1, 2, 3])],
    };
    assert!(VerifyingKeys::from_set(&short).is_err());
}

/// The hash is SHA-256 over the previous hash, a newline and the compact JSON
/// array of the content, exactly as documented (docs/operations.md, "Tamper
/// evidence"): every chain written so far, and every export, depends on these
/// bytes.
#[test]
fn the_hash_is_over_the_documented_bytes() {
    let tricky = [
        (
            "tn_1",
            "token:ci",
            "session.call",
            Some("tool.navigate host:a.test 3ms"),
        ),
        ("tn_\"q\"", "naïve \\ 日本", "device.pair", None),
        ("t", "line\nbreak\u{2028}", "x", Some("")),
    ];
    for (n, (tenant, actor, action, detail)) in tricky.into_iter().enumerate() {
        let content = Content {
            tenant_id: tenant,
            at: 1_764_000_000_123,
            actor,
            action,
            target: "session:se_1",
            outcome: "ok",
            detail,
        };
        let seq = i64::try_from(n).unwrap_or(0) + 41;
        let canonical = serde_json::json!([
            tenant,
            seq,
            content.at,
            actor,
            action,
            "session:se_1",
            "ok",
            detail
        ])
        .to_string();
        let mut digest = Sha256::new();
        digest.update(format!("{GENESIS}\n{canonical}").as_bytes());
        assert_eq!(content.hash(GENESIS, seq), hex::encode(digest.finalize()));
    }
}
