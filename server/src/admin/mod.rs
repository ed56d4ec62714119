//! The admin HTTP API (docs/agents.md, docs/cli.md): pairing links, devices, members, API tokens
//! and the audit trail of the caller's tenant, and `/v1/me`, a member's own browsers
//! (docs/people.md). Every handler takes an [`AdminPrincipal`] (or a member's) and scopes
//! every query by its tenant, so another tenant's ids answer exactly like unknown ones.
//!
//! [`AdminPrincipal`]: crate::auth::principal::AdminPrincipal

mod audit_keeping;
mod audit_log;
mod devices;
mod me;
mod members;
mod pairings;
mod policies;
mod tokens;
mod webhooks;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/admin/pairings",
            post(pairings::create).get(pairings::list),
        )
        .route("/v1/admin/pairings/{id}", delete(pairings::void))
        .route("/v1/admin/devices", get(devices::list))
        .route("/v1/admin/devices/revoke-all", post(devices::revoke_all))
        .route("/v1/admin/devices/{id}/forget", post(devices::forget))
        .route(
            "/v1/admin/devices/{id}",
            get(devices::get_one)
                .patch(devices::rename)
                .delete(devices::revoke),
        )
        .route(
            "/v1/admin/devices/{id}/policy",
            get(policies::get_device).put(policies::put_device),
        )
        .route(
            "/v1/admin/policy",
            get(policies::get_team).put(policies::put_team),
        )
        .route("/v1/admin/tokens", post(tokens::create).get(tokens::list))
        .route("/v1/admin/tokens/{id}", delete(tokens::revoke))
        .route("/v1/admin/audit", get(audit_log::list))
        .route("/v1/admin/audit/export", get(audit_keeping::export))
        .route("/v1/admin/audit/keys", get(audit_keeping::keys))
        .route(
            "/v1/admin/audit/retention",
            get(audit_keeping::get_retention).put(audit_keeping::put_retention),
        )
        .route(
            "/v1/admin/members",
            post(members::create).get(members::list),
        )
        .route("/v1/admin/members/{id}", delete(members::remove))
        .route(
            "/v1/admin/webhooks",
            post(webhooks::create).get(webhooks::list),
        )
        .route("/v1/admin/webhooks/{id}", delete(webhooks::remove))
        .route(
            "/v1/admin/webhooks/{id}/deliveries",
            get(webhooks::deliveries),
        )
        .route(
            "/v1/admin/webhooks/{id}/redeliver",
            post(webhooks::redeliver),
        )
        .route("/v1/admin/webhooks/{id}/enable", post(webhooks::enable))
        .route("/v1/me", get(me::whoami))
        .route("/v1/me/devices", get(me::devices))
        .route("/v1/me/devices/{id}", delete(me::revoke))
        .route(
            "/v1/me/devices/{id}/policy",
            get(policies::get_mine).put(policies::put_mine),
        )
        .route("/v1/me/pairings", post(me::pair))
}

/// A display name an admin sent (a label, a token name), as stored: refused with
/// `invalid_params` naming `field` when longer than `max_chars` or empty once
/// control and bidirectional formatting characters are dropped
/// ([`latchkey_protocol::text::clean`]).
pub(crate) fn clean_name(
    raw: &str,
    field: &'static str,
    max_chars: usize,
) -> Result<String, crate::api_error::ApiError> {
    use latchkey_protocol::ErrorCode;
    let refuse = |message: String| {
        let mut e = crate::api_error::ApiError::new(ErrorCode::InvalidParams, message);
        e.data = Some(serde_json::json!({ "field": field, "max_chars": max_chars }));
        e
    };
    if raw.len() > max_chars && raw.chars().count() > max_chars {
        return Err(refuse(format!(
            "{field} must be at most {max_chars} characters"
        )));
    }
    let cleaned = latchkey_protocol::text::clean(raw, max_chars);
    if cleaned.is_empty() {
        return Err(refuse(format!("{field} must not be empty")));
    }
    Ok(cleaned)
}
