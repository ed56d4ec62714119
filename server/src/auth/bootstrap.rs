//! First start: an empty store gets tenant `default` and an admin token, written to
//! `<data-dir>/bootstrap-admin-token` with mode 0600. Also the operator's
//! `tenant create`.

use std::io::Write;
use std::path::Path;

use latchkey_protocol::api::Role;

use crate::audit::action;
use crate::auth::secret;
use crate::store::{ApiTokenRecord, NewAuditEvent, Store, StoreError, TenantRecord};

/// Name of the file that receives the first admin token.
pub const BOOTSTRAP_TOKEN_FILE: &str = "bootstrap-admin-token";
/// Name of the tenant created on first start.
pub const DEFAULT_TENANT: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("a tenant named {0:?} already exists")]
    TenantExists(String),
    #[error("tenant names are 1-64 characters of a-z, 0-9, '-' and '_'")]
    BadTenantName,
}

/// A tenant with its first admin token (the plaintext, shown once).
#[derive(Debug)]
pub struct NewTenant {
    pub tenant: TenantRecord,
    pub admin_token: String,
}

fn new_tenant_records(name: &str, now: i64) -> (TenantRecord, ApiTokenRecord, String) {
    let tenant = TenantRecord {
        id: crate::ids::TENANT.mint(),
        name: name.to_string(),
        created_at: now,
    };
    let token = secret::new_api_token();
    let record = ApiTokenRecord {
        id: crate::ids::TOKEN.mint(),
        tenant_id: tenant.id.clone(),
        name: "bootstrap".to_string(),
        role: Role::Admin.as_str().to_string(),
        token_hash: secret::hash(&token),
        created_at: now,
        expires_at: None,
        revoked_at: None,
        last_used_at: None,
        // The team's own token: no person is behind it.
        member_id: None,
    };
    (tenant, record, token)
}

/// Create the default tenant if the store has none. Returns the new admin token
/// only on the start that created it.
pub async fn bootstrap_if_empty(
    store: &dyn Store,
    data_dir: &Path,
    now: i64,
) -> Result<Option<NewTenant>, BootstrapError> {
    let (tenant, record, token) = new_tenant_records(DEFAULT_TENANT, now);
    match store.bootstrap(&tenant, &record).await {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        // Another replica starting on the same empty store created the team
        // between this one's count and its insert (the name is unique).
        Err(StoreError::Conflict(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    write_secret_file(&data_dir.join(BOOTSTRAP_TOKEN_FILE), &token)?;
    audit_tenant(store, &tenant, action::TENANT_BOOTSTRAP, "system", now).await;
    Ok(Some(NewTenant {
        tenant,
        admin_token: token,
    }))
}

/// `latchkeyd tenant create NAME`.
pub async fn create_tenant(
    store: &dyn Store,
    name: &str,
    now: i64,
) -> Result<NewTenant, BootstrapError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !valid {
        return Err(BootstrapError::BadTenantName);
    }
    if store.tenant_by_name(name).await?.is_some() {
        return Err(BootstrapError::TenantExists(name.to_string()));
    }
    let (tenant, record, token) = new_tenant_records(name, now);
    store.create_tenant(&tenant).await.map_err(|e| match e {
        StoreError::Conflict(_) => BootstrapError::TenantExists(name.to_string()),
        other => other.into(),
    })?;
    store.insert_api_token(&record).await?;
    audit_tenant(store, &tenant, action::TENANT_CREATE, "operator", now).await;
    Ok(NewTenant {
        tenant,
        admin_token: token,
    })
}

async fn audit_tenant(store: &dyn Store, tenant: &TenantRecord, act: &str, actor: &str, now: i64) {
    let event = NewAuditEvent {
        tenant_id: tenant.id.clone(),
        at: now,
        actor: actor.to_string(),
        action: act.to_string(),
        target: format!("tenant:{}", tenant.name),
        outcome: "ok".to_string(),
        detail: Some("first admin token issued".to_string()),
    };
    if let Err(e) = store.insert_audit(&event).await {
        tracing::warn!(error = %e, "audit event not written");
    }
}

fn write_secret_file(path: &Path, contents: &str) -> Result<(), BootstrapError> {
    let err = |source| BootstrapError::File {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(err)?;
    file.write_all(contents.as_bytes()).map_err(err)?;
    file.write_all(b"\n").map_err(err)?;
    file.sync_all().map_err(err)
}
