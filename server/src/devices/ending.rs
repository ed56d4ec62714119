//! How a device connection ends: the close code (if we send one) and why, and the
//! signals that end it (a registry close, a failed read).

use latchkey_protocol::CloseCode;

use crate::telemetry::metrics as telemetry;

/// Why a connection ended, and whether we close it (and with what code).
#[derive(Debug)]
pub(super) struct End {
    pub(super) close: Option<CloseCode>,
    pub(super) why: &'static str,
    /// The device sent Close: our reply (queued by the WebSocket layer) still has
    /// to be written for a clean closing handshake.
    pub(super) peer_closed: bool,
}

impl End {
    pub(super) fn close(code: CloseCode, why: &'static str) -> Self {
        Self {
            close: Some(code),
            why,
            peer_closed: false,
        }
    }

    pub(super) fn gone(why: &'static str) -> Self {
        Self {
            close: None,
            why,
            peer_closed: false,
        }
    }

    pub(super) fn peer_closed(why: &'static str) -> Self {
        Self {
            close: None,
            why,
            peer_closed: true,
        }
    }
}

/// How a failed read ends the connection: with the RFC 6455 close code when the
/// device broke the WebSocket protocol, else it just went away.
pub(super) fn read_failed(error: crate::socket::ReadError) -> End {
    match error {
        crate::socket::ReadError::Protocol(code) => {
            telemetry::frame_dropped("websocket_protocol_error");
            End::close(code, "websocket protocol error")
        }
        crate::socket::ReadError::Gone => End::gone("peer went away"),
    }
}

/// Resolves with the close code once the registry signals one (a dropped registry
/// counts as going away). The watch guard is released before returning.
pub(super) async fn close_signal(
    rx: &mut tokio::sync::watch::Receiver<Option<CloseCode>>,
) -> CloseCode {
    match rx.wait_for(Option::is_some).await {
        Ok(code) => (*code).unwrap_or(CloseCode::GoingAway),
        Err(_) => CloseCode::GoingAway,
    }
}
