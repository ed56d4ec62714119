//! Server-side TLS on rustls's unbuffered API: a quiet connection holds no buffer.
//!
//! rustls's buffered connection (what tokio-rustls wraps) reads into a record buffer
//! it sizes to 4 KiB before every read and keeps for the connection's life, so every
//! idle device held 4 KiB of TLS buffer doing nothing (docs/benchmarks.md, idle
//! devices). Here the connection's bytes live in buffers of our own, each allocated
//! only while it holds something:
//!
//! - `incoming`: TLS bytes read and not yet processed (a partial record at most once
//!   a read is done). Released whenever it is empty.
//! - `outgoing`: records encrypted and not yet written. Released once written.
//! - `plain`: decrypted bytes the caller had no room for. Released once handed out.
//!
//! Writes encrypt straight into `outgoing` (no per-record allocation, as rustls's
//! buffered writer makes), and a vectored write of small pieces (hyper's head and
//! body) becomes one record instead of one per piece.
//!
//! Records rustls produces while reading (a KeyUpdate's answer, an alert) join
//! `outgoing` behind anything already there and leave with the next write or flush,
//! or at once when the read has to wait: every socket here is read and written by
//! one task, so trying the write from the read side takes no one's wake-up.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read from the socket at a time: one whole record at the largest size.
const READ_CHUNK: usize = 16 * 1024 + 512;

/// Unprocessed input beyond which the peer is refused: a handshake message may
/// span records up to 64 KiB (rustls's own cap), plus one record in flight.
const MAX_INCOMING: usize = 64 * 1024 + 2 * READ_CHUNK;

/// Plaintext taken by one write: four records. Bounds `outgoing` while a peer reads
/// slowly.
const MAX_WRITE: usize = 64 * 1024;

/// Pieces of a vectored write up to this size in all are gathered into one record.
const GATHER: usize = 16 * 1024;

/// A server-side TLS connection over `S`, after its handshake ([`accept`]).
pub struct TlsStream<S> {
    io: S,
    conn: UnbufferedServerConnection,
    /// TLS bytes read and not yet processed; no allocation while empty.
    incoming: BytesMut,
    /// Records to write, from `sent` on; no allocation once written.
    outgoing: Vec<u8>,
    sent: usize,
    /// Decrypted bytes not yet handed to the caller; no allocation while empty.
    plain: BytesMut,
    /// The peer's close_notify is processed: reads answer end of stream.
    read_closed: bool,
    /// Our close_notify is queued: no more writes.
    write_closed: bool,
}

/// What to do at the first chance to write.
#[derive(Clone, Copy)]
enum Write<'a> {
    /// Nothing: process what has arrived, then wait for input.
    Nothing,
    /// Encrypt this plaintext.
    Data(&'a [u8]),
    /// Queue our close_notify.
    CloseNotify,
}

/// Where processing the available records stopped.
enum Pumped {
    /// Every complete record is processed; more input is needed. `read` says
    /// whether plaintext was handed out on the way.
    NeedInput { read: bool },
    /// This many bytes of the write's plaintext were encrypted into `outgoing`.
    Wrote(usize),
    /// Both sides have sent close_notify.
    Closed,
}

/// Run the TLS handshake on `io` under `config`. A peer that ends its connection
/// mid-handshake gets `UnexpectedEof` ("tls handshake eof").
pub async fn accept<S>(io: S, config: Arc<rustls::ServerConfig>) -> io::Result<TlsStream<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let conn = UnbufferedServerConnection::new(config).map_err(io::Error::other)?;
    let mut stream = TlsStream {
        io,
        conn,
        incoming: BytesMut::new(),
        outgoing: Vec::new(),
        sent: 0,
        plain: BytesMut::new(),
        read_closed: false,
        write_closed: false,
    };
    std::future::poll_fn(|cx| stream.poll_handshake(cx)).await?;
    Ok(stream)
}

