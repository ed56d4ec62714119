//! The remote MCP endpoint (docs/mcp.md): `/mcp` on the main listener, Streamable
//! HTTP through the official SDK (`rmcp`), served statelessly so any node can answer
//! any request. It is one more surface over the core: the caller is an agent
//! principal exactly as on the REST API (same tokens, tenant scoping, rate limits,
//! session caps and policy checks), its tools are the catalogue's methods under the
//! names agents know from playwright-mcp, and every call goes through the same call
//! pipeline and audit trail.

mod answers;
mod auth;
pub mod call_body;
mod choices;
mod direct;
mod fill_form;
mod handler;
mod keeper;
mod listing;
mod skill;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;

pub use keeper::keeper as choices_keeper;

/// The path the endpoint is served at.
pub const PATH: &str = "/mcp";
/// Where OAuth-capable clients look for the endpoint's RFC 9728 metadata.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// A client may keep agents sharing one token apart by sending this header with a
/// name of its own: each name gets its own session (docs/mcp.md, "Sessions").
pub const SESSION_KEY_HEADER: &str = "latchkey-session-key";

/// The `[mcp]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Serve `/mcp` (on by default).
    pub enabled: bool,
    /// `Host` values accepted besides the public URL's (a second DNS name).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the public URL's (`https://app.example`);
    /// a request with any other `Origin` is refused, one without passes.
    pub allowed_origins: Vec<String>,
    /// Authorization servers named in the protected-resource metadata, for
    /// OAuth-capable clients (empty: none is named; tokens are issued by latchkey).
    pub authorization_servers: Vec<String>,
    /// The largest request body accepted.
    pub max_request_bytes: usize,
    /// The largest screenshot returned as an image (decoded bytes); a larger one
    /// is a tool error that says how to take a smaller one.
    pub max_image_bytes: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            authorization_servers: Vec::new(),
            max_request_bytes: 1024 * 1024,
            max_image_bytes: 8 * 1024 * 1024,
        }
    }
}

impl McpConfig {
    /// Each broken rule, worded for the operator.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !(1024..=64 * 1024 * 1024).contains(&self.max_request_bytes) {
            out.push("mcp.max_request_bytes must be 1024..=67108864".into());
        }
        if !(64 * 1024..=64 * 1024 * 1024).contains(&self.max_image_bytes) {
            out.push("mcp.max_image_bytes must be 65536..=67108864".into());
        }
        for origin in &self.allowed_origins {
            match url::Url::parse(origin) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.path() == "/" => {}
                _ => out.push(format!(
                    "mcp.allowed_origins entry {origin:?} is not an origin (https://host[:port])"
                )),
            }
        }
        for host in &self.allowed_hosts {
            if host.is_empty() || host.contains(['/', ' ', '@']) {
                out.push(format!(
                    "mcp.allowed_hosts entry {host:?} is not a host or host:port"
                ));
            }
        }
        for server in &self.authorization_servers {
            if !url::Url::parse(server).is_ok_and(|u| u.scheme() == "https") {
                out.push(format!(
                    "mcp.authorization_servers entry {server:?} is not an https:// URL"
                ));
            }
        }
        out
    }
}

/// The public base as the HTTP clients see it: `https://host[:port][/prefix]` for a
/// `wss://` base, `http://…` for `ws://`.
pub fn http_base(public_base: &str) -> String {
    if let Some(rest) = public_base.strip_prefix("wss://") {
        format!("https://{rest}")
    } else if let Some(rest) = public_base.strip_prefix("ws://") {
        format!("http://{rest}")
    } else {
        public_base.to_string()
    }
}

/// The `Host` values and origins the public URL stands for, with the operator's
/// additions.
fn hosts_and_origins(state: &AppState) -> (Vec<String>, Vec<String>) {
    let config = &state.config.mcp;
    let mut hosts = config.allowed_hosts.clone();
    let mut origins = config.allowed_origins.clone();
    if let Ok(url) = url::Url::parse(&http_base(&state.public_base))
        && let Some(host) = url.host_str()
    {
        // The name alone, any port: what DNS rebinding changes is the name, and
        // a proxy's `Host $host` drops a non-default port. `url` writes IPv6
        // hosts bracketed, as `Host` carries them.
        hosts.push(host.to_string());
        origins.push(url.origin().ascii_serialization());
    }
    (hosts, origins)
}

/// The RFC 9728 metadata documents (docs/mcp.md, "Authorization").
pub(crate) fn metadata_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(auth::resource_metadata))
        .routes(routes!(auth::resource_metadata_for_mcp))
}

/// `/mcp`, or nothing when the operator turned MCP off. Documented by hand in
/// [`crate::openapi`]: rmcp's service, not an axum handler, answers it.
pub fn service(state: &AppState) -> Router<AppState> {
    if !state.config.mcp.enabled {
        return Router::new();
    }
    let (hosts, origins) = hosts_and_origins(state);
    let config = StreamableHttpServerConfig::default()
        // Stateless for every revision: nothing about a client lives in one
        // node's memory between requests (docs/mcp.md, "Protocol revisions").
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(state.config.mcp.max_request_bytes)
        .with_cancellation_token(state.shutdown.child_token());
    let handler = handler::LatchkeyMcp::new(state.clone());
    let direct = direct::Direct::new(handler.clone(), &hosts, state.config.mcp.max_request_bytes);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    #[expect(
        clippy::disallowed_methods,
        reason = "rmcp's service; its operation is declared in openapi/mod.rs"
    )]
    let mounted = Router::new().route_service(PATH, Shared(Arc::new(service)));
    // Authentication first, then a tool call answered directly or the request
    // handed to the SDK (docs/mcp.md, "How a call is served").
    mounted.route_layer(middleware::from_fn_with_state(direct, direct::answer))
}

/// The SDK's service behind one `Arc`. axum's middleware clones the service it
/// wraps on every request, and the SDK's carries its whole configuration (the
/// allowed hosts and origins as strings): cloned and dropped twice a call, even
/// for a call the SDK never sees. Here a request clones it only when it reaches
/// the SDK, as the SDK itself does for each request it serves.
struct Shared<S>(Arc<S>);

impl<S> Clone for Shared<S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<S, B> tower::Service<axum::http::Request<B>> for Shared<S>
where
    S: tower::Service<axum::http::Request<B>, Error = std::convert::Infallible> + Clone,
{
    type Response = S::Response;
    type Error = std::convert::Infallible;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // The SDK's service is always ready (it takes every request in a
        // task of its own), so a fresh clone of it is too.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        S::clone(&self.0).call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_base_follows_the_socket_scheme() {
        assert_eq!(http_base("wss://gw.example/lk"), "https://gw.example/lk");
        assert_eq!(http_base("ws://127.0.0.1:9"), "http://127.0.0.1:9");
    }

    #[test]
    fn config_mistakes_are_named() {
        let bad = McpConfig {
            max_request_bytes: 10,
            allowed_origins: vec!["app.example".into(), "https://ok.example".into()],
            allowed_hosts: vec!["a/b".into()],
            authorization_servers: vec!["http://as.example".into()],
            ..McpConfig::default()
        };
        let problems = bad.problems();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[1].contains("app.example"));
        assert!(McpConfig::default().problems().is_empty());
    }
}
