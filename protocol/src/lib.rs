//! Every type that crosses a Latchkey wire.
//!
//! The extension-facing frames follow docs/protocol.md (BrowserSkill protocol 1.x) to
//! the letter; the HTTP API bodies are Latchkey's own. TypeScript bindings for the
//! extension are generated from these types (see `bindings/` and the `bindings` test),
//! never written by hand.

pub mod additions;
pub mod agent;
pub mod api;
pub mod audit_chain;
pub mod authorize;
pub mod close_code;
pub mod cluster;
pub mod delegation;
pub mod effect;
pub mod end_reason;
pub mod error_code;
pub mod frame;
pub mod handshake;
pub mod methods;
pub mod policy;
pub mod text;
pub mod tools;
pub mod ts_constants;
pub mod webhooks;

pub use close_code::CloseCode;
pub use end_reason::EndReason;
pub use error_code::{ErrorBody, ErrorCode};
pub use frame::{ErrorFrame, EventFrame, Frame, FrameError, RequestFrame, SuccessFrame};
