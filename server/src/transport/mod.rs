//! TCP, TLS and HTTP/1.1 serving. One accept loop per listener; each connection is a
//! task on the server's tracker, with the TLS handshake and header read bounded.

pub mod listener;
pub mod tls;
