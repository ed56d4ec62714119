//! Revoking one device: the one sequence every surface uses (an admin, the
//! member whose browser it is, the browser's person forgetting the server in
//! the extension), so that "revoked" means the same closed socket wherever it
//! comes from (docs/security.md, "Revocation").

use latchkey_protocol::CloseCode;
use latchkey_protocol::cluster::Notice;

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
    let ids = [id.to_string()];
    let closed_first = close_revoked(core, tenant_id, &ids) > 0;
    let Some(d) = core.store.revoke_device(tenant_id, id, now).await? else {
        return Ok(None);
    };
    let was_online = close_revoked(core, tenant_id, &ids) > 0 || closed_first;
    metrics::counter!(crate::telemetry::metrics::REVOCATIONS).increment(1);
    tracing::info!(tenant = %tenant_id, device = %id, was_online, "device revoked");
    Ok(Some((d, was_online)))
}

/// Close the sockets of the team's devices `ids` with 4001 (revoked), here and
/// on every other replica. Returns how many were open here. A revocation calls
/// it before its commit and again after, as [`revoke_and_close`] explains.
pub fn close_revoked(core: &Core, tenant_id: &str, ids: &[String]) -> usize {
    let here = ids
        .iter()
        .filter(|id| {
            core.registry
                .close_in_tenant(tenant_id, id, CloseCode::Revoked)
        })
        .count();
    core.peers.tell_all(Notice::devices_revoked(tenant_id, ids));
    here
}

/// Close every socket of the team with 4001, here and on every other replica
/// (revoke-all, before its commit; after it, [`close_revoked`] with the ids).
pub fn close_revoked_team(core: &Core, tenant_id: &str) -> usize {
    let here = core.registry.close_tenant(tenant_id, CloseCode::Revoked);
    core.peers.tell(Notice::TeamDevicesRevoked {
        tenant_id: tenant_id.to_string(),
    });
    here
}
