//! Limits that protect the gateway: per-peer rate limits and the client address
//! they are keyed by, and agent rate limits per token and tenant.

pub mod agent_rate;
pub mod client_ip;
pub mod rate;
pub mod renewals;
