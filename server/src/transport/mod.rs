//! TCP, TLS and HTTP/1.1 serving. One accept loop per listener; each connection is a
//! task on the server's tracker, with the TLS handshake and header read bounded.

pub mod listener;
pub mod setup;
pub mod tls;

/// Bytes tungstenite reads from a socket at a time. Its default (128 KiB) is
/// zero-filled on every read and stays resident per connection: about 140 KiB per
/// idle device and, under load, the largest single CPU cost of a relayed call
/// (measured in docs/benchmarks.md). Large frames still arrive whole: the buffer
/// grows to the frame's length, read in chunks of this size.
pub const WS_READ_CHUNK: usize = 4 * 1024;

/// The WebSocket settings every upgrade on this server uses: our size limits and
/// small read chunks. Writes are flushed per message, so no write buffer builds up.
pub fn websocket_settings<F>(
    ws: axum::extract::ws::WebSocketUpgrade<F>,
    limits: &crate::config::Limits,
) -> axum::extract::ws::WebSocketUpgrade<F> {
    ws.read_buffer_size(WS_READ_CHUNK)
        .max_message_size(limits.max_message_bytes)
        .max_frame_size(limits.max_message_bytes)
}
