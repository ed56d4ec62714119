//! The gateway's signing keys for delegation tokens (docs/delegation.md): Ed25519,
//! kept in the store so every replica signs and verifies with the same set. The
//! newest key signs; every key not yet dropped verifies, so a rotation never
//! invalidates a token already handed out. Verification reads only this memory;
//! an unknown `kid` (a rotation on another replica) re-reads the store, at most
//! once per [`RELOAD_EVERY`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{DecodingKey, EncodingKey};
use serde_json::{Value, json};

use crate::store::{SigningKeyRecord, Store, StoreError};

/// The only algorithm the gateway signs with and accepts.
pub const ALGORITHM: &str = "EdDSA";
/// An unknown `kid` re-reads the store at most this often.
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// A retired key is dropped once every token it could have signed has expired.
const KEEP_RETIRED_MS: i64 = (latchkey_protocol::delegation::MAX_TTL_SECS as i64 + 3_600) * 1_000;

#[derive(Default)]
struct KeySet {
    /// The newest key: `(kid, key)`.
    signing: Option<(String, Arc<EncodingKey>)>,
    verifying: HashMap<String, Arc<DecodingKey>>,
    /// The public keys as JWKs, newest first.
    jwks: Vec<Value>,
}

/// The node's copy of the key set. Clones share it.
#[derive(Clone, Default)]
pub struct SigningKeys {
    set: Arc<RwLock<KeySet>>,
    /// When an unknown `kid` last sent us to the store.
    last_miss: Arc<std::sync::Mutex<Option<Instant>>>,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private halves.
        f.debug_struct("SigningKeys")
            .field("kids", &self.read().verifying.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A new Ed25519 key, as the store keeps it.
pub fn generate(now: i64) -> Result<SigningKeyRecord, StoreError> {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .map_err(|_| StoreError::Internal("generating a signing key failed".into()))?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| StoreError::Internal("a generated signing key does not parse".into()))?;
    Ok(SigningKeyRecord {
        kid: crate::ids::SIGNING_KEY.mint(),
        algorithm: ALGORITHM.into(),
        private_key: STANDARD.encode(pkcs8.as_ref()),
        public_key: URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
        created_at: now,
        retired_at: None,
    })
}

impl SigningKeys {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, KeySet> {
        self.set.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the key set from the store, creating the first key (or a new one
    /// when every key is retired), and drop keys nothing can need any more.
    pub async fn reload(&self, store: &dyn Store, now: i64) -> Result<(), StoreError> {
        let _ = store.drop_signing_keys(now - KEEP_RETIRED_MS).await?;
        let mut keys = store.signing_keys().await?;
        if !keys.iter().any(|k| k.retired_at.is_none()) {
            store.rotate_signing_key(&generate(now)?).await?;
            keys = store.signing_keys().await?;
        }
        let mut set = KeySet::default();
        for k in keys.iter().filter(|k| k.algorithm == ALGORITHM) {
            let Ok(public) = URL_SAFE_NO_PAD.decode(&k.public_key) else {
                tracing::error!(kid = %k.kid, "a stored signing key's public half does not decode; skipped");
                continue;
            };
            set.verifying
                .insert(k.kid.clone(), Arc::new(DecodingKey::from_ed_der(&public)));
            set.jwks.push(json!({
                "kty": "OKP", "crv": "Ed25519", "alg": ALGORITHM, "use": "sig",
                "kid": k.kid, "x": k.public_key,
            }));
            if set.signing.is_none() && k.retired_at.is_none() {
                match STANDARD.decode(&k.private_key) {
                    Ok(der) => {
                        set.signing =
                            Some((k.kid.clone(), Arc::new(EncodingKey::from_ed_der(&der))))
                    }
                    Err(_) => {
                        tracing::error!(kid = %k.kid, "a stored signing key does not decode; not signing with it")
                    }
                }
            }
        }
        *self.set.write().unwrap_or_else(|p| p.into_inner()) = set;
        Ok(())
    }

    /// The key to sign with now, reading the store first if none is loaded.
    pub async fn signer(
        &self,
        store: &dyn Store,
        now: i64,
    ) -> Result<(String, Arc<EncodingKey>), StoreError> {
        if let Some(s) = self.read().signing.clone() {
            return Ok(s);
        }
        self.reload(store, now).await?;
        self.read()
            .signing
            .clone()
            .ok_or_else(|| StoreError::Internal("no signing key".into()))
    }

    /// The key `kid` names; an unknown one re-reads the store unless that was
    /// done within [`RELOAD_EVERY`].
    pub async fn verifier(
        &self,
        store: &dyn Store,
        kid: &str,
        now: i64,
    ) -> Option<Arc<DecodingKey>> {
        if let Some(k) = self.read().verifying.get(kid).cloned() {
            return Some(k);
        }
        {
            let mut last = self.last_miss.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < RELOAD_EVERY) {
                return None;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.reload(store, now).await {
            tracing::warn!(error = %e, "re-reading the signing keys failed");
            return None;
        }
        self.read().verifying.get(kid).cloned()
    }

    /// `/.well-known/jwks.json`.
    pub fn jwks(&self) -> Value {
        json!({ "keys": self.read().jwks })
    }
}

/// How often a node re-reads the key set, so a rotation made elsewhere (another
/// replica, `latchkeyd rotate-signing-key`) signs here too.
pub const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// Re-read the key set every [`REFRESH_EVERY`] until the node drains.
pub async fn keep_fresh(keys: SigningKeys, core: crate::core::Core) {
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = core.shutdown.cancelled() => return,
        }
        if let Err(e) = keys.reload(core.store.as_ref(), core.clock.now_ms()).await {
            tracing::warn!(error = %e, "re-reading the signing keys failed");
        }
    }
}
