//! Limits that protect the gateway: per-peer rate limits and the client address
//! they are keyed by.

pub mod client_ip;
pub mod rate;
