//! A plain HTTP client of `/mcp`: a tool call as one JSON-RPC POST of revision
//! 2026-07-28 on a kept connection, its answer read as JSON, and nothing else.
//!
//! This is the MCP path as lean as the agent socket's client is (the testkit's
//! agent speaks the socket's frames directly), so that the two paths compare the
//! gateway's share of a call rather than two client libraries. The official SDK's
//! client is measured beside it, since that is what most agents run
//! (load-tests/notes.md, "MCP: the path measured with a client as lean as the
//! socket's").

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use latchkey_testkit::reqwest;
use serde_json::{Value, json};

/// The revision a stateless call names in its headers and `_meta`.
const REVISION: &str = "2026-07-28";

pub struct PlainMcp {
    http: reqwest::Client,
    url: String,
    token: String,
    session_key: String,
    next_id: AtomicU64,
}

impl PlainMcp {
    /// A client of `url` (`http://…/mcp`) as `token`, its calls made in the
    /// session `session_key` names.
    pub fn new(url: &str, token: &str, session_key: &str) -> anyhow::Result<Self> {
        Ok(Self {
            http: latchkey_testkit::http_builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
            url: url.to_string(),
            token: token.to_string(),
            session_key: session_key.to_string(),
            next_id: AtomicU64::new(1),
        })
    }

    /// Call `name` with `arguments`: `Some(text)` when the tool failed.
    pub async fn call(&self, name: &str, arguments: &Value) -> anyhow::Result<Option<String>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": REVISION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        });
        let answer = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", REVISION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .header("latchkey-session-key", &self.session_key)
            .body(serde_json::to_vec(&body)?)
            .send()
            .await?;
        let status = answer.status();
        let bytes = answer.bytes().await?;
        if !status.is_success() {
            anyhow::bail!("{status}: {}", String::from_utf8_lossy(&bytes));
        }
        let message: Value = serde_json::from_slice(&bytes).context("an answer not JSON")?;
        if message["id"] != json!(id) {
            anyhow::bail!("answer to another request: {message}");
        }
        let result = message.get("result").context("no result")?;
        Ok((result["isError"] == json!(true)).then(|| result["content"].to_string()))
    }
}
