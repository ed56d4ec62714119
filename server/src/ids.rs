//! The ids the server issues: a kind's prefix and 16 lowercase hex digits. Minted
//! here, and checked here: an id a client sends is held against its kind's shape
//! before any store reads it, so a malformed one (a NUL byte PostgreSQL refuses,
//! kilobytes of text, another kind's id) answers exactly like an unknown one
//! instead of reaching the database (docs/security.md, "What a peer can make the gateway store").
//! Devices and sessions have ids of their own shape (32 hex digits, no prefix).

use crate::auth::secret;

/// A kind of id, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdKind(&'static str);

pub const TENANT: IdKind = IdKind("tn_");
pub const MEMBER: IdKind = IdKind("mem_");
pub const TOKEN: IdKind = IdKind("tok_");
pub const PAIRING: IdKind = IdKind("pair_");
pub const DELEGATION: IdKind = IdKind("del_");
pub const SIGNING_KEY: IdKind = IdKind("key_");
pub const WEBHOOK: IdKind = IdKind("wh_");

/// Random hex digits after the prefix (8 random bytes).
const HEX_DIGITS: usize = 16;

impl IdKind {
    /// A new random id of this kind.
    pub fn mint(self) -> String {
        format!("{}{}", self.0, secret::random_hex(HEX_DIGITS / 2))
    }

    /// Whether `id` has this kind's shape (lowercase hex, as minted).
    pub fn holds(self, id: &str) -> bool {
        id.strip_prefix(self.0).is_some_and(|hex| {
            hex.len() == HEX_DIGITS && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_hold_and_nothing_else_does() {
        for kind in [
            TENANT,
            MEMBER,
            TOKEN,
            PAIRING,
            DELEGATION,
            SIGNING_KEY,
            WEBHOOK,
        ] {
            let id = kind.mint();
            assert!(kind.holds(&id), "{id}");
        }
        assert!(MEMBER.holds("mem_0123456789abcdef"));
        for bad in [
            "mem_0123",
            "tok_0123456789abcdef",
            "mem_0123456789ABCDEF",
            "mem_0123456789abcde\0",
            "mem_0123456789abcdef0",
            "",
        ] {
            assert!(!MEMBER.holds(bad), "{bad:?}");
        }
    }
}
