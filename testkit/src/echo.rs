//! A WebSocket echo at [`ECHO_PATH`] for the RFC 6455 conformance suite (Autobahn cases run
//! by kosoku). It is mounted on a test server's public listener, so the cases go
//! through the real accept loop, setup limits, HTTP stack and the server's own
//! WebSocket settings; only the message handling is an echo. Protocol errors are
//! answered as the real sockets answer them.

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use latchkey_server::app::AppState;
use latchkey_server::transport::ws_upgrade::{WsStream, WsUpgrade};
use latchkey_server::transport::{close_for_read_error, finish_peer_close};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

/// Where the echo is served.
pub const ECHO_PATH: &str = "/conformance/echo";

/// Routes to pass to [`crate::TestServerBuilder::routes`].
pub fn conformance_echo() -> Router<AppState> {
    Router::new().route(ECHO_PATH, get(upgrade))
}

async fn upgrade(State(state): State<AppState>, ws: WsUpgrade) -> Response {
    ws.accept(&state, None, echo)
}

async fn echo(mut socket: WsStream) {
    while let Some(received) = socket.next().await {
        let reply = match received {
            Ok(Message::Text(t)) => Message::Text(t),
            Ok(Message::Binary(b)) => Message::Binary(b),
            // Pings are answered and Close echoed by the WebSocket layer itself.
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
            Ok(Message::Close(_)) => {
                finish_peer_close(&mut socket).await;
                break;
            }
            Err(e) => {
                if let Some(code) = close_for_read_error(&e) {
                    let _ = socket
                        .send(Message::Close(Some(CloseFrame {
                            code: code.code().into(),
                            reason: code.reason().into(),
                        })))
                        .await;
                }
                break;
            }
        };
        if socket.send(reply).await.is_err() {
            break;
        }
    }
}
