//! A socket as the core sees it: a `Stream` of [`Inbound`] messages and a `Sink`
//! of [`Outbound`] ones. The device connection task and the agent socket's
//! dispatcher are generic over it, so they run the same over a WebSocket
//! (`transport::ws_socket` adapts tungstenite's), over channels in unit tests, and over a
//! link to another replica later.

use futures_util::{Sink, Stream};
use latchkey_protocol::CloseCode;

/// A text message's payload, UTF-8 checked once by the WebSocket layer and shared,
/// never copied: a result is relayed to the agent as a slice of it. It keeps the
/// WebSocket layer's own buffer type because turning that into another would
/// either copy or check the UTF-8 again (the workspace forbids `unsafe`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(tokio_tungstenite::tungstenite::Utf8Bytes);

impl Text {
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<tokio_tungstenite::tungstenite::Utf8Bytes> for Text {
    fn from(text: tokio_tungstenite::tungstenite::Utf8Bytes) -> Self {
        Self(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self(text.into())
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Self(text.into())
    }
}

/// What the peer sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    Text(Text),
    /// Ignored (docs/protocol.md, "Frames"); its bytes are not kept.
    Binary,
    /// The WebSocket layer has queued the Pong; the task flushes it.
    Ping,
    Pong,
    Close,
}

/// What the core sends to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    Text(String),
    Ping,
    Close(CloseCode),
}

impl From<String> for Outbound {
    fn from(text: String) -> Self {
        Outbound::Text(text)
    }
}

/// Why reading failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The peer broke the WebSocket protocol: close with this RFC 6455 code.
    Protocol(CloseCode),
    /// The connection is gone.
    Gone,
}

/// Writing failed: the connection is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the socket is closed")]
pub struct SendFailed;

/// Anything the connection task can run over.
pub trait Socket:
    Stream<Item = Result<Inbound, ReadError>>
    + Sink<Outbound, Error = SendFailed>
    + Unpin
    + Send
    + 'static
{
}

impl<S> Socket for S where
    S: Stream<Item = Result<Inbound, ReadError>>
        + Sink<Outbound, Error = SendFailed>
        + Unpin
        + Send
        + 'static
{
}

#[cfg(test)]
mod channel;
#[cfg(test)]
pub use channel::{ChannelPeer, channel_pair};