fn tls_error(error: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

/// Append what `encode` writes to `out`, growing it to the size rustls asks for.
fn encode_into<E>(
    out: &mut Vec<u8>,
    mut encode: impl FnMut(&mut [u8]) -> Result<usize, E>,
    required: impl Fn(&E) -> Option<usize>,
    guess: usize,
) -> Result<usize, E> {
    let start = out.len();
    out.resize(start + guess, 0);
    let result = match encode(&mut out[start..]) {
        Err(e) => match required(&e) {
            Some(size) => {
                out.resize(start + size, 0);
                encode(&mut out[start..])
            }
            None => Err(e),
        },
        done => done,
    };
    out.truncate(start + *result.as_ref().unwrap_or(&0));
    result
}

fn encode_required(e: &EncodeError) -> Option<usize> {
    match e {
        EncodeError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

fn encrypt_required(e: &EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

impl<S> TlsStream<S> {
    /// Process every complete record in `incoming`: handshake records are encoded
    /// into `outgoing`, plaintext goes to `dest` and what does not fit to `plain`.
    /// Stop at the first chance to `write`, or when more input is needed.
    fn pump(&mut self, mut dest: Option<&mut ReadBuf<'_>>, write: Write<'_>) -> io::Result<Pumped> {
        let mut read = false;
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.conn.process_tls_records(&mut self.incoming);
            let state = match state {
                Ok(state) => state,
                Err(error) => {
                    self.incoming.advance(discard);
                    self.queue_alert();
                    return Err(tls_error(error));
                }
            };
            let outcome = match state {
                ConnectionState::ReadTraffic(mut traffic) => {
                    while let Some(record) = traffic.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        let payload = record.payload;
                        let n = dest
                            .as_ref()
                            .map_or(0, |d| d.remaining().min(payload.len()));
                        if let Some(dest) = dest.as_mut() {
                            dest.put_slice(&payload[..n]);
                        }
                        self.plain.extend_from_slice(&payload[n..]);
                        // An empty record hands out nothing: not an end of stream.
                        read |= !payload.is_empty();
                    }
                    None
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    encode_into(
                        &mut self.outgoing,
                        |out| encode.encode(out),
                        encode_required,
                        0,
                    )
                    .map_err(io::Error::other)?;
                    None
                }
                // The bytes are in `outgoing`, ahead of anything queued after them.
                ConnectionState::TransmitTlsData(transmit) => {
                    transmit.done();
                    None
                }
                ConnectionState::PeerClosed => {
                    self.read_closed = true;
                    None
                }
                ConnectionState::Closed => {
                    self.read_closed = true;
                    Some(Pumped::Closed)
                }
                ConnectionState::WriteTraffic(mut traffic) => match write {
                    Write::Data(data) => {
                        let guess = data.len() + 64 * (data.len() / (16 * 1024) + 2);
                        let n = encode_into(
                            &mut self.outgoing,
                            |out| traffic.encrypt(data, out),
                            encrypt_required,
                            guess,
                        )
                        .map_err(io::Error::other)?;
                        debug_assert!(n > 0 || data.is_empty());
                        Some(Pumped::Wrote(data.len()))
                    }
                    Write::CloseNotify => {
                        encode_into(
                            &mut self.outgoing,
                            |out| traffic.queue_close_notify(out),
                            encrypt_required,
                            64,
                        )
                        .map_err(io::Error::other)?;
                        Some(Pumped::Wrote(0))
                    }
                    Write::Nothing => Some(Pumped::NeedInput { read }),
                },
                ConnectionState::BlockedHandshake => Some(Pumped::NeedInput { read }),
                // Early data is never enabled; nothing else is defined.
                _ => return Err(io::Error::other("unexpected TLS connection state")),
            };
            self.incoming.advance(discard);
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }

    /// After a TLS error: encode the alert rustls queued for it, if any, so a last
    /// write can tell the peer why.
    fn queue_alert(&mut self) {
        for _ in 0..4 {
            let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
            match state {
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    let encoded = encode_into(
                        &mut self.outgoing,
                        |out| encode.encode(out),
                        encode_required,
                        0,
                    );
                    if encoded.is_err() {
                        return;
                    }
                }
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                _ => return,
            }
        }
    }

    fn release_incoming(&mut self) {
        if self.incoming.is_empty() && self.incoming.capacity() > 0 {
            self.incoming = BytesMut::new();
        }
    }

    /// Gather small pieces of a vectored write into one record's plaintext, at most
    /// [`GATHER`] bytes. On the heap, sized to what is written: a 16 KiB array on
    /// the stack would grow every future that polls a write.
    fn gather(bufs: &[io::IoSlice<'_>]) -> Vec<u8> {
        let total = bufs.iter().map(|b| b.len()).sum::<usize>().min(GATHER);
        let mut gathered = Vec::with_capacity(total);
        for piece in bufs {
            let n = piece.len().min(total - gathered.len());
            gathered.extend_from_slice(&piece[..n]);
            if gathered.len() == total {
                break;
            }
        }
        gathered
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream<S> {
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Err(e) = self.pump(None, Write::Nothing) {
                return self.fail(cx, e);
            }
            // Our flight leaves before we wait for the peer's, and the last one
            // (TLS 1.2's Finished) before the handshake counts as done.
            ready!(self.poll_write_out(cx))?;
            if !self.conn.is_handshaking() {
                self.release_incoming();
                return Poll::Ready(Ok(()));
            }
            if ready!(self.poll_fill(cx))? == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "tls handshake eof",
                )));
            }
        }
    }

    /// Read more TLS bytes into `incoming`: the count, 0 at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.incoming.len() >= MAX_INCOMING {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS message too large",
            )));
        }
        self.incoming.reserve(READ_CHUNK);
        let read = tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.incoming);
        self.release_incoming();
        read
    }

    /// A failed connection's last gasp: the alert rustls queued, if the socket
    /// takes it now.
    fn fail<T>(&mut self, cx: &mut Context<'_>, error: io::Error) -> Poll<io::Result<T>> {
        let _ = self.poll_write_out(cx);
        Poll::Ready(Err(error))
    }

    /// Write `outgoing` out; release it once it is all written.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.outgoing.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.outgoing[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if self.outgoing.capacity() > 0 {
            self.outgoing = Vec::new();
            self.sent = 0;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_read_records(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let pumped = match self.pump(Some(buf), Write::Nothing) {
                Ok(pumped) => pumped,
                Err(e) => return self.fail(cx, e),
            };
            match pumped {
                Pumped::NeedInput { read: true } | Pumped::Closed | Pumped::Wrote(_) => {
                    return Poll::Ready(Ok(()));
                }
                Pumped::NeedInput { read: false } if self.read_closed => {
                    return Poll::Ready(Ok(()));
                }
                Pumped::NeedInput { read: false } => {}
            }
            let filled = match self.poll_fill(cx) {
                Poll::Pending => {
                    // Whatever reading produced for the peer (a KeyUpdate's
                    // answer) leaves now rather than with our next write.
                    if self.sent < self.outgoing.len() {
                        let _ = self.poll_write_out(cx)?;
                    }
                    return Poll::Pending;
                }
                Poll::Ready(filled) => filled?,
            };
            if filled == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed connection without sending TLS close_notify",
                )));
            }
        }
    }

    fn poll_encrypt(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if self.write_closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // What is already encrypted goes first: `outgoing` holds one write at most.
        ready!(self.poll_write_out(cx))?;
        let data = &data[..data.len().min(MAX_WRITE)];
        let n = match self.pump(None, Write::Data(data))? {
            Pumped::Wrote(n) => n,
            Pumped::Closed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Pumped::NeedInput { .. } => {
                return Poll::Ready(Err(io::Error::other("TLS handshake not complete")));
            }
        };
        // The data is ours now: what the socket does not take leaves with the next
        // write or flush.
        if let Poll::Ready(Err(e)) = self.poll_write_out(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.plain.is_empty() {
            super::hand_out(&mut this.plain, buf);
            return Poll::Ready(Ok(()));
        }
        let result = this.poll_read_records(cx, buf);
        this.release_incoming();
        result
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_encrypt(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut pieces = bufs.iter().filter(|b| !b.is_empty());
        let first = pieces.next().map_or(&[][..], |b| &b[..]);
        if first.len() >= GATHER || pieces.next().is_none() {
            return this.poll_encrypt(cx, first);
        }
        let data = Self::gather(bufs);
        this.poll_encrypt(cx, &data)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_out(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.write_closed {
            ready!(this.poll_write_out(cx))?;
            this.write_closed = true;
            // Before the handshake's end or after both close_notifys there is
            // nothing to send.
            this.pump(None, Write::CloseNotify)?;
        }
        ready!(this.poll_write_out(cx))?;
        match ready!(Pin::new(&mut this.io).poll_shutdown(cx)) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests;
