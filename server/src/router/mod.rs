//! Live device connections and the agent sessions multiplexed onto them: the
//! registry that finds a device's socket (for calls, replacement and revocation by
//! push), the task that owns each socket, the session table, and the call pipeline.

pub mod calls;
pub mod connection;
mod ending;
pub mod grant_sweep;
pub mod handshake;
pub mod lifecycle;
pub mod link;
pub mod registry;
pub mod sessions;

pub use registry::DeviceRegistry;
pub use sessions::SessionTable;
