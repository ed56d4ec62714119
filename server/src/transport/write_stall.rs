//! Every connection's writes are bounded in time, whoever writes: our own sockets,
//! hyper's responses and server-sent events, and what the WebSocket layer writes by
//! itself (Pongs, Close replies).
//!
//! A peer that stops reading makes every write to it wait for room in its socket.
//! Our own frame writes carry their own stall bound, but the WebSocket layer answers
//! a peer's Pings on its own, and hyper streams a response for as long as it takes:
//! neither has a deadline. [`WriteStall`] gives one to all of them at the byte level.
//! When the socket refuses bytes, a timer starts; when a write is tried again after
//! `stall` and the socket still refuses, the write fails (`TimedOut`), which ends the
//! connection. Any accepted byte stops the timer. A socket that became writable
//! again meanwhile is not punished: the failure needs a write refused *now*.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

#[derive(Debug)]
pub struct WriteStall<S> {
    io: S,
    stall: Duration,
    /// Running while the socket refuses bytes. Dropped as soon as a byte gets
    /// through, so that it never wakes the connection's task for nothing.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteStall<S> {
    pub fn new(io: S, stall: Duration) -> Self {
        Self {
            io,
            stall,
            timer: None,
        }
    }

    /// The inner write made progress (or failed for its own reasons): no stall.
    fn progressed<T>(&mut self, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        self.timer = None;
        polled
    }

    /// The inner write was refused: start the clock, or fail if it ran out.
    fn refused<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let stall = self.stall;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                crate::telemetry::metrics::refused("write_stalled");
                Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "peer not reading: write stalled",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, data) {
            Poll::Pending => self.refused(cx),
            done => self.progressed(done),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.refused(cx),
            done => self.progressed(done),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Pending => self.refused(cx),
            done => self.progressed(done),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.io).poll_shutdown(cx) {
            Poll::Pending => self.refused(cx),
            done => self.progressed(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A peer that reads nothing: the writer fails once the stall bound has passed
    /// with the socket still full, and not before.
    #[tokio::test(start_paused = true)]
    async fn a_write_refused_past_the_bound_fails() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut w = WriteStall::new(ours, Duration::from_secs(10));
        w.write_all(&[0u8; 64]).await.expect("fits the buffer");
        let started = Instant::now();
        let err = w
            .write_all(&[0u8; 1])
            .await
            .expect_err("the peer never reads");
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(10));
        // Reading frees room: writes go through again, with a fresh clock.
        let mut sink = [0u8; 64];
        tokio::io::AsyncReadExt::read_exact(&mut theirs, &mut sink)
            .await
            .expect("read");
        w.write_all(&[1u8; 8]).await.expect("room again");
    }

    /// A slow peer that keeps reading is never cut off, however long the whole
    /// transfer takes.
    #[tokio::test(start_paused = true)]
    async fn a_peer_that_keeps_reading_is_never_cut() {
        let (ours, mut theirs) = tokio::io::duplex(16);
        let mut w = WriteStall::new(ours, Duration::from_secs(10));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 16];
            while got < 1024 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                got += tokio::io::AsyncReadExt::read(&mut theirs, &mut buf)
                    .await
                    .expect("read");
            }
        });
        w.write_all(&[0u8; 1024])
            .await
            .expect("every byte in the end");
        reader.await.expect("reader");
    }
}
