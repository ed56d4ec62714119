//! Agent sessions multiplexed onto device connections: the session table, session
//! start and stop, and the call pipeline every agent surface goes through.

mod admission;
mod call_audit;
pub mod calls;
pub mod lifetime;
pub mod routed;
pub mod start_stop;
pub mod table;
#[cfg(test)]
mod tests;

pub use table::SessionTable;
