//! Ids as people handle them (docs/cli.md, "Ids"): a table shows each id by its
//! shortest unique prefix (at least [`SHOWN_DIGITS`] hex digits), and a command
//! takes any unique prefix of at least [`MIN_DIGITS`], resolved against the list
//! that id belongs to, the way git takes a short commit hash. A whole id is used
//! as it is, with no extra request.

use latchkey_protocol::ErrorCode;
use reqwest::Method;
use serde_json::Value;

use crate::client::ApiClient;
use crate::error::CliError;

/// Hex digits a table shows at least.
pub const SHOWN_DIGITS: usize = 8;
/// Hex digits a prefix must have: fewer would match by accident.
pub const MIN_DIGITS: usize = 4;

/// What an id names, and where the ids of that kind are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// A browser of the team (admin).
    Device,
    /// A browser of the caller's own (member).
    MyDevice,
    /// A browser the agent may use.
    Browser,
    Token,
    Member,
    Pairing,
    /// Any session of the team (admin).
    TeamSession,
    /// A session on a browser of the caller's own (member).
    MySession,
    /// A session of the caller's (agent).
    Session,
    Delegation,
    Webhook,
}

impl IdKind {
    fn noun(self) -> &'static str {
        match self {
            IdKind::Device | IdKind::MyDevice => "device",
            IdKind::Browser => "browser",
            IdKind::Token => "token",
            IdKind::Member => "member",
            IdKind::Pairing => "pairing link",
            IdKind::TeamSession | IdKind::MySession | IdKind::Session => "session",
            IdKind::Delegation => "delegation",
            IdKind::Webhook => "webhook",
        }
    }

    /// The kind's prefix and the hex digits after it (docs/security.md).
    fn shape(self) -> (&'static str, usize) {
        match self {
            IdKind::Device
            | IdKind::MyDevice
            | IdKind::Browser
            | IdKind::TeamSession
            | IdKind::MySession
            | IdKind::Session => ("", 32),
            IdKind::Token => ("tok_", 16),
            IdKind::Member => ("mem_", 16),
            IdKind::Pairing => ("pair_", 16),
            IdKind::Delegation => ("del_", 16),
            IdKind::Webhook => ("wh_", 16),
        }
    }

    /// The list request and the array in its answer.
    fn list(self) -> (&'static str, &'static str) {
        match self {
            IdKind::Device => ("/v1/admin/devices", "devices"),
            IdKind::MyDevice => ("/v1/me/devices", "devices"),
            IdKind::Browser => ("/v1/browsers", "browsers"),
            IdKind::Token => ("/v1/admin/tokens", "tokens"),
            IdKind::Member => ("/v1/admin/members", "members"),
            IdKind::Pairing => ("/v1/admin/pairings", "pairings"),
            IdKind::TeamSession => ("/v1/admin/sessions", "sessions"),
            IdKind::MySession => ("/v1/me/sessions", "sessions"),
            IdKind::Session => ("/v1/sessions", "sessions"),
            IdKind::Delegation => ("/v1/delegations", "delegations"),
            IdKind::Webhook => ("/v1/admin/webhooks", "webhooks"),
        }
    }

    /// Whether `id` is a whole id of this kind.
    fn is_whole(self, id: &str) -> bool {
        let (prefix, digits) = self.shape();
        id.strip_prefix(prefix)
            .is_some_and(|hex| hex.len() == digits && is_hex(hex))
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The whole id that `given` names: itself when whole, else the one id of `kind`
/// it is a prefix of (with or without the kind's `tok_`-style prefix). Something
/// that is not hex is passed on as it is, for the server to answer `not_found`.
pub async fn resolve(client: &ApiClient, kind: IdKind, given: &str) -> Result<String, CliError> {
    if kind.is_whole(given) {
        return Ok(given.to_string());
    }
    if kind == IdKind::Member && given.contains('@') {
        return member_by_email(client, given).await;
    }
    let (prefix, _) = kind.shape();
    let digits = given
        .strip_prefix(prefix)
        .unwrap_or(given)
        .to_ascii_lowercase();
    if digits.is_empty() || !is_hex(&digits) {
        return Ok(given.to_string());
    }
    if digits.len() < MIN_DIGITS {
        return Err(CliError::Config(format!(
            "{given:?} is too short for a {} id: give at least {MIN_DIGITS} of its hex digits, or all of it",
            kind.noun()
        )));
    }
    let (path, field) = kind.list();
    let list: Value = client.call(Method::GET, path, None::<&Value>).await?;
    let ids: Vec<&str> = list[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["id"].as_str())
        .collect();
    pick(kind, given, &digits, &ids)
}

/// [`resolve`] each of `given`, in order.
pub async fn resolve_all(
    client: &ApiClient,
    kind: IdKind,
    given: Option<Vec<String>>,
) -> Result<Option<Vec<String>>, CliError> {
    let Some(given) = given else {
        return Ok(None);
    };
    let mut whole = Vec::with_capacity(given.len());
    for id in &given {
        whole.push(resolve(client, kind, id).await?);
    }
    Ok(Some(whole))
}

/// A member named by email address (as the team stores it: lower case).
async fn member_by_email(client: &ApiClient, email: &str) -> Result<String, CliError> {
    let list: Value = client
        .call(Method::GET, "/v1/admin/members", None::<&Value>)
        .await?;
    let wanted = email.trim().to_lowercase();
    list["members"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["email"].as_str() == Some(wanted.as_str()))
        .and_then(|m| m["id"].as_str())
        .map(str::to_string)
        .ok_or_else(|| CliError::Api {
            code: ErrorCode::NotFound,
            message: format!("no member of the team has the email {email:?}"),
            data: None,
        })
}

/// The one id among `ids` whose digits start with `digits`.
fn pick(kind: IdKind, given: &str, digits: &str, ids: &[&str]) -> Result<String, CliError> {
    let (prefix, _) = kind.shape();
    let matching: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| id.strip_prefix(prefix).unwrap_or(id).starts_with(digits))
        .collect();
    match matching.as_slice() {
        [one] => Ok((*one).to_string()),
        [] => Err(CliError::Api {
            code: ErrorCode::NotFound,
            message: format!("no {} id starts with {given:?}", kind.noun()),
            data: None,
        }),
        many => {
            let shown: Vec<&str> = many.iter().take(5).copied().collect();
            Err(CliError::AmbiguousId(format!(
                "{given:?} starts {} {} ids ({}{}); give more of it",
                many.len(),
                kind.noun(),
                shown.join(", "),
                if many.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            )))
        }
    }
}

