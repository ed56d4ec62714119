//! Everything the CLI prints goes through here: human output as aligned columns,
//! JSON as one document, errors on stderr.
//!
//! What the server sends can come from a peer (a device's browser name, a label,
//! a page's text), so nothing received is printed as it came: control characters
//! (a terminal escape sequence could retitle the window, recolour or clear it) and
//! bidirectional overrides never reach the terminal, table cells are cut to a width
//! (so no value can make a table unprintable), and a reader that goes away (`latchkey
//! snapshot | head -3`) ends the program quietly instead of with a panic.

use std::fmt;
use std::io::{self, Write};

use latchkey_protocol::text;

/// Widest a table cell prints; a longer value is cut and ends in `…`.
pub const MAX_CELL_CHARS: usize = 48;

/// Print a line on stdout (see [`write_line`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_line(format_args!($($arg)*)) };
}

/// Print a line on stderr; a closed stderr is ignored.
macro_rules! note {
    ($($arg:tt)*) => { $crate::output::note_line(format_args!($($arg)*)) };
}

pub(crate) use {note, out};

/// Write one line on stdout. If the reader went away, exit quietly with status 0:
/// it took what it wanted.
pub fn write_line(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{args}").and_then(|()| stdout.flush()) {
        gone(&e);
    }
}

pub fn note_line(args: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{args}");
}

fn gone(e: &io::Error) -> ! {
    let code = if e.kind() == io::ErrorKind::BrokenPipe {
        0
    } else {
        latchkey_protocol::error_code::exit::FAILURE
    };
    std::process::exit(i32::from(code))
}

/// One value as a table cell: one line, nothing unsafe, at most
/// [`MAX_CELL_CHARS`].
pub fn cell(raw: &str) -> String {
    let one_line: String = raw
        .chars()
        .map(|c| if text::is_unsafe(c) { '\u{FFFD}' } else { c })
        .collect();
    text::truncate(&one_line, MAX_CELL_CHARS)
}

/// Text of many lines (a snapshot, a message) as it may reach a terminal.
pub fn lines(raw: &str) -> String {
    text::for_terminal(raw)
}

/// JSON text with the characters JSON leaves raw but a terminal would act on (DEL,
/// C1 controls, bidirectional overrides) escaped: still the same JSON document.
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // Newlines and tabs are the document's own layout; inside strings JSON has
        // already escaped them.
        if text::is_unsafe(c) && !matches!(c, '\n' | '\r' | '\t') {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Print `value` as pretty JSON on stdout.
pub fn json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => out!("{}", json_safe(&text)),
        // Our values always serialise; say so if one ever does not.
        Err(e) => note!("latchkey: cannot print the answer as JSON: {e}"),
    }
}

/// Print rows as left-aligned columns with a header; every cell is made safe.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(c)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(c.chars().count());
                format!("{c}{}", " ".repeat(pad))
            })
            .collect();
        out!("{}", padded.join("  ").trim_end());
    };
    line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for row in &rows {
        line(row);
    }
}

/// `Some(x)` as text, `None` as a dash.
pub fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_one_safe_line_of_bounded_width() {
        let hostile = "Chrome\u{1b}]0;pwned\u{7}\u{1b}[31m\u{202E}gpj.exe\nnext";
        let c = cell(hostile);
        assert!(!c.chars().any(text::is_unsafe), "{c:?}");
        assert!(!c.contains('\n'));
        let huge = cell(&"x".repeat(70_000));
        assert_eq!(huge.chars().count(), MAX_CELL_CHARS);
        assert!(huge.ends_with('…'));
    }

    #[test]
    fn json_stays_json_without_terminal_controls() {
        let value = serde_json::json!({"label": "a\u{9b}b\u{202E}c\u{1b}d", "n": [1, 2]});
        let text = json_safe(&serde_json::to_string_pretty(&value).expect("json"));
        let text = text.replace('\n', "");
        assert!(!text.chars().any(text::is_unsafe), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back, value);
    }
}
