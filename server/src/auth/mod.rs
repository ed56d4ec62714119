//! Credentials: generating and hashing secrets, API-token principals, and the
//! bootstrap of the first tenant.

pub mod bootstrap;
pub mod principal;
pub mod secret;
pub mod token_watch;
