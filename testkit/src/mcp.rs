//! [`McpClient`]: the official Rust MCP SDK's client on `/mcp` of a real gateway,
//! speaking either protocol revision, with an agent's bearer token.

use std::collections::HashMap;

use anyhow::Context as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ProtocolVersion, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::Value;

pub use rmcp;

/// Which MCP revision the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// 2026-07-28: `server/discover`, every request self-contained.
    Stateless,
    /// 2025-11-25: the `initialize` handshake.
    Initialize,
}

/// The transport's settings: where, the token, and the session key if any.
fn transport_config(
    url: &str,
    token: &str,
    session_key: Option<&str>,
) -> anyhow::Result<StreamableHttpClientTransportConfig> {
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token);
    if let Some(key) = session_key {
        let mut headers = HashMap::new();
        headers.insert(
            reqwest::header::HeaderName::from_static("latchkey-session-key"),
            reqwest::header::HeaderValue::from_str(key)?,
        );
        config = config.custom_headers(headers);
    }
    Ok(config)
}

/// How the client's HTTP connections are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connections {
    /// The Rust SDK's default client: a new connection for every request.
    PerRequest,
    /// One kept open between requests, as the TypeScript and Python SDKs'
    /// clients do, and let go before the server closes it as idle
    /// ([`crate::POOL_IDLE`]).
    Kept,
}

/// A connected MCP client.
pub struct McpClient {
    service: RunningService<RoleClient, ()>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient").finish_non_exhaustive()
    }
}

impl McpClient {
    /// Connect to `url` (`http://…/mcp`) as `token`, with an optional
    /// `Latchkey-Session-Key`, opening connections as `connections` says.
    pub async fn connect(
        url: &str,
        token: &str,
        revision: Revision,
        session_key: Option<&str>,
        connections: Connections,
    ) -> anyhow::Result<McpClient> {
        let config = transport_config(url, token, session_key)?;
        let transport = match connections {
            Connections::PerRequest => StreamableHttpClientTransport::from_config(config),
            Connections::Kept => {
                let http = crate::http_builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()?;
                StreamableHttpClientTransport::with_client(http, config)
            }
        };
        Self::serve(transport, revision).await
    }

    async fn serve(
        transport: StreamableHttpClientTransport<reqwest::Client>,
        revision: Revision,
    ) -> anyhow::Result<McpClient> {
        let lifecycle = match revision {
            Revision::Stateless => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            Revision::Initialize => ClientLifecycleMode::Initialize,
        };
        let service =
            ().serve_with_lifecycle(transport, lifecycle)
                .await
                .context("MCP client did not connect")?;
        Ok(McpClient { service })
    }

    /// A client of `server`'s `/mcp` as `token`, with no session key.
    pub async fn to_server(
        server: &crate::TestServer,
        token: &str,
        revision: Revision,
    ) -> anyhow::Result<McpClient> {
        let url = format!("{}/mcp", server.http_base());
        Self::connect(&url, token, revision, None, Connections::PerRequest).await
    }

    /// The revision the two sides agreed on.
    pub fn protocol_version(&self) -> Option<String> {
        self.service
            .peer_info()
            .map(|i| i.protocol_version.to_string())
    }

    /// Every tool the server lists.
    pub async fn tools(&self) -> anyhow::Result<Vec<Tool>> {
        Ok(self.service.list_all_tools().await?)
    }

    /// The text of the resource at `uri`, from `resources/read`.
    pub async fn read_text(&self, uri: &str) -> anyhow::Result<String> {
        let read = self
            .service
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
            .await?;
        let text = read.contents.iter().find_map(|c| match c {
            rmcp::model::ResourceContents::TextResourceContents { text, .. } => Some(text.clone()),
            _ => None,
        });
        text.context("the resource has no text")
    }

    /// The URIs of the skills the server lists (`skills/list`).
    pub async fn skills(&self) -> anyhow::Result<Vec<String>> {
        let listed = self.service.list_skills(None).await?;
        Ok(listed.skills.into_iter().map(|s| s.uri).collect())
    }

    /// Call `name` with `args` (an object, or null for none).
    pub async fn call(&self, name: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        Ok(self.service.call_tool(params).await?)
    }

    /// Call `name`: its text, which must be an answer (no tool error).
    pub async fn works(&self, name: &str, args: Value) -> String {
        let answer = self.answer(name, args).await;
        assert_ne!(answer.is_error, Some(true), "{name}: {}", text(&answer));
        text(&answer)
    }

    /// Call `name`: its text, which must be a tool error.
    pub async fn fails(&self, name: &str, args: Value) -> String {
        let answer = self.answer(name, args).await;
        assert_eq!(answer.is_error, Some(true), "{name}: {}", text(&answer));
        text(&answer)
    }

    #[allow(clippy::panic, reason = "a test helper: no answer fails the test")]
    async fn answer(&self, name: &str, args: Value) -> CallToolResult {
        match self.call(name, args).await {
            Ok(answer) => answer,
            Err(e) => panic!("{name}: no answer: {e:#}"),
        }
    }

    /// End the client.
    pub async fn close(self) -> anyhow::Result<()> {
        self.service.cancel().await?;
        Ok(())
    }
}

/// The text blocks of a result, joined by newlines.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first image block's base64 data and MIME type.
pub fn image(result: &CallToolResult) -> Option<(String, String)> {
    result.content.iter().find_map(|b| match b {
        ContentBlock::Image(i) => Some((i.data.clone(), i.mime_type.clone())),
        _ => None,
    })
}
