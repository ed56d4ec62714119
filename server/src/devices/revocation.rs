//! Revoking one device: the one sequence every surface uses (an admin, the
//! member whose browser it is, the browser's person forgetting the server in
//! the extension), so that "revoked" means the same closed socket wherever it
//! comes from (docs/security.md, "Revocation").

use latchkey_protocol::CloseCode;

use crate::core::Core;
use crate::store::{DeviceRecord, StoreError};

/// Revoke device `id` of `tenant_id` and close its live socket with 4001.
/// `None` when the tenant has no such device. `bool`: whether a socket was open.
///
/// The live socket closes first, on the tenant's own registration of it: the
/// commit waits for the disk (tens of milliseconds on a slow one), and a device
/// being revoked must not work through it. The close is signalled again once the
/// revocation is committed, which closes any socket that a reconnect opened with
/// the grant it read before the commit. Should the commit fail, the caller gets
/// the error to retry, and the device, whose grant still stands, reconnects: the
/// one thing changed is a reconnect.
pub async fn revoke_and_close(
    core: &Core,
    tenant_id: &str,
    id: &str,
) -> Result<Option<(DeviceRecord, bool)>, StoreError> {
    let now = core.clock.now_ms();
    let closed_first = core
        .registry
        .close_in_tenant(tenant_id, id, CloseCode::Revoked);
    let Some(d) = core.store.revoke_device(tenant_id, id, now).await? else {
        return Ok(None);
    };
    let was_online = core.registry.close(id, CloseCode::Revoked) || closed_first;
    metrics::counter!(crate::telemetry::metrics::REVOCATIONS).increment(1);
    tracing::info!(tenant = %tenant_id, device = %id, was_online, "device revoked");
    Ok(Some((d, was_online)))
}
