//! Generating, hashing and comparing secrets.
//!
//! Every credential (API token, pairing secret, device token) is 256 random bits.
//! Only its SHA-256 is stored; comparisons of hashes that come from a lookup are
//! repeated in constant time so that no code path branches on secret bytes.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Prefix of Latchkey API tokens, so they are recognisable in secret scanners.
pub const API_TOKEN_PREFIX: &str = "lk_";

/// 32 random bytes, unpadded base64url: 43 characters.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A new API token: `lk_` + 43 characters.
pub fn new_api_token() -> String {
    format!("{API_TOKEN_PREFIX}{}", random_secret())
}

/// `n` random bytes as lowercase hex (ids, not secrets). One per relayed call.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The stored form of a secret: SHA-256, lowercase hex.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Constant-time equality of two hashes (or any two strings of secret material).
pub fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_hashes() {
        let s = random_secret();
        assert_eq!(s.len(), 43);
        assert!(latchkey_protocol::authorize::is_token_shaped(&s));
        assert_ne!(s, random_secret());
        assert!(new_api_token().starts_with("lk_"));
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(ct_eq(&hash("x"), &hash("x")));
        assert!(!ct_eq(&hash("x"), &hash("y")));
        assert_eq!(random_hex(16).len(), 32);
        assert!(
            random_hex(16)
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(
            hash("x"),
            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
        );
    }
}
