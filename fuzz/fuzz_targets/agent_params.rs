//! What an agent or a device sends that the gateway judges or stores: any JSON
//! object as the params of any catalogue method is accepted or refused without a
//! panic, a refusal names a field that is in the params (or none), and any text
//! cleaned for storage keeps within its bound and holds nothing unsafe.
#![no_main]

use latchkey_protocol::text;
use latchkey_protocol::tools::{TOOLS, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    if let Ok(text_in) = std::str::from_utf8(rest) {
        let cleaned = text::clean(text_in, text::MAX_LABEL_CHARS);
        assert!(cleaned.chars().count() <= text::MAX_LABEL_CHARS);
        assert!(!cleaned.chars().any(text::is_unsafe));
        assert!(text::truncate(text_in, 10).chars().count() <= 10);
    }
    let Ok(serde_json::Value::Object(params)) = serde_json::from_slice(rest) else {
        return;
    };
    // Every method of the catalogue, and one it does not know (passed through).
    let pick = usize::from(pick) % (TOOLS.len() + 1);
    let method = TOOLS.get(pick).map_or("tool.unknown", |t| t.method);
    if let Err(e) = validate(method, &params) {
        let top = e.field.split(['.', '[']).next().unwrap_or_default();
        assert!(
            e.field.is_empty() || params.contains_key(top) || e.message.starts_with("missing field")
                || matches!(top, "ref" | "overrides"),
            "{method}: field {:?} for {params:?}",
            e.field
        );
    }
});
