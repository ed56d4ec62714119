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

use crate::extension::{Ended, READ_DEADLINE};

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
        let read = async {
            loop {
                match self.ws.next().await {
                    None | Some(Err(_)) => return Ended::Dropped,
                    Some(Ok(Message::Close(Some(frame)))) => {
                        return Ended::Closed(frame.code.into());
                    }
                    Some(Ok(Message::Close(None))) => return Ended::Dropped,
                    Some(Ok(Message::Text(t))) => {
                        if let Ok(frame) = Frame::parse(t.as_str()) {
                            match frame {
                                Frame::Event(e) => {
                                    if let Ok(v) = serde_json::to_value(e) {
                                        self.events.push(v);
                                    }
                                }
                                other => frames.push(other),
                            }
                        }
                    }
                    Some(Ok(_)) => continue,
                }
            }
        };
        let ended = tokio::time::timeout(deadline, read)
            .await
            .context("socket still open at the deadline")?;
        Ok((ended, frames))
    }
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
