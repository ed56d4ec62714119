//! Which replica holds each device's socket, as the other replicas told this
//! one (`device_connected`, `device_disconnected`; docs/cluster.md, "Calls
//! across replicas"), and the one [`RemoteLink`] per socket that calls from
//! here go through, so this replica's sessions on a device share its call
//! slots.
//!
//! Only ever filled from notices: the latest socket of a device wins, as on
//! the replicas themselves. A replica that vanished without a word (killed)
//! is forgotten when a call to it finds no responders.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use latchkey_protocol::additions::Features;

use super::remote_link::RemoteLink;
use crate::devices::link::Link;

/// A device's socket on another replica.
#[derive(Debug)]
pub struct Holder {
    pub tenant_id: String,
    pub node: Arc<str>,
    pub connected_at_ms: i64,
    pub features: Features,
    /// Made on the first call from here.
    link: Option<Arc<RemoteLink>>,
}

/// Device id → the replica holding its socket.
#[derive(Debug, Default)]
pub struct Directory {
    entries: Mutex<HashMap<String, Holder>>,
    /// Woken whenever a device is learnt online (session starts may wait).
    online: tokio::sync::Notify,
}

impl Directory {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Holder>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `node` holds the device's socket opened at `connected_at_ms`. Returns
    /// the link to the socket this replaces, to be closed; a notice older than
    /// what is known changes nothing.
    pub fn connected(
        &self,
        tenant_id: &str,
        device_id: &str,
        node: &str,
        connected_at_ms: i64,
        features: Features,
    ) -> Option<Arc<RemoteLink>> {
        let mut entries = self.entries();
        if let Some(known) = entries.get(device_id)
            && (known.connected_at_ms > connected_at_ms
                || (known.connected_at_ms == connected_at_ms && *known.node == *node))
        {
            return None;
        }
        let old = entries.insert(
            device_id.to_string(),
            Holder {
                tenant_id: tenant_id.to_string(),
                node: Arc::from(node),
                connected_at_ms,
                features,
                link: None,
            },
        );
        drop(entries);
        self.online.notify_waiters();
        old.and_then(|h| h.link)
    }

    /// The device's socket on `node` opened at `connected_at_ms` ended. Returns
    /// its link, to be closed.
    pub fn disconnected(
        &self,
        tenant_id: &str,
        device_id: &str,
        node: &str,
        connected_at_ms: i64,
    ) -> Option<Arc<RemoteLink>> {
        let mut entries = self.entries();
        let same = entries.get(device_id).is_some_and(|h| {
            h.tenant_id == tenant_id && *h.node == *node && h.connected_at_ms == connected_at_ms
        });
        if !same {
            return None;
        }
        entries.remove(device_id).and_then(|h| h.link)
    }

    /// Forget every socket on `node` (it is gone). Returns their links.
    pub fn forget_node(&self, node: &str) -> Vec<Arc<RemoteLink>> {
        let mut entries = self.entries();
        let gone: Vec<String> = entries
            .iter()
            .filter(|(_, h)| *h.node == *node)
            .map(|(id, _)| id.clone())
            .collect();
        gone.iter()
            .filter_map(|id| entries.remove(id).and_then(|h| h.link))
            .collect()
    }

    /// The link to the tenant's device on another replica, made by `make` on
    /// first use (`true` in the pair when it was made now).
    pub fn link(
        &self,
        tenant_id: &str,
        device_id: &str,
        make: impl FnOnce(&Holder) -> RemoteLink,
    ) -> Option<(Arc<RemoteLink>, bool)> {
        let mut entries = self.entries();
        let holder = entries
            .get_mut(device_id)
            .filter(|h| h.tenant_id == tenant_id)?;
        if let Some(link) = holder.link.as_ref().filter(|l| !l.is_closed()) {
            return Some((link.clone(), false));
        }
        let link = Arc::new(make(holder));
        holder.link = Some(link.clone());
        Some((link, true))
    }

    /// Whether another replica holds the tenant's device.
    pub fn holds(&self, tenant_id: &str, device_id: &str) -> bool {
        self.entries()
            .get(device_id)
            .is_some_and(|h| h.tenant_id == tenant_id)
    }

    /// The tenant's devices held by other replicas.
    pub fn online_in_tenant(&self, tenant_id: &str) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|(_, h)| h.tenant_id == tenant_id)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// A future woken when a device is next learnt online.
    pub fn learnt(&self) -> tokio::sync::futures::Notified<'_> {
        self.online.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_socket_wins_and_only_its_end_removes_it() {
        let d = Directory::default();
        let f = Features::default();
        assert!(d.connected("t", "dev", "a", 10, f).is_none());
        // An older socket's notice, arriving late, changes nothing.
        assert!(d.connected("t", "dev", "b", 5, f).is_none());
        assert!(d.disconnected("t", "dev", "b", 5).is_none());
        assert_eq!(d.online_in_tenant("t"), ["dev"]);
        assert!(d.online_in_tenant("other").is_empty());
        // The end of the socket on `a` at 10, told by another team, is not it.
        d.disconnected("other", "dev", "a", 10);
        assert!(d.holds("t", "dev"));
        d.disconnected("t", "dev", "a", 10);
        assert!(!d.holds("t", "dev"));
        d.connected("t", "dev", "a", 20, f);
        d.connected("t", "dev2", "b", 20, f);
        assert!(d.forget_node("a").is_empty(), "no link made yet");
        assert!(!d.holds("t", "dev") && d.holds("t", "dev2"));
    }
}
