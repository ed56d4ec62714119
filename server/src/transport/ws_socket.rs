//! An upgraded WebSocket as the core's socket ([`crate::socket`]): the one place
//! the device connection and the agent socket meet the WebSocket library's types.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures_util::{Sink, Stream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::ws_upgrade::WsStream;
use crate::socket::{Inbound, Outbound, ReadError, SendFailed};

/// An upgraded `/extension` socket, speaking the core's messages.
#[derive(Debug)]
pub struct WsSocket(WsStream);

impl WsSocket {
    pub fn new(socket: WsStream) -> Self {
        Self(socket)
    }
}

impl Stream for WsSocket {
    type Item = Result<Inbound, ReadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let inbound = match ready!(Pin::new(&mut self.0).poll_next(cx)) {
                None => return Poll::Ready(None),
                Some(Err(e)) => Err(match crate::transport::close_for_read_error(&e) {
                    Some(code) => ReadError::Protocol(code),
                    None => ReadError::Gone,
                }),
                Some(Ok(Message::Text(text))) => Ok(Inbound::Text(text.into())),
                Some(Ok(Message::Binary(_))) => Ok(Inbound::Binary),
                Some(Ok(Message::Ping(_))) => Ok(Inbound::Ping),
                Some(Ok(Message::Pong(_))) => Ok(Inbound::Pong),
                Some(Ok(Message::Close(_))) => Ok(Inbound::Close),
                // A raw frame is only ever written, never read.
                Some(Ok(Message::Frame(_))) => continue,
            };
            return Poll::Ready(Some(inbound));
        }
    }
}

impl Sink<Outbound> for WsSocket {
    type Error = SendFailed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.0).poll_ready(cx).map_err(|_| SendFailed)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Outbound) -> Result<(), SendFailed> {
        let message = match item {
            Outbound::Text(text) => Message::Text(text.into()),
            Outbound::Ping => Message::Ping(Default::default()),
            Outbound::Close(code) => Message::Close(Some(CloseFrame {
                code: code.code().into(),
                reason: code.reason().into(),
            })),
        };
        Pin::new(&mut self.0)
            .start_send(message)
            .map_err(|_| SendFailed)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.0).poll_flush(cx).map_err(|_| SendFailed)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendFailed>> {
        Pin::new(&mut self.0).poll_close(cx).map_err(|_| SendFailed)
    }
}
