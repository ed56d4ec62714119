//! Credentials: generating and hashing secrets, API-token principals, and the
//! bootstrap of the first tenant.

pub mod bootstrap;
pub(crate) mod principal;
pub(crate) mod revoked;
pub mod secret;
pub(crate) mod token_cache;
pub(crate) mod token_sweep;
pub(crate) mod token_watch;
