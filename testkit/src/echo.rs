//! A WebSocket echo at [`ECHO_PATH`] for the RFC 6455 conformance suite (Autobahn cases run
//! by kosoku). It is mounted on a test server's public listener, so the cases go
//! through the real accept loop, setup limits, HTTP stack and the server's own
//! WebSocket settings; only the message handling is an echo. Protocol errors are
//! answered as the real sockets answer them.

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use latchkey_server::app::AppState;
use latchkey_server::transport::{close_for_read_error, finish_peer_close, websocket_settings};

/// Where the echo is served.
pub const ECHO_PATH: &str = "/conformance/echo";

/// Routes to pass to [`crate::TestServerBuilder::routes`].
pub fn conformance_echo() -> Router<AppState> {
    Router::new().route(ECHO_PATH, get(upgrade))
}

async fn upgrade(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    websocket_settings(ws, &state.config.limits).on_upgrade(echo)
}

async fn echo(mut socket: WebSocket) {
    while let Some(received) = socket.recv().await {
        let reply = match received {
            Ok(Message::Text(t)) => Message::Text(t),
            Ok(Message::Binary(b)) => Message::Binary(b),
            // Pings are answered and Close echoed by the WebSocket layer itself.
            Ok(Message::Ping(_) | Message::Pong(_)) => continue,
            Ok(Message::Close(_)) => {
                finish_peer_close(&mut socket).await;
                break;
            }
            Err(e) => {
                if let Some(code) = close_for_read_error(&e) {
                    let _ = socket
                        .send(Message::Close(Some(CloseFrame {
                            code: code.code(),
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
