//! The admin HTTP API (design §5): pairing links, devices, API tokens and the audit
//! trail of the caller's tenant. Every handler takes an [`AdminPrincipal`] and scopes
//! every query by its tenant, so another tenant's ids answer exactly like unknown ones.
//!
//! [`AdminPrincipal`]: crate::auth::principal::AdminPrincipal

mod audit_log;
mod devices;
mod pairings;
mod tokens;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/admin/pairings", post(pairings::create))
        .route("/v1/admin/devices", get(devices::list))
        .route("/v1/admin/devices/revoke-all", post(devices::revoke_all))
        .route(
            "/v1/admin/devices/{id}",
            get(devices::get_one)
                .patch(devices::rename)
                .delete(devices::revoke),
        )
        .route("/v1/admin/tokens", post(tokens::create).get(tokens::list))
        .route("/v1/admin/tokens/{id}", delete(tokens::revoke))
        .route("/v1/admin/audit", get(audit_log::list))
}

/// Trim, drop control characters, and bound a display name; `None` if nothing is left.
pub(crate) fn clean_name(raw: &str, max_chars: usize) -> Option<String> {
    let cleaned: String = raw
        .chars()
        .filter(|c| !c.is_control())
        .take(max_chars)
        .collect();
    let cleaned = cleaned.trim();
    (!cleaned.is_empty()).then(|| cleaned.to_string())
}
