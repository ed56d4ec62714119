//! WebSocket by hand, byte for byte: an upgrade written on a plain TCP stream and
//! client frames built one by one, for tests whose peer must do what no WebSocket
//! library would (malformed frames, pings it never reads the answer to).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The mask every frame from here carries (any mask is as good for a test).
pub const MASK: [u8; 4] = [0x11, 0x22, 0x33, 0x44];

/// A client frame: the FIN/RSV/opcode byte, then the length, the mask and the
/// masked payload.
pub fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    out
}

/// A final text frame.
pub fn text(payload: &str) -> Vec<u8> {
    frame(0x81, payload.as_bytes())
}

/// A Ping with `payload` (at most 125 bytes).
pub fn ping(payload: &[u8]) -> Vec<u8> {
    frame(0x89, payload)
}

/// Upgrade `path` on `addr` (`host:port`) with these extra header lines, and return
/// the stream after the 101 (fails on any other answer).
pub async fn upgrade(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await?;
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    anyhow::ensure!(head.starts_with("HTTP/1.1 101"), "not upgraded: {head}");
    Ok(stream)
}
