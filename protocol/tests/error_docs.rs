//! `docs/error-codes.md` embeds the code table generated from the Rust source; this
//! test fails when the two drift. Regenerate with
//! `LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test error_docs`.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

const BEGIN: &str = "<!-- BEGIN GENERATED: error table -->\n";
const END: &str = "<!-- END GENERATED -->";

#[test]
fn error_code_docs_match_the_table() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/error-codes.md");
    let doc = std::fs::read_to_string(&path).expect("docs/error-codes.md");
    let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
    let end = doc.find(END).expect("end marker");
    let table = latchkey_protocol::error_code::markdown_table();
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
