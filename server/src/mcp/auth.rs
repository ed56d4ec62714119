//! Who is calling `/mcp`: the agent principal of the REST API, resolved before the
//! MCP SDK sees the request, and the RFC 9728 metadata a refused client is pointed
//! at (docs/mcp.md, "Authentication").

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{METADATA_PATH, PATH, http_base};
use crate::app::AppState;
use crate::auth::principal::{AgentPrincipal, Principal};

/// Every request to `/mcp` names its bearer token, agent or delegation, each time:
/// a token revoked mid-conversation is refused at its next request. Each request is
/// charged to the agent rate limits like a REST request. A refusal is the answer
/// as the REST API words it, a 401 pointing at the RFC 9728 metadata.
pub async fn admit(state: &AppState, parts: &mut Parts) -> Result<Principal, Response> {
    match AgentPrincipal::from_request_parts(parts, state).await {
        Ok(AgentPrincipal(principal)) => Ok(principal),
        Err(refusal) => {
            let mut response = refusal.into_response();
            if response.status() == StatusCode::UNAUTHORIZED {
                let challenge = format!(
                    "Bearer resource_metadata=\"{}\"",
                    metadata_url(&state.public_base)
                );
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
            }
            Err(response)
        }
    }
}

/// Where the metadata of `/mcp` is (RFC 9728 §3.1: the well-known prefix inserted
/// before the resource's path).
fn metadata_url(public_base: &str) -> String {
    let base = url::Url::parse(&http_base(public_base)).ok();
    match base {
        Some(url) => {
            let origin = url.origin().ascii_serialization();
            let prefix = url.path().trim_end_matches('/');
            format!("{origin}{METADATA_PATH}{prefix}{PATH}")
        }
        None => format!("{METADATA_PATH}{PATH}"),
    }
}

/// The protected-resource metadata document: what the resource is, that tokens go
/// in the `Authorization` header, and the authorization servers the operator named.
pub fn metadata(state: &AppState) -> Value {
    let mut doc = json!({
        "resource": format!("{}{PATH}", http_base(&state.public_base)),
        "resource_name": format!("{} MCP", state.config.service_name),
        "bearer_methods_supported": ["header"],
    });
    let servers = &state.config.mcp.authorization_servers;
    if !servers.is_empty() {
        doc["authorization_servers"] = json!(servers);
    }
    doc
}

/// The protected-resource metadata, at the well-known root: the MCP endpoint is
/// the only protected resource that names an authorization server.
#[utoipa::path(
    get,
    operation_id = "mcp_resource_metadata",
    path = "/.well-known/oauth-protected-resource",
    tag = "mcp",
    summary = "OAuth protected-resource metadata (RFC 9728)",
    security(()),
    responses((status = 200, description = "The metadata document.", body = Object)),
)]
pub async fn resource_metadata(State(state): State<AppState>) -> Json<Value> {
    Json(metadata(&state))
}

/// The same document at the path RFC 9728 derives from the resource `/mcp`,
/// which the 401's `WWW-Authenticate` names.
#[utoipa::path(
    get,
    operation_id = "mcp_resource_metadata_for_mcp",
    path = "/.well-known/oauth-protected-resource/mcp",
    tag = "mcp",
    summary = "OAuth protected-resource metadata for /mcp (RFC 9728)",
    security(()),
    responses((status = 200, description = "The metadata document.", body = Object)),
)]
pub async fn resource_metadata_for_mcp(state: State<AppState>) -> Json<Value> {
    resource_metadata(state).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_prefix() {
        assert_eq!(
            metadata_url("wss://gw.example/lk"),
            "https://gw.example/.well-known/oauth-protected-resource/lk/mcp"
        );
        assert_eq!(
            metadata_url("ws://127.0.0.1:4000"),
            "http://127.0.0.1:4000/.well-known/oauth-protected-resource/mcp"
        );
    }
}
