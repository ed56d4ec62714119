//! [`AgentSocket`]: the agent WebSocket `/v1/agent` from the agent's side, over a
//! real socket: requests out, answers and session events in, and how it ended.

use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::Frame;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::extension::{Ended, READ_DEADLINE, read_to_end};

/// An open agent socket.
#[derive(Debug)]
pub struct AgentSocket {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Event frames read while waiting for answers, in order.
    pub events: Vec<Value>,
}

impl AgentSocket {
    /// Open `/v1/agent` on `server` with `token`; the HTTP refusal if any.
    pub async fn open(server: &crate::TestServer, token: &str) -> anyhow::Result<AgentSocket> {
        Self::connect(&server.http_base(), token, server.client_tls()).await
    }

    /// Open `/v1/agent` under `http_base` (`http://host:port`) with `token`.
    pub async fn connect(
        http_base: &str,
        token: &str,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> anyhow::Result<AgentSocket> {
        // http://… → ws://…, https://… → wss://…
        let url = format!("{}/v1/agent", http_base.replacen("http", "ws", 1));
        let mut request = url.into_client_request()?;
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
        let connector = tls.map(tokio_tungstenite::Connector::Rustls);
        let (ws, _) =
            tokio_tungstenite::connect_async_tls_with_config(request, None, true, connector)
                .await
                .map_err(|e| match e {
                    tungstenite::Error::Http(r) => anyhow::anyhow!("HTTP {}", r.status()),
                    other => other.into(),
                })?;
        Ok(AgentSocket {
            ws,
            events: Vec::new(),
        })
    }

    /// Send one request frame.
    pub async fn request(&mut self, id: &str, method: &str, params: Value) -> anyhow::Result<()> {
        let frame = serde_json::json!({ "id": id, "method": method, "params": params });
        self.ws.send(Message::text(frame.to_string())).await?;
        Ok(())
    }

    /// The next answer (events met on the way are kept in [`Self::events`]).
    pub async fn answer(&mut self) -> anyhow::Result<Frame> {
        loop {
            let msg = tokio::time::timeout(READ_DEADLINE, self.ws.next())
                .await
                .context("no answer within the read deadline")?
                .context("socket ended")??;
            match msg {
                Message::Text(t) => match Frame::parse(t.as_str())? {
                    Frame::Event(e) => self.events.push(serde_json::to_value(e)?),
                    frame => return Ok(frame),
                },
                Message::Close(c) => bail!("socket closed: {c:?}"),
                _ => continue,
            }
        }
    }

    /// A request and its answer.
    pub async fn call(&mut self, id: &str, method: &str, params: Value) -> anyhow::Result<Frame> {
        self.request(id, method, params).await?;
        self.answer().await
    }

    /// Read until the socket ends, collecting answers and events on the way; how it
    /// ended (within `deadline`).
    pub async fn ended(&mut self, deadline: Duration) -> anyhow::Result<(Ended, Vec<Frame>)> {
        let mut frames = Vec::new();
        let events = &mut self.events;
        let ended = read_to_end(&mut self.ws, deadline, |text| match Frame::parse(text) {
            Ok(Frame::Event(e)) => events.extend(serde_json::to_value(e).ok()),
            Ok(frame) => frames.push(frame),
            Err(_) => {}
        })
        .await?;
        Ok((ended, frames))
    }

    /// Start a session on this socket (request `id`); its id.
    pub async fn start_session(&mut self, id: &str) -> anyhow::Result<String> {
        let started = self
            .call(id, "session.start", serde_json::json!({}))
            .await?;
        result_of(&started)["id"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no session: {started:?}"))
    }
}

/// A browser whose `tool.hang` never answers, and a socket on `token` with a session
/// (its id returned) and a `tool.hang` (request `h`) in flight on it, seen by the
/// browser.
pub async fn call_in_flight(
    server: &crate::TestServer,
    token: &str,
) -> anyhow::Result<(crate::FakeBrowser, AgentSocket, String)> {
    let (_device, browser) = server
        .new_browser(crate::browser::never_answers("tool.hang"))
        .await?;
    let mut socket = AgentSocket::open(server, token).await?;
    let session = socket.start_session("s").await?;
    socket
        .request(
            "h",
            "tool.hang",
            serde_json::json!({ "session_id": session }),
        )
        .await?;
    let seen = crate::wait_until(READ_DEADLINE, || async { browser.count("tool.hang") == 1 }).await;
    anyhow::ensure!(seen, "the browser never received the call");
    Ok((browser, socket, session))
}

/// The error code of an answer frame (`""` for a success).
pub fn code_of(frame: &Frame) -> String {
    match frame {
        Frame::Error(e) => e.error.code.to_string(),
        _ => String::new(),
    }
}

/// The result of an answer frame (`Null` for an error).
pub fn result_of(frame: &Frame) -> Value {
    match frame {
        Frame::Success(s) => s.result.clone(),
        _ => Value::Null,
    }
}
