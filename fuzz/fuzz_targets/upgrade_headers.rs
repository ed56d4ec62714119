//! The upgrade's `Origin` and `Sec-WebSocket-Protocol` checks (docs/protocol.md, "The upgrade") on
//! any set of header values: no panic, and whatever is accepted follows the rules.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use latchkey_protocol::authorize::is_token_shaped;
use latchkey_protocol::methods::AUTH_SUBPROTOCOL_PREFIX;
use latchkey_server::extension::upgrade::{auth_subprotocol, check_origin};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Lines alternate between Origin and Sec-WebSocket-Protocol values.
    let mut headers = HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        let Ok(value) = HeaderValue::from_bytes(line) else {
            continue;
        };
        let name = if i % 2 == 0 {
            HeaderName::from_static("origin")
        } else {
            HeaderName::from_static("sec-websocket-protocol")
        };
        headers.append(name, value);
    }
    if check_origin(&headers, &[]).is_ok() {
        let origins: Vec<_> = headers.get_all("origin").iter().collect();
        assert_eq!(origins.len(), 1);
        let id = origins[0]
            .to_str()
            .expect("accepted origin is text")
            .strip_prefix("chrome-extension://")
            .expect("accepted origin is an extension");
        assert!(id.len() == 32 && id.bytes().all(|b| (b'a'..=b'p').contains(&b)));
    }
    if let Ok((echo, token)) = auth_subprotocol(&headers) {
        assert!(is_token_shaped(token));
        assert_eq!(
            echo.to_str().expect("echo is text"),
            format!("{AUTH_SUBPROTOCOL_PREFIX}{token}")
        );
    }
});
