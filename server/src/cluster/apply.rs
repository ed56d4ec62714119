//! What a notice from another replica does on this one: the same local close a
//! revocation or a reconnect does on the replica where it happened, scoped by
//! the notice's team so an id from another team closes nothing.
//!
//! A notice is input from the network: it is bounded before it is parsed
//! (`MAX_NOTICE_BYTES`), its ids are only ever looked up in this node's maps
//! (never stored or shown), and it can only close or end, never admit.

use latchkey_protocol::CloseCode;
use latchkey_protocol::additions::Features;
use latchkey_protocol::cluster::{Envelope, Notice};

use super::members::Heard;
use crate::app::AppState;
use crate::auth::token_watch::TokenEnd;
use crate::telemetry::metrics::CLUSTER_NOTICES_RECEIVED;

/// The longest id a notice may name; longer ones are ignored (no id we issue
/// comes close).
const MAX_ID_CHARS: usize = 64;

fn usable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_CHARS
}

/// Act on `envelope` here.
pub fn apply(state: &AppState, envelope: Envelope) {
    // Shown in logs only: cleaned of control characters and bounded.
    let node = latchkey_protocol::text::clean(&envelope.node, MAX_ID_CHARS);
    let heard = match envelope.notice {
        Notice::Alive | Notice::Hello => Heard::Up,
        Notice::Leaving => Heard::Leaving,
        _ => Heard::Told,
    };
    state.peers.heard_from(
        &latchkey_protocol::cluster::relay::subject_token(&node),
        heard,
    );
    match envelope.notice {
        Notice::DevicesRevoked {
            tenant_id,
            device_ids,
        } => {
            count("devices_revoked");
            let closed = device_ids
                .iter()
                .filter(|id| usable(id))
                .filter(|id| {
                    state
                        .registry
                        .close_in_tenant(&tenant_id, id, CloseCode::Revoked)
                })
                .count();
            if closed > 0 {
                tracing::info!(%node, tenant = %tenant_id, closed, "devices revoked on another replica: sockets here closed");
            }
        }
        Notice::TeamDevicesRevoked { tenant_id } => {
            count("team_devices_revoked");
            let closed = state.registry.close_tenant(&tenant_id, CloseCode::Revoked);
            // Logged only when the team has sockets here: then its id is one of ours.
            if closed > 0 {
                tracing::info!(%node, tenant = %tenant_id, closed, "every device of a team revoked on another replica");
            }
        }
        Notice::TokensRevoked {
            tenant_id,
            token_ids,
        } => {
            count("tokens_revoked");
            let ended = token_ids
                .iter()
                .filter(|id| usable(id))
                .filter(|id| {
                    state
                        .tokens
                        .end_in_tenant(&tenant_id, id, TokenEnd::Revoked)
                })
                .count();
            if ended > 0 {
                tracing::info!(%node, tenant = %tenant_id, ended, "tokens revoked on another replica: what they held here ended");
            }
        }
        Notice::DeviceConnected {
            tenant_id,
            device_id,
            connected_at_ms,
            features,
        } => {
            count("device_connected");
            if !usable(&device_id) {
                return;
            }
            state.peers.learn_connected(
                &tenant_id,
                &device_id,
                &latchkey_protocol::cluster::relay::subject_token(&node),
                connected_at_ms,
                Features::of(Some(&features)),
            );
            if state
                .registry
                .close_if_older(&tenant_id, &device_id, connected_at_ms)
            {
                tracing::info!(%node, tenant = %tenant_id, device = %device_id, "device reconnected to another replica: its socket here replaced");
            } else if let Some(ours) =
                state
                    .registry
                    .newer_here(&tenant_id, &device_id, connected_at_ms)
            {
                // The sender holds an older socket of a device that is here
                // now (its notice of the newer one was lost while NATS was
                // away): tell it again, and it closes its own.
                let features = state
                    .registry
                    .link_in_tenant(&tenant_id, &device_id, None)
                    .map(|l| {
                        l.features()
                            .names()
                            .into_iter()
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                state.peers.tell(Notice::DeviceConnected {
                    tenant_id,
                    device_id,
                    connected_at_ms: ours,
                    features,
                });
            }
        }
        Notice::DeviceDisconnected {
            tenant_id,
            device_id,
            connected_at_ms,
            reason,
        } => {
            count("device_disconnected");
            if usable(&device_id) {
                state.peers.learn_disconnected(
                    &tenant_id,
                    &device_id,
                    &latchkey_protocol::cluster::relay::subject_token(&node),
                    connected_at_ms,
                    reason,
                );
            }
        }
        Notice::Hello => {
            count("hello");
            // The newcomer learns at once that this replica is up (unless it
            // is draining).
            if !state.shutdown.is_cancelled() {
                state.peers.tell(Notice::Alive);
            }
            state.peers.announce();
        }
        Notice::Alive => count("alive"),
        Notice::Leaving => {
            count("leaving");
            tracing::info!(%node, "cluster: a replica left");
        }
        Notice::Unknown => count("unknown"),
    }
}

fn count(kind: &'static str) {
    metrics::counter!(CLUSTER_NOTICES_RECEIVED, "kind" => kind).increment(1);
}
