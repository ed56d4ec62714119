//! One sweep per node re-reads the grants of every online device, every
//! `grant_recheck_ms`: a revocation or deletion that did not arrive by push (written
//! by another node, or straight into the database) closes the socket with
//! `revoked`, a grant past its expiry with `expired`, and a store that stays
//! unreadable for `store_failure_grace_ms` closes every socket (fail closed).
//!
//! Why a sweep and not a timer per connection: 10,000 idle devices cost 10,000 store
//! reads and timer wake-ups every 5 s that way (15 % of a core idle, measured in
//! load-tests); the sweep reads them in batches of `GRANT_BATCH` ids per query.
//! Revocation through this node's admin API stays a push (at once); a renewal that
//! extends a grant is picked up by the connection's own expiry timer, which reads
//! the grant once when it fires.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, interval};
use tracing::{debug, warn};

use crate::core::Core;
use crate::devices::grant::{FailClosed, Verdict};
use crate::store::DeviceGrant;

/// What one sweep found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    pub checked: usize,
    pub closed: usize,
    /// Tenants whose grants could not be read.
    pub failed_tenants: usize,
}

/// Run sweeps until shutdown.
pub async fn grant_sweeper(state: Core) {
    let limits = state.config.limits.clone();
    let mut tick = interval(Duration::from_millis(limits.grant_recheck_ms.max(1)));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.reset();
    let mut fail_closed =
        FailClosed::with_grace(Duration::from_millis(limits.store_failure_grace_ms));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = state.shutdown.cancelled() => return,
        }
        let outcome = sweep(&state).await;
        if outcome.failed_tenants == 0 {
            fail_closed.confirmed();
            continue;
        }
        if let Some(verdict) = fail_closed.failed(Instant::now())
            && let Some(code) = verdict.close_code()
        {
            warn!(
                grace_ms = limits.store_failure_grace_ms,
                "store unreadable: failing closed, closing every device socket"
            );
            state.registry.close_all(code);
        }
    }
}

/// Re-read the grants of every online device once and close those no longer good.
pub async fn sweep(state: &Core) -> SweepOutcome {
    let mut outcome = SweepOutcome::default();
    for (tenant_id, online) in state.registry.online_by_tenant() {
        let ids: Vec<String> = online.iter().map(|(id, _)| id.clone()).collect();
        let grants = match state.store.device_grants(&tenant_id, &ids).await {
            Ok(grants) => grants,
            Err(e) => {
                warn!(error = %e, devices = ids.len(), "grant sweep could not read the store");
                outcome.failed_tenants += 1;
                continue;
            }
        };
        let now = state.clock.now_ms();
        let by_id: HashMap<&str, &DeviceGrant> =
            grants.iter().map(|g| (g.id.as_str(), g)).collect();
        for (device_id, generation) in &online {
            outcome.checked += 1;
            let Some(code) = Verdict::of(by_id.get(device_id.as_str()).copied(), now).close_code()
            else {
                continue;
            };
            if state
                .registry
                .close_generation(device_id, *generation, code)
            {
                outcome.closed += 1;
                debug!(device = %device_id, code = code.code(), "grant sweep closed a socket");
            }
        }
    }
    outcome
}
