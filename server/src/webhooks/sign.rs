//! Standard Webhooks signing (docs/webhooks.md, "Verifying a delivery"): each
//! endpoint has a `whsec_` secret, 24 random bytes in base64; a delivery carries
//! `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`,
//! `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the secret's
//! bytes. Any Standard Webhooks library verifies it.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The secret's prefix.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new endpoint secret.
pub fn new_secret() -> String {
    let bytes: [u8; 24] = rand::random();
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The `webhook-signature` header value for a delivery, or `None` when the
/// stored secret does not decode (it always does: the gateway made it).
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD
        .decode(secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret))
        .ok()?;
    let key = hmac::Key::new(hmac::HMAC_SHA256, &key);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    Some(format!("v1,{}", STANDARD.encode(ctx.sign().as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example from the Standard Webhooks specification's test vectors.
    #[test]
    fn matches_the_specifications_example() {
        let sig = signature(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            sig.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn secrets_are_new_each_time() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 32);
    }
}
