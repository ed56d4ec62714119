//! Logs and metrics. Nothing here records headers, subprotocol values or bodies.

pub mod every;
pub(crate) mod logging;
pub mod metrics;
pub mod otel;

pub use logging::init_logging;
