//! Live device connections: the registry that finds them (for replacement and
//! revocation by push) and the task that owns each socket.

pub mod connection;
pub mod registry;

pub use registry::DeviceRegistry;
