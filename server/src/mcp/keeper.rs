//! Choices no request touched for a month are forgotten (docs/mcp.md,
//! "Sessions"): a caller's choice of browser is kept in the store so that any
//! replica serves its next call, and one that stopped calling goes in time.

use std::time::Duration;

use crate::core::Core;

/// How long a choice no request changed is kept.
pub const KEPT_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// Forget choices untouched for [`KEPT_FOR`], hourly (on every replica: the
/// deletes are idempotent).
pub async fn keeper(core: Core) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = core.shutdown.cancelled() => return,
        }
        let kept_ms = i64::try_from(KEPT_FOR.as_millis()).unwrap_or(i64::MAX);
        let before = core.clock.now_ms().saturating_sub(kept_ms);
        match core.store.prune_mcp_choices(before).await {
            Ok(0) => {}
            Ok(gone) => tracing::info!(gone, "mcp: forgot choices untouched for 30 days"),
            Err(e) => {
                tracing::warn!(error = %e, "mcp: pruning old choices failed; retried in an hour")
            }
        }
    }
}
