//! The per-address pairing limit across replicas (docs/cluster.md, "Rate
//! limits"). On one node the in-memory limiter is the whole limit. In cluster
//! mode a load balancer spreads one client's attempts over every replica, and N
//! in-memory limiters would admit N times the limit; so each attempt the local
//! limiter admits is also counted in the shared store, per folded address and
//! minute, and refused past `authorize_per_minute` for the cluster.
//!
//! A fixed one-minute window: at a window's edge a client can spend up to two
//! windows' worth within a minute, never more. The local limiter still applies
//! first, so a flood costs the store at most one write per admitted attempt.

use std::net::IpAddr;
use std::time::Duration;

use crate::app::AppState;
use crate::rate_limits::rate::rate_key;
use crate::store::StoreError;

/// Over the cluster-wide limit, or the shared count could not be read.
#[derive(Debug)]
pub enum Refused {
    OverLimit,
    Store(StoreError),
}

fn minute(now_ms: i64) -> i64 {
    now_ms.div_euclid(60_000)
}

/// Count one attempt of `client` across the cluster; `Ok` on one node.
pub async fn charge(state: &AppState, client: IpAddr) -> Result<(), Refused> {
    if !state.config.cluster.enabled() {
        return Ok(());
    }
    let peer = rate_key(client).to_string();
    let count = state
        .store
        .charge_peer(&peer, minute(state.clock.now_ms()))
        .await
        .map_err(Refused::Store)?;
    if count > state.config.limits.authorize_per_minute {
        return Err(Refused::OverLimit);
    }
    Ok(())
}

/// In cluster mode, drop the windows that can no longer count, once a minute.
pub async fn pruner(state: AppState) {
    if !state.config.cluster.enabled() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = state.shutdown.cancelled() => return,
        }
        // The current window and the one before stay.
        let before = minute(state.clock.now_ms()) - 1;
        if let Err(e) = state.store.prune_peer_charges(before).await {
            tracing::warn!(error = %e, "pruning the shared pairing-attempt counts failed; retried in a minute");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn windows_are_whole_minutes() {
        assert_eq!(super::minute(0), 0);
        assert_eq!(super::minute(59_999), 0);
        assert_eq!(super::minute(60_000), 1);
        assert_eq!(super::minute(-1), -1);
    }
}
