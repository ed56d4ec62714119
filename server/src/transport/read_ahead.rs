//! Large reads while a large message streams in; no buffer at all while a
//! connection is quiet.
//!
//! tungstenite reads a socket [`super::WS_READ_CHUNK`] bytes at a time and keeps a
//! buffer of that size for the connection's life, so the chunk is a trade: small
//! saves memory on every idle device, large saves system calls on every large
//! result. Under it, [`ReadAhead`] makes the trade unnecessary: a read that fills
//! the caller's buffer to the brim says more is waiting, so the next reads go
//! through a 64 KiB block that is handed out piece by piece and freed as soon as it
//! is drained. A quiet or chatty connection (small frames) reads straight into the
//! caller's buffer, as without this layer.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::BytesMut;
use tokio::io::{AsyncRead, ReadBuf};

/// Bytes read at once while a large message streams in.
pub const READ_AHEAD_BLOCK: usize = 64 * 1024;

#[derive(Debug)]
pub struct ReadAhead<S> {
    io: S,
    /// Read ahead and not yet handed out. Empty, with no allocation, unless a large
    /// message is streaming in.
    staged: BytesMut,
    /// The last read filled what it was given: more is probably waiting.
    streaming: bool,
}

impl<S> ReadAhead<S> {
    pub fn new(io: S) -> Self {
        Self {
            io,
            staged: BytesMut::new(),
            streaming: false,
        }
    }

    #[cfg(test)]
    /// Bytes held for the caller right now (0 whenever the connection is quiet).
    pub fn staged_capacity(&self) -> usize {
        self.staged.capacity()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadAhead<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if !this.staged.is_empty() {
            super::hand_out(&mut this.staged, buf);
            return Poll::Ready(Ok(()));
        }
        if !this.streaming || buf.remaining() >= READ_AHEAD_BLOCK {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
            this.streaming = buf.filled().len() > before && buf.remaining() == 0;
            return Poll::Ready(Ok(()));
        }
        this.staged.reserve(READ_AHEAD_BLOCK);
        let read = tokio_util::io::poll_read_buf(Pin::new(&mut this.io), cx, &mut this.staged);
        match read {
            Poll::Ready(Ok(n)) if n > 0 => {
                this.streaming = n == READ_AHEAD_BLOCK;
                super::hand_out(&mut this.staged, buf);
                Poll::Ready(Ok(()))
            }
            other => {
                // Waiting, end of stream or an error: hold no block meanwhile (a
                // peer that stalls mid-message must not pin 64 KiB per socket).
                this.staged = BytesMut::new();
                this.streaming = false;
                other.map_ok(|_| ())
            }
        }
    }
}

super::writes_pass_through!(ReadAhead);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Reads `total` bytes in `chunk`-sized reads, checking that the block is
    /// released whenever nothing is staged.
    async fn read_all<S: AsyncRead + Unpin>(
        r: &mut ReadAhead<S>,
        chunk: usize,
        total: usize,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(total);
        let mut buf = vec![0u8; chunk];
        while out.len() < total {
            let n = r.read(&mut buf).await.expect("read");
            assert!(n > 0, "early end after {} bytes", out.len());
            out.extend_from_slice(&buf[..n]);
            if r.staged.is_empty() {
                assert_eq!(r.staged_capacity(), 0, "a drained block is freed");
            }
        }
        out
    }

    #[tokio::test]
    async fn a_large_message_arrives_whole_and_in_order_and_leaves_no_block() {
        let (mut client, server) = tokio::io::duplex(256 * 1024);
        let mut r = ReadAhead::new(server);
        let message: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = message.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.expect("write");
            client
        });
        let got = read_all(&mut r, 1024, message.len()).await;
        assert_eq!(got, message);
        let _client = writer.await.expect("writer");
        assert_eq!(r.staged_capacity(), 0);
    }

    #[tokio::test]
    async fn small_frames_are_read_straight_through() {
        let (mut client, server) = tokio::io::duplex(4096);
        let mut r = ReadAhead::new(server);
        for i in 0..100u8 {
            client.write_all(&[i; 200]).await.expect("write");
            let mut buf = [0u8; 1024];
            let n = r.read(&mut buf).await.expect("read");
            assert_eq!(&buf[..n], &[i; 200][..]);
            assert_eq!(r.staged_capacity(), 0, "no block for a small frame");
            assert!(!r.streaming);
        }
    }

    #[tokio::test]
    async fn a_stall_mid_message_holds_no_block_and_eof_ends_cleanly() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let mut r = ReadAhead::new(server);
        client.write_all(&[7u8; 3000]).await.expect("write");
        let mut buf = [0u8; 1024];
        // Fills the caller's buffer: streaming, the next read goes through a block.
        assert_eq!(r.read(&mut buf).await.expect("read"), 1024);
        assert_eq!(r.read(&mut buf).await.expect("read"), 1024);
        assert_eq!(r.read(&mut buf).await.expect("read"), 952);
        assert_eq!(r.staged_capacity(), 0);
        // Nothing more yet: the read waits, holding nothing.
        let waiting = futures_util::FutureExt::now_or_never(r.read(&mut buf));
        assert!(waiting.is_none(), "no data: the read waits");
        assert_eq!(r.staged_capacity(), 0, "no block held while waiting");
        drop(client);
        assert_eq!(r.read(&mut buf).await.expect("eof"), 0);
    }
}
