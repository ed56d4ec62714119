//! The OpenAPI 3.1 document of every HTTP route on the main listener (docs/api.md),
//! generated from the handlers: each route is registered through
//! [`utoipa_axum::routes!`], which reads the handler's `#[utoipa::path]`, so a
//! route and its documentation are one declaration and cannot drift apart. The
//! two routes that are not axum handlers (`/mcp`, an rmcp service, and
//! `/openapi.json` itself, which serves the finished document) are declared here.
//! Refusals come from the protocol's code table ([`refusals`]).
//!
//! Plain `Router::route` is refused by clippy (`clippy.toml`, `disallowed-methods`)
//! everywhere but at those two declared routes, so an undocumented route does not
//! build.

pub(crate) mod refusals;

use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::app::AppState;

/// Where the document is served.
pub const PATH: &str = "/openapi.json";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Latchkey",
        description = "The Latchkey gateway's HTTP API: agents find browsers, open sessions and call tools; admins manage devices, pairing links, tokens, members, policies, the audit trail and webhooks; members manage their own browsers. Errors are `{\"error\": {code, message, data?}}` with the codes of docs/error-codes.md.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(openapi_document),
    components(schemas(
        latchkey_protocol::error_code::ApiErrorBody,
        latchkey_protocol::ErrorBody,
        latchkey_protocol::ErrorCode,
    )),
    security(("bearer" = [])),
    modifiers(&BearerToken),
    tags(
        (name = "browsers", description = "The team's browsers, as agents see them."),
        (name = "sessions", description = "Sessions on a browser, tool calls and session events (docs/agents.md)."),
        (name = "delegations", description = "Narrower, shorter-lived tokens minted from an agent's own (docs/delegation.md)."),
        (name = "devices", description = "Paired browsers, their owners and expiry; revocation (docs/pairing-and-grants.md)."),
        (name = "pairings", description = "One-time pairing links (docs/pairing-and-grants.md)."),
        (name = "tokens", description = "API tokens."),
        (name = "members", description = "The team's people (docs/people.md)."),
        (name = "policy", description = "What agents may do, per team and per browser (docs/policy.md)."),
        (name = "audit", description = "The hash-chained audit trail (docs/operations.md)."),
        (name = "webhooks", description = "Signed event deliveries (docs/webhooks.md)."),
        (name = "me", description = "A member's own browsers (docs/people.md)."),
        (name = "extension", description = "The extension-facing endpoints of docs/protocol.md; browsers, not agents, call them."),
        (name = "mcp", description = "The remote MCP endpoint (docs/mcp.md)."),
        (name = "operations", description = "Health, readiness and this document."),
    ),
)]
struct ApiDoc;

/// Every authenticated operation takes `Authorization: Bearer <token>`: an API
/// token or a delegation token.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token (`lk_…`), or a delegation token (a JWT) where the agent API accepts one.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document itself. It needs no token: it says what exists, never what
/// any team holds.
#[utoipa::path(
    get,
    operation_id = "openapi_document",
    path = "/openapi.json",
    tag = "operations",
    security(()),
    responses((status = 200, description = "This document, OpenAPI 3.1.", content_type = "application/json")),
)]
#[allow(dead_code)] // Documentation only: the route is served by `serve`.
fn openapi_document() {}

/// `POST /mcp`: documented here because rmcp's service, not an axum handler,
/// answers it.
#[utoipa::path(
    post,
    operation_id = "mcp",
    path = "/mcp",
    tag = "mcp",
    description = "MCP over Streamable HTTP, stateless, revisions 2026-07-28 and 2025-11-25: JSON-RPC requests in, JSON answers out. `GET` answers 405 (no server-initiated stream). A 401 names the RFC 9728 metadata in `WWW-Authenticate`; a `Host` or `Origin` the gateway does not serve is refused 403.",
    request_body(content = serde_json::Value, description = "A JSON-RPC 2.0 request or notification.", content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC answer.", content_type = "application/json"),
        (status = 202, description = "A notification accepted."),
        (status = 406, description = "`Accept` names neither `application/json` nor `text/event-stream`."),
        (status = 413, description = "A body over `[mcp] max_request_bytes`."),
        (status = 415, description = "Not `application/json`, or not a JSON-RPC message."),
        refusals::AgentRead,
    ),
)]
#[allow(dead_code)] // Documentation only: rmcp's service answers this route.
fn mcp_endpoint() {}

/// The document for these routes, with `/mcp` when it is served.
pub(crate) fn finish(mut doc: utoipa::openapi::OpenApi, mcp: bool) -> utoipa::openapi::OpenApi {
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    if mcp {
        #[derive(OpenApi)]
        #[openapi(paths(mcp_endpoint))]
        struct McpDoc;
        doc.merge(McpDoc::openapi());
    }
    doc
}

/// The documented routes, built without state: [`crate::app::router`] serves them
/// and `latchkeyd openapi` prints their document. `mcp`: whether the MCP
/// endpoint's metadata is served.
pub(crate) fn routes(mcp: bool) -> OpenApiRouter<AppState> {
    let routes = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(crate::extension::routes())
        .merge(crate::admin::routes())
        .merge(crate::agent::routes())
        .merge(crate::delegation::routes())
        .merge(crate::app::operations_routes());
    if mcp {
        routes.merge(crate::mcp::metadata_routes())
    } else {
        routes
    }
}

/// The document as `latchkeyd openapi` prints it: MCP on, as the default
/// configuration serves it.
pub fn document() -> utoipa::openapi::OpenApi {
    finish(routes(true).into_openapi(), true)
}

/// The finished document, rendered once, served on every `GET /openapi.json`.
#[derive(Clone)]
pub(crate) struct Rendered(Arc<[u8]>);

impl Rendered {
    pub(crate) fn new(doc: &utoipa::openapi::OpenApi) -> Self {
        let json = serde_json::to_vec_pretty(doc).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the OpenAPI document did not serialise");
            b"{}".to_vec()
        });
        Self(json.into())
    }

    pub(crate) fn response(&self) -> Response {
        (
            [(CONTENT_TYPE, "application/json")],
            axum::body::Bytes::from_owner(self.0.clone()),
        )
            .into_response()
    }
}
