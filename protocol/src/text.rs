//! Text a peer sends that Latchkey stores or shows: how long it may be and which
//! characters never survive.
//!
//! Every display string that arrives from a peer (a device's handshake, a pairing or
//! device label, a token name) goes through [`clean`] before it is stored, and every
//! string the CLI prints goes through it again before it reaches a terminal. Control
//! characters (C0, DEL, C1: an `ESC ] 0 ;` title change or an `ESC [31m` colour is a
//! terminal injection) and the bidirectional overrides and isolates (which make
//! `exe.txt` read as `txt.exe`) are removed; nothing else is changed.
//!
//! The limits are in characters (Unicode scalar values), documented in
//! docs/security.md.

/// Longest device label, pairing label and handshake `label`.
pub const MAX_LABEL_CHARS: usize = 100;
/// Longest API token name.
pub const MAX_TOKEN_NAME_CHARS: usize = 64;
/// Longest handshake `client`, `version`, `protocol_version`, `instance_id`,
/// `min_compatible_peer` and `min_compatible_protocol`.
pub const MAX_HANDSHAKE_FIELD_CHARS: usize = 64;
/// Longest handshake `browser.name` and `browser.version`.
pub const MAX_BROWSER_FIELD_CHARS: usize = 64;
/// Longest audit `detail`; a longer one is cut (with `…`).
pub const MAX_AUDIT_DETAIL_CHARS: usize = 512;
/// Longest audit `actor` or `target`.
pub const MAX_AUDIT_REF_CHARS: usize = 160;
/// Longest request id an agent may use on the agent socket.
pub const MAX_REQUEST_ID_CHARS: usize = 128;
/// Longest method name an agent may send on the agent socket.
pub const MAX_METHOD_CHARS: usize = 64;

/// Whether `c` is a bidirectional formatting character: the embeddings and
/// overrides U+202A–U+202E, the isolates U+2066–U+2069, and the marks U+200E,
/// U+200F and U+061C.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// Whether `c` may never be stored or shown: a control character (C0, DEL, C1) or a
/// bidirectional formatting character.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `raw` without unsafe characters ([`is_unsafe`]), trimmed, and cut to `max_chars`
/// characters.
pub fn clean(raw: &str, max_chars: usize) -> String {
    raw.chars()
        .filter(|c| !is_unsafe(*c))
        .take(max_chars)
        .collect::<String>()
        .trim()
        .to_string()
}

/// Whether [`clean`] would return `raw` unchanged with `max_chars`: no unsafe
/// character, nothing to trim, and no more bytes (so no more characters) than
/// the limit. Lets a writer keep a string it owns instead of copying it.
pub fn is_clean(raw: &str, max_chars: usize) -> bool {
    raw.len() <= max_chars && raw.trim().len() == raw.len() && !raw.chars().any(is_unsafe)
}

/// `raw` cut to at most `max_chars` characters, ending in `…` when it was cut.
pub fn truncate(raw: &str, max_chars: usize) -> String {
    match raw.char_indices().nth(max_chars.saturating_sub(1)) {
        Some((at, _)) if raw[at..].chars().nth(1).is_some() => format!("{}…", &raw[..at]),
        _ => raw.to_string(),
    }
}

/// Multi-line text (a page snapshot, a message) made safe for a terminal: newlines
/// and tabs stay, every other unsafe character becomes `\u{FFFD}` so that nothing
/// silently disappears from what a person reads.
pub fn for_terminal(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c == '\n' || c == '\t' || !is_unsafe(c) {
                c
            } else {
                '\u{FFFD}'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_clean_is_what_clean_keeps() {
        let samples = [
            "",
            "session:abc",
            "token:ci-bot",
            " padded",
            "padded ",
            "tab\there",
            "esc\u{1b}[31m",
            "a\u{202E}b",
            "naïve café",
            "日本語テキスト",
            "xxxxxxxxxx",
            "quote\"and\\back",
            "\u{85}next line",
            "ends with nbsp\u{a0}",
        ];
        for raw in samples {
            for max in [0, 3, 10, 40] {
                if is_clean(raw, max) {
                    assert_eq!(clean(raw, max), raw, "{raw:?} at {max}");
                }
            }
            assert_eq!(is_clean(raw, 64), clean(raw, 64) == raw, "{raw:?}");
        }
    }

    #[test]
    fn escapes_and_bidi_are_removed() {
        let hostile = "Alice\u{1b}]0;owned\u{7}\u{1b}[31m laptop\u{202E}txt.exe\u{2066}";
        assert_eq!(clean(hostile, 100), "Alice]0;owned[31m laptoptxt.exe");
        assert_eq!(clean("  x\u{85}y  ", 100), "xy");
        assert_eq!(clean("ünïcödé 漢字 ok", 100), "ünïcödé 漢字 ok");
    }

    #[test]
    fn bounds_are_in_characters() {
        assert_eq!(clean(&"é".repeat(300), 100).chars().count(), 100);
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abcd", 4), "abcd");
        assert_eq!(truncate("", 4), "");
        assert_eq!(truncate("ééééé", 3).chars().count(), 3);
    }

    #[test]
    fn terminal_text_keeps_lines_and_marks_the_rest() {
        assert_eq!(for_terminal("a\n\tb\u{1b}[2Jc"), "a\n\tb\u{FFFD}[2Jc");
        assert_eq!(for_terminal("x\u{202E}y\r"), "x\u{FFFD}y\u{FFFD}");
    }
}
