//! Method and event names of the extension protocol (docs/protocol.md, "Frames", "Events from the
//! extension").

/// The extension's mandatory first request.
pub const SYSTEM_HANDSHAKE: &str = "system.handshake";
/// Gateway → extension: abort a forwarded request (docs/protocol.md, "Cancellation").
pub const CANCEL: &str = "cancel";

/// Extension → gateway liveness event, every 20 s after the handshake.
pub const EVENT_HEARTBEAT: &str = "system.heartbeat";
/// The user closed an Agent Window.
pub const EVENT_WINDOW_CLOSED: &str = "session.window_closed";
/// The user pressed Stop on an Agent Window overlay.
pub const EVENT_USER_INTERRUPT: &str = "session.user_interrupt";

/// Value of `HandshakeResult.server`; the extension checks nothing else about it.
pub const HANDSHAKE_SERVER_NAME: &str = "browser-skill-daemon";
/// The `client` value BrowserSkill-compatible extensions send.
pub const HANDSHAKE_CLIENT_NAME: &str = "browser-skill-extension";

/// Prefix of the single `Sec-WebSocket-Protocol` value that carries the device token.
pub const AUTH_SUBPROTOCOL_PREFIX: &str = "bsk-auth.";
