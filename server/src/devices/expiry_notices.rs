//! Expiry notices (docs/pairing-and-grants.md, "Expiry notices"): every few
//! minutes, a `device.expiring` audit row for each device whose grant runs out
//! within 7 days, and another within 1 day, so an admin (and, through the trail,
//! whoever follows it) hears before a browser stops working. The store claims
//! each notice with its row in one transaction (`store/expiry_notices.rs`): once
//! per grant, across restarts and replicas.

use std::time::Duration;

use crate::clock::rfc3339;
use crate::core::Core;
use crate::store::StoreError;
use crate::store::expiry_notices::ExpiryNotice;

/// How often the notices due are written.
pub const NOTICE_EVERY: Duration = Duration::from_secs(300);
/// The notices, nearest first: a grant already within 1 day gets that notice
/// alone, not the 7-day one too.
const LEVELS_DAYS: [i64; 2] = [1, 7];

/// Write every notice due now; how many.
pub async fn write_due(core: &Core) -> Result<usize, StoreError> {
    let now = core.clock.now_ms();
    let mut written = 0;
    for days in LEVELS_DAYS {
        written += core
            .store
            .claim_expiry_notices(now, days * 86_400_000, days, detail)
            .await?
            .len();
    }
    Ok(written)
}

/// `expires 2027-03-03T06:35:35Z (within 7 days)`.
fn detail(n: &ExpiryNotice, days: i64) -> String {
    format!(
        "expires {} (within {days} day{})",
        rfc3339(n.expires_at),
        if days == 1 { "" } else { "s" }
    )
}

/// The node's notifier, until it drains.
pub async fn notifier(core: Core) {
    let mut tick = tokio::time::interval(NOTICE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = core.shutdown.cancelled() => return,
        }
        match write_due(&core).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(devices = n, "expiry notices written"),
            Err(e) => tracing::warn!(error = %e, "expiry notices not written"),
        }
    }
}
