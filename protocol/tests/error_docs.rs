//! `docs/error-codes.md` embeds the code table generated from the Rust source; this
//! test fails when the two drift. Regenerate with
//! `LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test error_docs`.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

const END: &str = "<!-- END GENERATED -->";

#[test]
fn error_code_docs_match_the_table() {
    check(
        "<!-- BEGIN GENERATED: error table -->\n",
        latchkey_protocol::error_code::markdown_table(),
    );
}

#[test]
fn close_code_docs_match_the_table() {
    check(
        "<!-- BEGIN GENERATED: close table -->\n",
        latchkey_protocol::close_code::markdown_table(),
    );
}

fn check(begin: &str, table: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/error-codes.md");
    let doc = std::fs::read_to_string(&path).expect("docs/error-codes.md");
    let start = doc.find(begin).expect("begin marker") + begin.len();
    let end = start + doc[start..].find(END).expect("end marker");
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..start], table, &doc[end..]);
        std::fs::write(&path, updated).expect("write");
        return;
    }
    assert_eq!(
        &doc[start..end],
        table,
        "docs/error-codes.md is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test error_docs"
    );
}
