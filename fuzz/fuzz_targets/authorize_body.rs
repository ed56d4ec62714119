//! `POST /extension/authorize` bodies: anything is refused or accepted without a
//! panic, and an accepted body means exactly what it says when written back.
#![no_main]

use latchkey_protocol::authorize::{AuthorizeRequest, is_token_shaped};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<AuthorizeRequest>(data) {
        let _ = is_token_shaped(&request.next_token);
        let text = serde_json::to_string(&request).expect("serialises");
        let again: AuthorizeRequest = serde_json::from_str(&text).expect("round trip");
        assert_eq!(again, request);
    }
});
