//! TCP, TLS and HTTP/1.1 serving. One accept loop per listener; each connection is a
//! task on the server's tracker, with the TLS handshake and header read bounded.

/// `AsyncWrite` for a read-side wrapper `$t<S>` whose stream is its field `io`:
/// every write goes straight through.
macro_rules! writes_pass_through {
    ($t:ident) => {
        impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $t<S> {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                data: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.io).poll_write(cx, data)
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.io).poll_flush(cx)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.io.is_write_vectored()
            }
        }
    };
}
use writes_pass_through;

/// Hand out bytes `held` back from an earlier read, as many as `buf` has room for;
/// free `held`'s allocation once it is drained, so a quiet connection keeps none.
pub(crate) fn hand_out(held: &mut bytes::BytesMut, buf: &mut tokio::io::ReadBuf<'_>) {
    use bytes::Buf;
    let n = buf.remaining().min(held.len());
    buf.put_slice(&held[..n]);
    held.advance(n);
    if held.is_empty() {
        *held = bytes::BytesMut::new();
    }
}

pub(crate) mod admission;
pub(crate) mod listener;
mod peer_clock;
pub(crate) mod read_ahead;
pub(crate) mod setup;
pub mod tls;
pub(crate) mod tls_stream;
pub(crate) mod write_stall;
pub(crate) mod ws_socket;
pub mod ws_upgrade;

/// Bytes tungstenite reads from a socket at a time, and the buffer it keeps per
/// socket. Its default (128 KiB) is zero-filled on every read and stays resident:
/// about 140 KiB per idle device. 1 KiB holds the frames of a quiet or chatty
/// device (heartbeats, calls, small answers); large frames still arrive whole, and
/// [`read_ahead::ReadAhead`] under tungstenite turns their many small reads
/// into 64 KiB reads of the socket (measured in docs/benchmarks.md).
pub const WS_READ_CHUNK: usize = 1024;

/// Room in a socket's write buffer beyond its largest message: the frame header
/// and a few control frames.
pub const WS_WRITE_SLACK: usize = 64 * 1024;

/// The WebSocket settings of every socket on this server: our size limits and
/// small read chunks. Writes are flushed per message, so no write buffer builds up
/// from our own frames; the buffer is still capped at the largest message plus
/// [`WS_WRITE_SLACK`] (the WebSocket layer's default is unbounded), so that what it
/// queues by itself for a peer that does not read (a Pong per Ping) is bounded
/// too: beyond the cap it drops Pongs instead of queueing them.
pub fn websocket_config(
    limits: &crate::config::Limits,
) -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(WS_READ_CHUNK)
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes))
        .max_write_buffer_size(limits.max_message_bytes.saturating_add(WS_WRITE_SLACK))
}

/// Write `frames` as text messages with one flush after the last, counting each for
/// `peer` ("device" or "agent"): frames that are ready together leave in one write.
pub async fn write_text_frames<S, M>(
    sink: &mut S,
    frames: impl IntoIterator<Item = String>,
    peer: &'static str,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<M> + Unpin,
    M: From<String>,
{
    use futures_util::SinkExt;
    for text in frames {
        crate::telemetry::metrics::frame("out", peer, text.len());
        sink.feed(M::from(text)).await?;
    }
    sink.flush().await
}

/// The close code RFC 6455 asks for when reading a WebSocket failed because the
/// peer broke the protocol (1002), sent a text message that is not UTF-8 (1007) or a
/// message over the size cap (1009). `None` when the peer just went away.
pub fn close_for_read_error(
    error: &tokio_tungstenite::tungstenite::Error,
) -> Option<latchkey_protocol::CloseCode> {
    use latchkey_protocol::CloseCode;
    use tokio_tungstenite::tungstenite::Error;
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    match error {
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        Error::Protocol(_) => Some(CloseCode::ProtocolError),
        Error::Utf8(_) => Some(CloseCode::InvalidPayload),
        Error::Capacity(_) => Some(CloseCode::MessageTooBig),
        _ => None,
    }
}

/// After the peer's Close: read on (for at most a second) so the WebSocket layer
/// writes the Close reply it queued and sees the peer's TCP close. Dropping the
/// socket at once would leave the peer with an unclean close (1006 in a browser).
pub async fn finish_peer_close<S>(socket: &mut S)
where
    S: futures_util::Stream + Unpin,
{
    use futures_util::StreamExt;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while socket.next().await.is_some() {}
    })
    .await;
}
