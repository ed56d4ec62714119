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

/// Widest a table prints: it fits a 100-column terminal.
pub const MAX_TABLE_COLUMNS: usize = 100;
/// A column is never squeezed narrower than this (or its widest cell).
const MIN_COLUMN: usize = 8;
/// Between columns.
const GAP: &str = "  ";

/// Print rows as left-aligned columns with a header, at most
/// [`MAX_TABLE_COLUMNS`] wide: when they would be wider, the widest columns are
/// narrowed and their longer cells cut with `…`. Every cell is made safe.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    for line in table_lines(headers, rows) {
        out!("{line}");
    }
}

/// The lines [`table`] prints.
pub fn table_lines(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
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
    fit(&mut widths, MAX_TABLE_COLUMNS);
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let width = widths.get(i).copied().unwrap_or(0);
                let c = text::truncate(c, width);
                let pad = width.saturating_sub(c.chars().count());
                format!("{c}{}", " ".repeat(pad))
            })
            .collect();
        padded.join(GAP).trim_end().to_string()
    };
    let mut lines = vec![line(
        &headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    )];
    lines.extend(rows.iter().map(|r| line(r)));
    lines
}

/// Narrow the widest columns, one character at a time, until the row fits in
/// `max` or every column is down to [`MIN_COLUMN`].
fn fit(widths: &mut [usize], max: usize) {
    let total = |w: &[usize]| w.iter().sum::<usize>() + GAP.len() * w.len().saturating_sub(1);
    while total(widths) > max {
        let Some(widest) = widths
            .iter_mut()
            .filter(|w| **w > MIN_COLUMN)
            .max_by_key(|w| **w)
        else {
            return;
        };
        *widest -= 1;
    }
}

/// `Some(x)` as text, `None` as a dash.
pub fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "-".to_string())
}

/// `value` as JSON with `--json`, else the human form.
pub fn emit<T: serde::Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce(),
) -> Result<(), crate::error::CliError> {
    if json {
        crate::output::json(value);
    } else {
        human();
    }
    Ok(())
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
    fn tables_fit_a_hundred_columns() {
        let long = "a label far longer than any column should ever be allowed to be";
        let rows = vec![
            vec![
                "0123abcd".into(),
                long.into(),
                "Alice Example <alice@example.com>".into(),
                "active".into(),
                "in 89 days".into(),
                "2 min ago".into(),
            ],
            vec![
                "4567ef01".into(),
                "short".into(),
                "-".into(),
                "revoked".into(),
                "3 days ago".into(),
                "-".into(),
            ],
        ];
        let lines = table_lines(
            &["ID", "LABEL", "OWNER", "STATUS", "EXPIRES", "LAST SEEN"],
            &rows,
        );
        assert!(
            lines.iter().all(|l| l.chars().count() <= MAX_TABLE_COLUMNS),
            "{lines:#?}"
        );
        // Short columns keep every character; the long ones are cut with an ellipsis.
        assert!(lines[1].starts_with("0123abcd  a label far"));
        assert!(lines[1].contains("…") && lines[1].contains("in 89 days  2 min ago"));
        assert!(lines[2].contains("revoked") && lines[2].contains("3 days ago"));
        // A narrow table is left as it is.
        let narrow = table_lines(&["A", "B"], &[vec!["x".into(), "y".into()]]);
        assert_eq!(narrow, ["A  B", "x  y"]);
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
