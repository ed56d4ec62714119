//! The frame envelope (docs/protocol.md, "Frames"): any text parses or is refused without a panic,
//! and the raw fast path for results never disagrees with the full parse.
#![no_main]

use latchkey_protocol::Frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = Frame::parse(text);
    if let Some((id, raw)) = Frame::parse_success_raw(text) {
        match parsed {
            Ok(Frame::Success(s)) => {
                assert_eq!(s.id, id, "fast path id differs");
                let fast: serde_json::Value =
                    serde_json::from_str(raw.get()).expect("raw result is JSON");
                assert_eq!(fast, s.result, "fast path result differs");
            }
            other => panic!("fast path took a frame the full parse calls {other:?}"),
        }
    }
    if let Ok(frame) = Frame::parse(text) {
        // What we send back out parses to the same frame.
        let again = Frame::parse(&frame.to_text()).expect("own output parses");
        assert_eq!(again, frame);
    }
});
