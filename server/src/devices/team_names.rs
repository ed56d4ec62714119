//! Team names by tenant id, for what a browser is told about the team it serves
//! (the handshake answer's `latchkey_device.team`, shown in the extension's popup).
//! A team's name never changes once created, so a name read once is kept; an
//! unknown id re-reads the tenant list (a handful of rows) once, however many
//! handshakes of a reconnect storm ask at the same moment.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::store::Store;

#[derive(Debug, Clone, Default)]
pub struct TeamNames {
    names: Arc<RwLock<HashMap<String, String>>>,
    /// Held while the list is re-read, so concurrent misses read it once.
    refill: Arc<tokio::sync::Mutex<()>>,
}

impl TeamNames {
    /// The team's name; `None` when the store cannot say (the browser is then told
    /// no name, and says nothing of its team).
    pub async fn of(&self, store: &dyn Store, tenant_id: &str) -> Option<String> {
        if let Some(name) = self.cached(tenant_id) {
            return Some(name);
        }
        let _refill = self.refill.lock().await;
        if let Some(name) = self.cached(tenant_id) {
            return Some(name);
        }
        let tenants = match store.list_tenants().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "reading team names failed");
                return None;
            }
        };
        let mut names = self.names.write().unwrap_or_else(|p| p.into_inner());
        names.extend(tenants.into_iter().map(|t| (t.id, t.name)));
        names.get(tenant_id).cloned()
    }

    fn cached(&self, tenant_id: &str) -> Option<String> {
        self.names
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tenant_id)
            .cloned()
    }
}
