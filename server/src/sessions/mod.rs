//! Agent sessions multiplexed onto device connections: the session table, session
//! start and stop, and the call pipeline every agent surface goes through.

pub mod calls;
pub mod start_stop;
pub mod table;
#[cfg(test)]
mod tests;

pub use table::SessionTable;
