//! A socket made of two channels: the core's unit tests drive a device connection
//! or an agent socket through one, with no WebSocket and no network.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Sink, Stream};

use super::{Inbound, Outbound, ReadError, SendFailed};

/// A socket made of two channels, for unit tests of the connection task and the
/// agent socket (a link that is not a WebSocket would use one too). The other end
/// is a [`ChannelPeer`].
#[derive(Debug)]
pub struct ChannelSocket {
    inbound: futures_channel::mpsc::Receiver<Result<Inbound, ReadError>>,
    outbound: futures_channel::mpsc::Sender<Outbound>,
}

/// The device's end of a [`ChannelSocket`].
#[derive(Debug)]
pub struct ChannelPeer {
    pub send: futures_channel::mpsc::Sender<Result<Inbound, ReadError>>,
    pub recv: futures_channel::mpsc::Receiver<Outbound>,
}

/// A connected pair holding at most `capacity` messages each way: a peer that stops
/// reading makes the core's writes wait, as a full TCP window does.
pub fn channel_pair(capacity: usize) -> (ChannelSocket, ChannelPeer) {
    let (to_core, inbound) = futures_channel::mpsc::channel(capacity);
    let (outbound, from_core) = futures_channel::mpsc::channel(capacity);
    (
        ChannelSocket { inbound, outbound },
        ChannelPeer {
            send: to_core,
            recv: from_core,
        },
    )
}

impl Stream for ChannelSocket {
    type Item = Result<Inbound, ReadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.inbound).poll_next(cx)
    }
}

impl Sink<Outbound> for ChannelSocket {
    type Error = SendFailed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.outbound)
            .poll_ready(cx)
            .map_err(|_| SendFailed)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Outbound) -> Result<(), SendFailed> {
        Pin::new(&mut self.outbound)
            .start_send(item)
            .map_err(|_| SendFailed)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.outbound)
            .poll_flush(cx)
            .map_err(|_| SendFailed)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.outbound)
            .poll_close(cx)
            .map_err(|_| SendFailed)
    }
}
