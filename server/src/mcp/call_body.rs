//! The body of a `tools/call`, read as that one shape (docs/mcp.md, "How a call
//! is served").
//!
//! The SDK reads every message through untagged enums: the body is buffered, then
//! tried as each kind of message and each of some twenty kinds of request in
//! turn, each failed try building an error. For a tool call that was a tenth of
//! the server's CPU (load-tests/notes.md, "MCP"). A tool call's body has one
//! shape, so it is read here as exactly that shape and nothing looser: the four
//! keys of a request and no other, `"2.0"`, the method `tools/call`, and params
//! of only `name`, `arguments` and `_meta`. Whatever this refuses (another key,
//! a duplicate, another method, an input response) goes to the SDK as it came.
//! So a body read here is one the SDK reads as the same call, with the same id,
//! name, arguments and `_meta`: the tests below and the `mcp_call_body` fuzz
//! target read bodies both ways and compare.

use std::borrow::Cow;

use rmcp::model::{JsonObject, MetaObject, RequestId, RequestMetaObject};
use serde::Deserialize;

/// A `tools/call` as the direct path needs it.
#[derive(Debug, PartialEq)]
pub struct ToolCall {
    pub id: RequestId,
    pub name: String,
    pub arguments: Option<JsonObject>,
    /// `params._meta`, where the SDK keeps it (empty when absent, as the SDK's
    /// `get_meta` answers).
    pub meta: RequestMetaObject,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: Params,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    arguments: Option<JsonObject>,
    #[serde(rename = "_meta")]
    meta: Option<JsonObject>,
}

/// The call in `body`, if it is a `tools/call` of exactly the shape above.
pub fn read(body: &[u8]) -> Option<ToolCall> {
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    if message.jsonrpc != "2.0" || message.method != "tools/call" {
        return None;
    }
    let Params {
        name,
        arguments,
        meta,
    } = message.params;
    Some(ToolCall {
        id: message.id,
        name,
        arguments,
        meta: RequestMetaObject(MetaObject(meta.unwrap_or_default())),
    })
}

/// The same body as the SDK reads it, as a [`ToolCall`]: `None` where the SDK
/// reads no `tools/call` (or one with input responses or request state, which
/// this path never takes). For the tests and the fuzz target that hold
/// [`read`] to it.
#[doc(hidden)]
pub fn read_as_the_sdk_does(body: &[u8]) -> Option<ToolCall> {
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta};
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let meta = request.request.get_meta().clone();
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    let params = call.params;
    if params.input_responses.is_some() || params.request_state.is_some() {
        return None;
    }
    Some(ToolCall {
        id: request.id,
        name: params.name.into_owned(),
        arguments: params.arguments,
        meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn both(body: &str) -> (Option<ToolCall>, Option<ToolCall>) {
        (read(body.as_bytes()), read_as_the_sdk_does(body.as_bytes()))
    }

    #[test]
    fn a_plain_call_reads_the_same_both_ways() {
        let bodies = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "browser_navigate", "arguments": {"url": "https://a.test/"}}}),
            json!({"params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                        "io.modelcontextprotocol/clientCapabilities": {}},
                              "arguments": {"n": 1.5, "s": "é\u{0}", "list": [1, -2, null]},
                              "name": "browser_click"},
                   "method": "tools/call", "id": "req-7", "jsonrpc": "2.0"}),
            json!({"jsonrpc": "2.0", "id": -3, "method": "tools/call",
                   "params": {"name": "x", "arguments": null, "_meta": null}}),
            json!({"jsonrpc": "2.0", "id": i64::MAX, "method": "tools/call",
                   "params": {"name": "x"}}),
            json!({"jsonrpc": "2.0", "id": 1.0, "method": "tools/call",
                   "params": {"name": "x", "arguments": {}}}),
        ];
        for body in bodies {
            let body = body.to_string();
            let (lean, sdk) = both(&body);
            assert!(lean.is_some(), "not read here: {body}");
            assert_eq!(lean, sdk, "{body}");
        }
        // Escapes in the fixed strings are read too, as the SDK reads them.
        let escaped =
            r#"{"jsonrpc":"2\u002e0","id":2,"method":"tools\/call","params":{"name":"b\u0061r"}}"#;
        let (lean, sdk) = both(escaped);
        assert!(lean.is_some());
        assert_eq!(lean, sdk);
        assert_eq!(lean.map(|c| c.name).as_deref(), Some("bar"));
    }

    #[test]
    fn anything_looser_is_left_to_the_sdk() {
        let refused = [
            // Another key, at the top or in the params.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}"#,
            // Input responses and request state: the SDK's retries.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","inputResponses":{}}}"#,
            // A key twice.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","name":"y"}}"#,
            // Missing or wrong parts.
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":"v"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}} trailing"#,
        ];
        for body in refused {
            assert_eq!(read(body.as_bytes()), None, "{body}");
        }
    }

    #[test]
    fn whatever_is_read_here_the_sdk_reads_as_the_same_call() {
        // Two calls (every part present; keys in another order), each mutated one
        // byte at a time: where this reads a call, the SDK reads the same one.
        let seeds = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":null}]},"_meta":{"k":1}}}"#,
            r#"{"params":{"name":"n"},"id":"s","method":"tools/call","jsonrpc":"2.0"}"#,
        ];
        let alphabet = b"{}[]\":,0123456789-.eE \\nulltrue_";
        let mut read_here = 0;
        for seed in seeds {
            for at in 0..seed.len() {
                for &b in alphabet {
                    let mut body = seed.as_bytes().to_vec();
                    body[at] = b;
                    if let Some(lean) = read(&body) {
                        read_here += 1;
                        assert_eq!(
                            Some(lean),
                            read_as_the_sdk_does(&body),
                            "{}",
                            String::from_utf8_lossy(&body)
                        );
                    }
                }
            }
        }
        assert!(read_here > 100, "only {read_here} mutants were calls");
    }
}
