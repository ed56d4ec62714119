//! `protocol/schema/tools.json` must equal what the tool catalogue generates: the
//! params schemas come from the same Rust types the gateway validates with.
//! Regenerate with `LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema`.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use latchkey_protocol::tools::{TOOLS, catalogue_document, validate};
use serde_json::{Map, Value, json};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/tools.json")
}

#[test]
fn the_published_catalogue_matches_the_code() {
    let generated = serde_json::to_string_pretty(&catalogue_document()).expect("json") + "\n";
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::create_dir_all(path().parent().expect("dir")).expect("mkdir");
        std::fs::write(path(), &generated).expect("write");
        return;
    }
    let committed = std::fs::read_to_string(path()).expect("protocol/schema/tools.json");
    assert_eq!(
        committed, generated,
        "protocol/schema/tools.json is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema"
    );
}

/// docs/tools.md is the catalogue rendered; it must not drift either.
#[test]
fn the_tool_reference_matches_the_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/tools.md");
    let generated = latchkey_protocol::tools::reference::markdown();
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/tools.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("docs/tools.md");
    assert_eq!(
        committed, generated,
        "docs/tools.md is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema"
    );
}

/// The schema and the validator read the same type: a value the schema rules out by
/// a range or an enum is refused by the validator too, at the same field.
#[test]
fn the_schema_and_the_validator_agree_on_ranges_and_enums() {
    let document = catalogue_document();
    let tools = document["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), TOOLS.len());
    let mut checked = 0;
    for tool in tools {
        let method = tool["method"].as_str().expect("method");
        let properties = tool["params"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (field, schema) in properties {
            let bad = if let Some(max) = schema.get("maximum").and_then(Value::as_u64) {
                json!(max + 1)
            } else if let Some(values) = schema.get("enum") {
                assert!(values.is_array());
                json!("not-one-of-them")
            } else {
                continue;
            };
            let mut params = Map::new();
            params.insert(field.clone(), bad);
            let refused = validate(method, &params).expect_err(&format!("{method}.{field}"));
            // The field is named, or a required sibling is (reported first).
            assert!(!refused.field.is_empty(), "{method}.{field}");
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} fields checked");
}

/// `protocol/schema/audit-export.json`: the export format, from the types the CLI
/// and the gateway read and write it with.
#[test]
fn the_audit_export_schema_matches_the_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/audit-export.json");
    let generated = serde_json::to_string_pretty(&latchkey_protocol::audit_chain::export_schema())
        .expect("json")
        + "\n";
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("protocol/schema/audit-export.json");
    assert_eq!(
        committed, generated,
        "protocol/schema/audit-export.json is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema"
    );
}

/// `protocol/schema/cluster-notice.json`: what replicas tell each other
/// (docs/cluster.md, "Notices").
#[test]
fn the_published_cluster_notice_schema_matches_the_code() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/cluster-notice.json");
    let generated =
        serde_json::to_string_pretty(&latchkey_protocol::cluster::schema()).expect("json") + "\n";
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write");
        return;
    }
    let committed = std::fs::read_to_string(&path).expect("protocol/schema/cluster-notice.json");
    assert_eq!(
        committed, generated,
        "protocol/schema/cluster-notice.json is stale; regenerate with LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test schema"
    );
}
