//! Live device connections: the registry that finds a device's socket (for calls,
//! replacement and revocation by push), the task that owns each socket, the link
//! callers send requests through, and the grant rule that decides whether a device
//! may stay connected.

pub(crate) mod connection;
pub(crate) mod ending;
pub mod expiry_notices;
pub(crate) mod grant;
pub mod grant_sweep;
pub(crate) mod handshake;
pub(crate) mod link;
pub mod owned;
pub mod registry;
pub(crate) mod revocation;
pub mod session_events;
pub mod team_names;

pub use registry::DeviceRegistry;
pub use team_names::TeamNames;