/// [`shorten`] the ids of `items`, each read by `id`.
pub fn shorten_each<T>(items: &[T], id: impl Fn(&T) -> &str) -> Vec<String> {
    shorten(&items.iter().map(id).collect::<Vec<_>>())
}

/// Each of `ids` by its shortest prefix that no other of `ids` shares, with at
/// least [`SHOWN_DIGITS`] hex digits after a `tok_`-style prefix. In the order given.
pub fn shorten(ids: &[&str]) -> Vec<String> {
    let digits = |id: &str| -> (usize, usize) {
        // Where the hex digits start, and how many there are.
        let start = id.find('_').map_or(0, |i| i + 1);
        (start, id.len() - start)
    };
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    ids.iter()
        .map(|id| {
            let at = sorted.partition_point(|s| s < id);
            let before = at.checked_sub(1).and_then(|i| sorted.get(i));
            let after = sorted.get(at + 1);
            let shared = before
                .into_iter()
                .chain(after)
                .map(|other| common(id, other))
                .max()
                .unwrap_or(0);
            let (start, len) = digits(id);
            let keep = (shared + 1).max(start + SHOWN_DIGITS).min(start + len);
            id.get(..keep).unwrap_or(id).to_string()
        })
        .collect()
}

/// `text` (an audit row's actor, target or detail) with every id in it cut to
/// [`SHOWN_DIGITS`] hex digits: `device:6c5fb254d01…` reads as `device:6c5fb254`.
/// Only for reading; `--json` keeps them whole.
pub fn abbreviate(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        // A run of id characters: letters, digits and `_`.
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(end);
        out.push_str(&abbreviate_word(word));
        let sep = tail.chars().next().map_or(0, char::len_utf8);
        out.push_str(&tail[..sep]);
        rest = &tail[sep..];
    }
    out
}

/// One word: an id of ours shortened, anything else as it is.
fn abbreviate_word(word: &str) -> String {
    let (prefix, hex) = match word.split_once('_') {
        Some((kind, hex)) if hex.len() == 16 && !kind.is_empty() => (word.len() - 16, hex),
        _ if word.len() == 32 => (0, word),
        _ => return word.to_string(),
    };
    if is_hex(hex) {
        word[..prefix + SHOWN_DIGITS].to_string()
    } else {
        word.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_show_the_shortest_unique_prefix() {
        let a = "0123456789abcdef0123456789abcdef";
        let b = "0123456789ffffff0123456789abcdef";
        let c = "fedcba98765432100123456789abcdef";
        assert_eq!(
            shorten(&[a, b, c]),
            ["0123456789a", "0123456789f", "fedcba98"]
        );
        assert_eq!(
            shorten(&["tok_0123456789abcdef", "tok_99999999aaaaaaaa"]),
            ["tok_01234567", "tok_99999999"]
        );
        // Not an id of ours: shown as it is, up to its length.
        assert_eq!(shorten(&["abc"]), ["abc"]);
        assert_eq!(shorten(&[a, a]), ["01234567", "01234567"]);
    }

    #[test]
    fn ids_in_audit_text_are_cut_for_reading() {
        let device = "6c5fb254d01a4e6b9c0d1e2f3a4b5c6d";
        assert_eq!(abbreviate(&format!("device:{device}")), "device:6c5fb254");
        assert_eq!(
            abbreviate("ttl 300s, for member:mem_747d9f3f00112233"),
            "ttl 300s, for member:mem_747d9f3f"
        );
        assert_eq!(abbreviate("token:agent-926082546"), "token:agent-926082546");
        // Not hex, or not an id's length: untouched.
        let word = "x".repeat(32);
        assert_eq!(abbreviate(&word), word);
        assert_eq!(abbreviate("from 127.0.0.1 é"), "from 127.0.0.1 é");
    }

    #[test]
    fn a_prefix_names_one_id_or_fails_saying_why() {
        let ids = [
            "tok_0123456789abcdef",
            "tok_0123ffffffffffff",
            "tok_aaaa000000000000",
        ];
        let one = |given: &str, digits: &str| pick(IdKind::Token, given, digits, &ids);
        assert_eq!(one("aaaa", "aaaa").expect("unique"), ids[2]);
        assert_eq!(one("tok_01234", "01234").expect("unique"), ids[0]);
        let ambiguous = one("tok_0123", "0123").expect_err("two match");
        assert_eq!(ambiguous.code(), "ambiguous_id");
        assert!(ambiguous.message().contains(ids[0]) && ambiguous.message().contains(ids[1]));
        assert_eq!(one("bbbb", "bbbb").expect_err("none").code(), "not_found");
        assert!(IdKind::Token.is_whole(ids[0]));
        assert!(!IdKind::Token.is_whole("tok_0123"));
        assert!(IdKind::Device.is_whole("0123456789abcdef0123456789abcdef"));
    }
}
