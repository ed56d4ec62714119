//! `tools/call` answered in the request's own task (docs/mcp.md, "How a call is
//! served").
//!
//! The SDK serves every stateless POST by building a service, a peer, channels and
//! three tasks for it, re-encoding the message to check its headers and re-reading
//! the allowed hosts: about three quarters of what a catalogue tool call cost on this
//! surface, measured in load-tests/notes.md ("MCP"). A call is nearly all of an
//! agent's traffic, so this layer answers it directly, through the same handler the
//! SDK would call, and writes the same JSON-RPC answer.
//!
//! It takes only requests that pass every check the SDK makes, each checked here by
//! the same rule and stricter where that is simpler (an `Origin` header, any
//! parameter in `Accept`, a chunked body, a header in Base64, an unknown version or
//! a body of any shape but a plain call's, [`call_body`], all go to the SDK).
//! Anything else, and every other method, goes to the SDK unchanged, with the body
//! it sent. So nothing the SDK refuses is accepted here, and what it
//! accepts is answered alike: `tests/mcp_direct.rs` sends each request both ways and
//! compares the answers.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use latchkey_protocol::tools::mcp::mcp_tool;
use rmcp::model::{
    CallToolResponse, JsonObject, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::auth;
use super::call_body::{self, ToolCall};
use super::handler::{LatchkeyMcp, caller_for};
use crate::auth::principal::Principal;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";
const MCP_PARAM_PREFIX: &str = "mcp-param-";
const SESSION_ID: &str = "mcp-session-id";

/// What the layer needs besides the request: the handler the SDK would call (and
/// its server, to authenticate with), and the SDK's limits, read once.
#[derive(Clone)]
pub struct Direct {
    handler: LatchkeyMcp,
    /// The allowed `Host` values as the SDK compares them: name lower-cased and
    /// unbracketed, and a port or any port.
    hosts: Arc<[(String, Option<u16>)]>,
    max_body: usize,
}

impl Direct {
    pub fn new(handler: LatchkeyMcp, allowed_hosts: &[String], max_body: usize) -> Self {
        Self {
            handler,
            hosts: host_list(allowed_hosts).into(),
            max_body,
        }
    }

    /// The head checks the SDK makes before reading the body, as it makes them:
    /// the `Host` allowed, no `Origin` (the SDK checks one against its list; here it
    /// sends the request there), both media types accepted, a JSON body of a
    /// declared length within the limit, a version the SDK knows.
    fn head_passes(&self, method: &Method, headers: &HeaderMap) -> bool {
        method == Method::POST
            && !headers.contains_key(header::ORIGIN)
            && !headers.contains_key(SESSION_ID)
            && host_allowed(&self.hosts, headers)
            && accepts_json_and_events(headers)
            && one_value(headers, header::CONTENT_TYPE.as_str())
                .is_some_and(|v| essence(v).eq_ignore_ascii_case(JSON))
            && one_value(headers, header::CONTENT_LENGTH.as_str())
                .and_then(|v| v.parse::<usize>().ok())
                .is_some_and(|n| n <= self.max_body)
            && (!headers.contains_key(PROTOCOL_VERSION)
                || version_header(headers).is_some_and(known_version))
    }
}

/// The allowed hosts as the SDK reads them: `host[:port]`, or a bare name.
fn host_list(allowed_hosts: &[String]) -> Vec<(String, Option<u16>)> {
    allowed_hosts
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .map(|h| match axum::http::uri::Authority::try_from(h) {
            Ok(a) => (normal_host(a.host()), a.port_u16()),
            Err(_) => (normal_host(h), None),
        })
        .collect()
}

/// The one `Host` header names an allowed host: the same name, and the same port
/// where the entry has one. (Without a `Host` header the SDK reads the URI's
/// authority; such a request goes to it.)
fn host_allowed(hosts: &[(String, Option<u16>)], headers: &HeaderMap) -> bool {
    let Some(host) = one_value(headers, header::HOST.as_str()) else {
        return false;
    };
    let Ok(authority) = axum::http::uri::Authority::try_from(host) else {
        return false;
    };
    let (name, port) = (unbracketed(authority.host()), authority.port_u16());
    hosts
        .iter()
        .any(|(h, p)| h.eq_ignore_ascii_case(name) && p.is_none_or(|p| Some(p) == port))
}

/// The layer, the one in front of the SDK: the caller authenticated first (a
/// refusal answered here), then a catalogue tool's call that passes every check
/// answered here; anything else goes on to the SDK as it came, with the principal
/// in its extensions for the handler. One layer rather than two: each of axum's
/// layers boxes and clones the service behind it on every request.
pub async fn answer(State(direct): State<Direct>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let principal = match auth::admit(direct.handler.state(), &mut parts).await {
        Ok(principal) => principal,
        Err(refusal) => return refusal,
    };
    if !direct.head_passes(&parts.method, &parts.headers) {
        return to_sdk(next, parts, body, principal).await;
    }
    let Ok(bytes) = axum::body::to_bytes(body, direct.max_body).await else {
        // The declared length was within the limit, so the client stopped
        // sending: there is no one to answer.
        return StatusCode::BAD_REQUEST.into_response();
    };
    let call = call_body::read(&bytes).and_then(|call| passing_call(&parts.headers, call));
    let caller = caller_for(&principal, &parts.headers).ok();
    let (Some((id, method, arguments)), Some(caller)) = (call, caller) else {
        return to_sdk(next, parts, Body::from(bytes), principal).await;
    };
    crate::telemetry::metrics::mcp_request("direct");
    // The client going away drops this future and so the call, which cancels it
    // on the browser (docs/protocol.md, "Cancellation"); nothing else cancels it.
    let never = CancellationToken::new();
    let answer = direct
        .handler
        .catalogue_call(
            &principal,
            &caller,
            method,
            arguments.unwrap_or_default(),
            &never,
        )
        .await;
    let mut result = ServerResult::from(CallToolResponse::from(answer));
    shape_for_version(&mut result, version_header(&parts.headers));
    json_answer(&ServerJsonRpcMessage::response(result, id))
}

/// The request as it came, on to the SDK, with the caller's principal for the
/// handler (its `RequestContext` carries the request's head).
async fn to_sdk(next: Next, mut parts: Parts, body: Body, principal: Principal) -> Response {
    crate::telemetry::metrics::mcp_request("sdk");
    parts.extensions.insert(principal);
    next.run(Request::from_parts(parts, body)).await
}

/// The result in the shape of the version the request names, as the SDK's
/// handler leaves it: 2026-07-28 on with its cache hints, older versions without
/// `resultType` and without non-object structured content. (Where the request's
/// `_meta` names a version, [`call_passes`] made sure the header names the same;
/// with neither, the SDK assumes 2025-03-26.)
fn shape_for_version(result: &mut ServerResult, header: Option<&str>) {
    if header.is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str()) {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
}

/// The answer as the SDK writes it for a JSON response: 200 and the message.
fn json_answer(message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => {
            let mut response = Response::new(Body::from(Bytes::from(body)));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
            response
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The body checks the SDK makes, for a call of a catalogue tool: the version in
/// `_meta` and in the header agree (with every key 2026-07-28 requires), and from
/// 2026-07-28 on the `Mcp-Method` and `Mcp-Name` headers name this call. A call
/// that passes comes back as its id, the catalogue method and its arguments.
fn passing_call(
    headers: &HeaderMap,
    call: ToolCall,
) -> Option<(RequestId, &'static str, Option<JsonObject>)> {
    let header = version_header(headers);
    let meta = &call.meta;
    let versions_agree = match (meta.protocol_version(), header) {
        (None, None) => true,
        (None, Some(h)) => h < ProtocolVersion::V_2026_07_28.as_str(),
        (Some(m), Some(h)) => {
            m == ProtocolVersion::V_2026_07_28
                && m.as_str() == h
                && meta
                    .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty()
        }
        (Some(_), None) => false,
    };
    let named = mcp_tool(&call.name)?;
    let needs_headers = header.is_some_and(|h| h >= ProtocolVersion::STANDARD_HEADERS.as_str());
    let headers_agree = !needs_headers
        || (one_value(headers, MCP_METHOD) == Some("tools/call")
            && one_value(headers, MCP_NAME) == Some(call.name.as_str())
            && !headers
                .keys()
                .any(|k| k.as_str().starts_with(MCP_PARAM_PREFIX)));
    (versions_agree && headers_agree).then_some((call.id, named.method, call.arguments))
}

/// The only value of `name`, if it has exactly one and it is visible ASCII.
fn one_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

fn version_header(headers: &HeaderMap) -> Option<&str> {
    one_value(headers, PROTOCOL_VERSION)
}

fn known_version(version: &str) -> bool {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == version)
}

/// The name as the list keeps it (the list's names are lower-cased once; a
/// request's are compared without case).
fn normal_host(host: &str) -> String {
    unbracketed(host).to_ascii_lowercase()
}

fn unbracketed(host: &str) -> &str {
    host.trim_matches('[').trim_matches(']')
}

fn essence(media_type: &str) -> &str {
    media_type
        .split_once(';')
        .map_or(media_type, |(e, _)| e)
        .trim()
}

/// `Accept` names both JSON and an event stream, with no parameters at all (a
/// `q=0` would refuse one; the SDK weighs those).
fn accepts_json_and_events(headers: &HeaderMap) -> bool {
    let (mut json, mut events) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for item in value.split(',') {
            if item.contains([';', '"']) {
                return false;
            }
            let e = item.trim();
            json |= e.eq_ignore_ascii_case(JSON);
            events |= e.eq_ignore_ascii_case(EVENT_STREAM);
        }
    }
    json && events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        map
    }

    #[test]
    fn accept_needs_both_types_and_no_weights() {
        assert!(accepts_json_and_events(&headers(&[(
            "accept",
            "application/json, text/event-stream"
        )])));
        assert!(accepts_json_and_events(&headers(&[
            ("accept", "application/json"),
            ("accept", "Text/Event-Stream"),
        ])));
        assert!(!accepts_json_and_events(&headers(&[(
            "accept",
            "application/json"
        )])));
        for weighed in [
            "application/json, text/event-stream;q=0",
            "application/json, text/event-stream; q = 0",
        ] {
            assert!(!accepts_json_and_events(&headers(&[("accept", weighed)])));
        }
    }

    #[test]
    fn hosts_compare_as_the_sdk_compares_them() {
        let allowed = |list: &[&str], host: &str| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            host_allowed(&host_list(&list), &headers(&[("host", host)]))
        };
        assert!(allowed(&["gw.example"], "GW.example:8443"));
        assert!(allowed(&["gw.example:8443"], "gw.example:8443"));
        assert!(!allowed(&["gw.example:8443"], "gw.example:9000"));
        assert!(!allowed(&["gw.example"], "evil.example"));
        assert!(!allowed(&[], "gw.example"));
        assert!(allowed(&["::1"], "[::1]:80"));
    }
}
