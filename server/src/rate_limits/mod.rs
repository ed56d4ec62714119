//! Limits that protect the gateway: per-peer rate limits and the client address
//! they are keyed by, agent rate limits per token and tenant, and renewals per
//! device.

pub(crate) mod agent_rate;
pub mod client_ip;
pub(crate) mod cluster_charges;
pub(crate) mod keyed;
pub(crate) mod rate;
