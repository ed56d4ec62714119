//! Signed webhooks (docs/webhooks.md): a team's endpoints hear of the events they
//! follow as the events are committed to the team's audit trail, signed in the
//! Standard Webhooks format, at least once, in order, retried with backoff and
//! jitter for a day, then disabled with an audit row.
//!
//! The trail is the outbox: an endpoint keeps the last place it handled, the
//! worker reads the trail on from there, so nothing committed is skipped by a
//! restart and nothing is delivered before it is durable.

pub mod deliver;
pub mod destination;
pub mod sign;

use serde::{Deserialize, Serialize};

/// The `[webhooks]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Allow endpoints on private, loopback and link-local addresses, and plain
    /// `http://` (a receiver inside the operator's own network, or tests).
    pub allow_private_destinations: bool,
    /// How often each node looks for endpoints with events to deliver.
    pub poll_interval_ms: u64,
    /// The first retry's delay; each next one doubles, with ±50 % jitter.
    pub retry_base_ms: u64,
    /// The longest delay between retries.
    pub retry_max_ms: u64,
    /// An endpoint failing this long is disabled (its events wait in the trail).
    pub disable_after_secs: u64,
    /// One attempt's whole time limit.
    pub timeout_ms: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            allow_private_destinations: false,
            poll_interval_ms: 1_000,
            retry_base_ms: 5_000,
            retry_max_ms: 3_600_000,
            disable_after_secs: 86_400,
            timeout_ms: 10_000,
        }
    }
}

impl WebhooksConfig {
    /// Each broken rule, worded for the operator.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, value, range) in [
            ("poll_interval_ms", self.poll_interval_ms, 10..=60_000),
            ("retry_base_ms", self.retry_base_ms, 10..=3_600_000),
            ("retry_max_ms", self.retry_max_ms, 10..=86_400_000),
            (
                "disable_after_secs",
                self.disable_after_secs,
                1..=7 * 86_400,
            ),
            ("timeout_ms", self.timeout_ms, 100..=60_000),
        ] {
            if !range.contains(&value) {
                out.push(format!(
                    "webhooks.{name} must be {}..={}",
                    range.start(),
                    range.end()
                ));
            }
        }
        if self.retry_max_ms < self.retry_base_ms {
            out.push("webhooks.retry_max_ms must be at least retry_base_ms".into());
        }
        out
    }
}

/// The `webhook-id` of the event at place `seq` of the tenant's trail: the same
/// for every attempt and every redelivery, so a receiver can drop repeats.
pub fn event_id(tenant_id: &str, seq: i64) -> String {
    format!("evt_{tenant_id}_{seq}")
}
