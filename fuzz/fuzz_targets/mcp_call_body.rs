//! The body of an MCP tool call that latchkeyd reads itself, without the SDK
//! (docs/mcp.md, "How a call is served"): whatever it reads as a call, the SDK
//! reads as the same call, with the same id, name, arguments and `_meta`; and
//! no body panics either reader.
#![no_main]

use latchkey_server::mcp::call_body;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let sdk = call_body::read_as_the_sdk_does(data);
    if let Some(call) = call_body::read(data) {
        assert_eq!(Some(call), sdk, "{}", String::from_utf8_lossy(data));
    }
});
