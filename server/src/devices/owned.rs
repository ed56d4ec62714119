//! Whose a browser is (docs/people.md, "Whose a browser is"): the browsers of one
//! member, read the one way every surface reads them.

use crate::store::{DeviceRecord, Store, StoreError};

/// The browsers that are or were member `member_id`'s in team `tenant_id`,
/// revoked and expired ones too (their history stays theirs).
pub async fn of_member(
    store: &dyn Store,
    tenant_id: &str,
    member_id: &str,
) -> Result<Vec<DeviceRecord>, StoreError> {
    Ok(store
        .list_devices(tenant_id)
        .await?
        .into_iter()
        .filter(|d| d.owner_id.as_deref() == Some(member_id))
        .collect())
}
