//! The gateway's audit key (docs/operations.md, "Tamper evidence"): Ed25519,
//! signing the checkpoints in every tenant's chain. By default the key is made on
//! first start and kept in the store, like the delegation keys, so every replica
//! signs with it. An operator who wants checkpoints that someone able to write the
//! database cannot forge keeps the key in a file instead (`audit.signing_key_file`,
//! PKCS#8 PEM); only its public half is then recorded in the store.
//!
//! Audit keys are never dropped: a checkpoint must stay verifiable for as long as
//! its rows are kept.

use std::path::Path;
use std::sync::{Arc, RwLock};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use latchkey_protocol::audit_chain::{AuditJwk, AuditKeySet, Checkpoint, VerifyingKeys};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest, Sha256};

use crate::store::{AuditKeyRecord, Store, StoreError};

/// Why the audit key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuditKeyError {
    #[error("audit.signing_key_file {path}: {why}")]
    File { path: String, why: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

struct Loaded {
    /// The key that signs: `(kid, pair)`.
    signer: (String, Arc<Ed25519KeyPair>),
    /// Every audit key's public half.
    public: AuditKeySet,
}

/// The node's audit keys. Clones share them.
#[derive(Clone)]
pub struct AuditKeys {
    loaded: Arc<RwLock<Loaded>>,
}

impl std::fmt::Debug for AuditKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private half.
        f.debug_struct("AuditKeys")
            .field("signing", &self.read().signer.0)
            .finish_non_exhaustive()
    }
}

/// A key id naming its public key: `ak_` and 16 hex digits of its SHA-256.
fn kid_of(public: &[u8]) -> String {
    format!("ak_{}", &hex::encode(Sha256::digest(public))[..16])
}

fn pair_from_pkcs8(der: &[u8]) -> Option<Ed25519KeyPair> {
    Ed25519KeyPair::from_pkcs8(der)
        .or_else(|_| Ed25519KeyPair::from_pkcs8_maybe_unchecked(der))
        .ok()
}

/// The key in a PKCS#8 PEM file (`openssl genpkey -algorithm ed25519`).
fn from_file(path: &Path) -> Result<Ed25519KeyPair, AuditKeyError> {
    let err = |why: &str| AuditKeyError::File {
        path: path.display().to_string(),
        why: why.to_string(),
    };
    let key = PrivateKeyDer::from_pem_file(path).map_err(|e| err(&e.to_string()))?;
    let PrivateKeyDer::Pkcs8(der) = key else {
        return Err(err("not a PKCS#8 key"));
    };
    pair_from_pkcs8(der.secret_pkcs8_der()).ok_or_else(|| err("not an Ed25519 key"))
}

fn generate(now: i64) -> Result<(AuditKeyRecord, Ed25519KeyPair), StoreError> {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .map_err(|_| StoreError::Internal("generating the audit key failed".into()))?;
    let pair = pair_from_pkcs8(pkcs8.as_ref())
        .ok_or_else(|| StoreError::Internal("a generated audit key does not parse".into()))?;
    let public = pair.public_key().as_ref();
    let record = AuditKeyRecord {
        kid: kid_of(public),
        private_key: Some(STANDARD.encode(pkcs8.as_ref())),
        public_key: URL_SAFE_NO_PAD.encode(public),
        created_at: now,
    };
    Ok((record, pair))
}

pub fn public_set(records: &[AuditKeyRecord]) -> AuditKeySet {
    AuditKeySet {
        keys: records
            .iter()
            .filter_map(|k| {
                let raw = URL_SAFE_NO_PAD.decode(&k.public_key).ok()?;
                Some(AuditJwk::ed25519(&k.kid, &raw))
            })
            .collect(),
    }
}

impl AuditKeys {
    /// The key from `file`, or else the newest the store keeps (made now when it
    /// keeps none), with every audit key's public half.
    pub async fn load(
        store: &dyn Store,
        file: Option<&Path>,
        now: i64,
    ) -> Result<Self, AuditKeyError> {
        let signer = match file {
            Some(path) => {
                let pair = from_file(path)?;
                let public = pair.public_key().as_ref();
                let kid = kid_of(public);
                store
                    .add_audit_key(&AuditKeyRecord {
                        kid: kid.clone(),
                        private_key: None,
                        public_key: URL_SAFE_NO_PAD.encode(public),
                        created_at: now,
                    })
                    .await?;
                (kid, pair)
            }
            None => Self::stored_signer(store, now).await?,
        };
        let public = public_set(&store.audit_keys().await?);
        Ok(Self {
            loaded: Arc::new(RwLock::new(Loaded {
                signer: (signer.0, Arc::new(signer.1)),
                public,
            })),
        })
    }

    async fn stored_signer(
        store: &dyn Store,
        now: i64,
    ) -> Result<(String, Ed25519KeyPair), AuditKeyError> {
        let newest = |keys: Vec<AuditKeyRecord>| {
            keys.into_iter().rev().find_map(|k| {
                let der = STANDARD.decode(k.private_key.as_deref()?).ok()?;
                Some((k.kid, pair_from_pkcs8(&der)?))
            })
        };
        if let Some(found) = newest(store.audit_keys().await?) {
            return Ok(found);
        }
        // None yet: make one. Two replicas starting together may both do so;
        // each then signs with a key the store keeps, and both verify.
        let (record, pair) = generate(now)?;
        store.add_audit_key(&record).await?;
        Ok((record.kid, pair))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.loaded.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Re-read the public halves (a key another replica made).
    pub async fn refresh(&self, store: &dyn Store) -> Result<(), StoreError> {
        let public = public_set(&store.audit_keys().await?);
        self.loaded
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .public = public;
        Ok(())
    }

    /// Every audit key's public half, as published.
    pub fn key_set(&self) -> AuditKeySet {
        self.read().public.clone()
    }

    /// The public halves, ready to verify with.
    pub fn verifying(&self) -> VerifyingKeys {
        VerifyingKeys::from_set(&self.read().public).unwrap_or_default()
    }

    /// A checkpoint row's detail: the signature over the tenant's place `seq`
    /// and its `hash`, in a row written at `at`.
    pub fn sign_checkpoint(&self, tenant_id: &str, seq: i64, hash: &str, at: i64) -> String {
        let (kid, pair) = self.read().signer.clone();
        let sig = pair.sign(&Checkpoint::message(tenant_id, seq, hash, at));
        let cp = Checkpoint {
            seq,
            hash: hash.to_string(),
            kid,
            sig: URL_SAFE_NO_PAD.encode(sig.as_ref()),
        };
        serde_json::to_string(&cp).unwrap_or_default()
    }
}

/// The key set in a file written by `latchkey admin audit keys` or `latchkeyd
/// audit keys`.
pub fn read_key_set(path: &Path) -> Result<VerifyingKeys, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let set: AuditKeySet =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    VerifyingKeys::from_set(&set).map_err(|e| format!("{}: {e}", path.display()))
}
