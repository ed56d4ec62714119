//! A plain HTTP client of `/mcp`: a tool call as one JSON-RPC POST of revision
//! 2026-07-28 on a kept connection, its answer read as JSON, and nothing else.
//!
//! This is the MCP path as lean as the agent socket's client is (the testkit's
//! agent speaks the socket's frames directly), so that the two paths compare the
//! gateway's share of a call rather than two client libraries. It speaks through
//! hyper's own HTTP/1 connection, driven in the caller's task: no pool to check a
//! connection out of, and no connection task to hand the request to and the answer
//! back from. The official SDK's client is measured beside it, since that is what
//! most agents run (load-tests/notes.md, "MCP: the path measured with a client as
//! lean as the socket's").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

/// The revision a stateless call names in its headers and `_meta`.
const REVISION: &str = "2026-07-28";

type Connection = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// One kept connection: the handle requests go through, and the connection itself,
/// polled only while a call of this client is under way.
struct Kept {
    sender: http1::SendRequest<Full<Bytes>>,
    connection: Connection,
    /// When its last answer came: a connection idle for longer than the testkit's
    /// pools keep one is let go, long before latchkeyd closes it, so a call never
    /// meets a close on its way.
    last_used: Instant,
}

pub struct PlainMcp {
    /// `host:port`, dialled and named in `Host`.
    authority: String,
    path: String,
    authorization: String,
    session_key: String,
    next_id: AtomicU64,
    /// The kept connection; the lock is only ever taken by this client's caller.
    kept: tokio::sync::Mutex<Option<Kept>>,
}

impl PlainMcp {
    /// A client of `url` (`http://…/mcp`) as `token`, its calls made in the
    /// session `session_key` names.
    pub fn new(url: &str, token: &str, session_key: &str) -> anyhow::Result<Self> {
        let uri: hyper::Uri = url.parse().context("the MCP URL")?;
        anyhow::ensure!(
            uri.scheme_str() == Some("http"),
            "the plain client speaks http:// only"
        );
        Ok(Self {
            authority: uri
                .authority()
                .context("the MCP URL has no host")?
                .to_string(),
            path: uri.path().to_string(),
            authorization: format!("Bearer {token}"),
            session_key: session_key.to_string(),
            next_id: AtomicU64::new(1),
            kept: tokio::sync::Mutex::new(None),
        })
    }

    /// Call `name` with `arguments`: `Some(text)` when the tool failed.
    pub async fn call(&self, name: &str, arguments: &Value) -> anyhow::Result<Option<String>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = Bytes::from(serde_json::to_vec(&json!({
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
        }))?);
        let request = hyper::Request::post(&self.path)
            .header("host", &self.authority)
            .header("authorization", &self.authorization)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", REVISION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .header("latchkey-session-key", &self.session_key)
            .body(Full::new(body))?;

        let mut kept = self.kept.lock().await;
        let conn = match kept.take() {
            Some(mut conn) => {
                if still_open(&mut conn) {
                    conn
                } else {
                    self.connect().await?
                }
            }
            None => self.connect().await?,
        };
        let Kept {
            mut sender,
            mut connection,
            ..
        } = conn;
        let exchange = async {
            sender.ready().await?;
            let answer = sender.send_request(request).await?;
            let status = answer.status();
            let bytes = answer.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        };
        // The answer comes while the connection is polled beside it; a connection
        // that ends first ends the call.
        let (status, bytes) = tokio::select! {
            biased;
            r = exchange => r?,
            end = &mut connection => {
                end?;
                anyhow::bail!("the server closed the connection before answering");
            }
        };
        *kept = Some(Kept {
            sender,
            connection,
            last_used: Instant::now(),
        });
        drop(kept);

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

    async fn connect(&self) -> anyhow::Result<Kept> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connecting to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
        Ok(Kept {
            sender,
            connection,
            last_used: Instant::now(),
        })
    }
}

/// Whether a kept connection can take another request: used within the testkit's
/// idle limit ([`latchkey_testkit::POOL_IDLE`]; latchkeyd closes one left idle past
/// its setup timeout), and not closed, which the connection, unpolled since the
/// last answer, only learns when polled.
fn still_open(kept: &mut Kept) -> bool {
    use futures_util::FutureExt as _;
    kept.last_used.elapsed() < latchkey_testkit::POOL_IDLE
        && (&mut kept.connection).now_or_never().is_none()
        && !kept.sender.is_closed()
}
