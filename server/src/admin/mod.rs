//! The admin HTTP API (docs/agents.md, docs/cli.md): pairing links, devices, members, API tokens
//! and the audit trail of the caller's tenant, and `/v1/me`, a member's own browsers
//! (docs/people.md). Every handler takes an [`AdminPrincipal`] (or a member's) and scopes
//! every query by its tenant, so another tenant's ids answer exactly like unknown ones.
//!
//! [`AdminPrincipal`]: crate::auth::principal::AdminPrincipal

pub(crate) mod audit_keeping;
pub(crate) mod audit_log;
pub(crate) mod devices;
mod me;
pub(crate) mod me_audit;
mod me_sessions;
pub(crate) mod members;
pub(crate) mod pairings;
pub(crate) mod policies;
pub(crate) mod tokens;
pub(crate) mod webhooks;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(pairings::create, pairings::list))
        .routes(routes!(pairings::void))
        .routes(routes!(devices::list))
        .routes(routes!(devices::revoke_all))
        .routes(routes!(devices::forget))
        .routes(routes!(devices::get_one, devices::rename, devices::revoke))
        .routes(routes!(policies::get_device, policies::put_device))
        .routes(routes!(policies::get_team, policies::put_team))
        .routes(routes!(tokens::create, tokens::list))
        .routes(routes!(tokens::revoke))
        .routes(routes!(audit_log::list))
        .routes(routes!(audit_keeping::export))
        .routes(routes!(audit_keeping::keys))
        .routes(routes!(
            audit_keeping::get_retention,
            audit_keeping::put_retention
        ))
        .routes(routes!(members::create, members::list))
        .routes(routes!(members::remove, members::update))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::remove))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(webhooks::redeliver))
        .routes(routes!(webhooks::enable))
        .routes(routes!(me::whoami))
        .routes(routes!(me::devices))
        .routes(routes!(me::revoke))
        .routes(routes!(policies::get_mine, policies::put_mine))
        .routes(routes!(me::pair))
        .routes(routes!(me_sessions::list))
        .routes(routes!(me_sessions::end))
        .routes(routes!(me_audit::list))
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
