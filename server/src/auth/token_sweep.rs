//! The backstop for API-token and delegation revocations that did not arrive by
//! push: every `grant_recheck_ms`, the tokens with a lease on this node are read
//! again from the store (one query per team and kind), and the leases of any
//! revoked since are ended as a pushed revocation would (docs/security.md, "API
//! tokens"). A revocation made on another replica while NATS was away, or by
//! another process on the same store, so ends within one interval, as a
//! device's does through the grant sweep.
//!
//! A store that cannot be read ends nothing: requests read their token from the
//! store and are refused meanwhile, and the sweep tries again next interval.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::{MissedTickBehavior, interval};

use crate::app::AppState;
use crate::auth::token_watch::TokenEnd;

/// Run sweeps until the node closes its sockets.
pub async fn token_sweeper(state: AppState) {
    let every = Duration::from_millis(state.config.limits.grant_recheck_ms.max(1));
    let mut tick = interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.reset();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = state.closing.cancelled() => return,
        }
        sweep(&state).await;
    }
}

/// Re-read every token in use here once; returns how many were ended.
pub async fn sweep(state: &AppState) -> usize {
    let mut ended = 0;
    for (tenant_id, ids) in state.tokens.in_use_by_tenant() {
        let live: HashSet<String> = match state.store.unrevoked_token_ids(&tenant_id, &ids).await {
            Ok(live) => live.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, tokens = ids.len(), "token sweep could not read the store");
                continue;
            }
        };
        // Only ids of the two kinds the store was asked about can be judged.
        let judged = |id: &str| crate::ids::TOKEN.holds(id) || crate::ids::DELEGATION.holds(id);
        for id in ids.iter().filter(|id| judged(id) && !live.contains(*id)) {
            if state
                .tokens
                .end_in_tenant(&tenant_id, id, TokenEnd::Revoked)
            {
                ended += 1;
                tracing::info!(tenant = %tenant_id, token = %id, "token revoked elsewhere: what it held here ended by the sweep");
            }
        }
    }
    ended
}
