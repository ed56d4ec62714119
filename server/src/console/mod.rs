//! The web console (docs/console.md): server-rendered pages at `/console` on the
//! main listener, for team admins and members. A thin surface like the others:
//! it signs a person in, then calls the same functions the admin API calls.
//!
//! Every answer carries a strict Content-Security-Policy (no inline script or
//! style, no framing), and every state-changing request is a same-site form post
//! with the sign-in's CSRF token.

mod activity;
mod audit;
mod delegations;
mod device_actions;
mod devices;
mod human;
mod live;
mod members;
mod page;
mod pairing;
mod policies;
mod policy_form;
mod posted;
mod sessions;
mod signed_in;
pub mod sso;
mod tokens;
mod webhooks;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::app::AppState;

/// The `[console]` section of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// OpenID providers people may sign in with (`[[console.sso]]`), each for
    /// one team (docs/console.md, "Single sign-on").
    pub sso: Vec<sso::config::SsoProvider>,
}

/// Where the console lives on the main listener.
pub const PREFIX: &str = "/console";

/// The console's style sheet and script, built into the binary: nothing to
/// install or build.
const STYLE: &str = include_str!("console.css");
const SCRIPT: &str = include_str!("console.js");

/// Nothing but this origin's own style sheet and script loads (no inline script
/// or style); images are this origin's or data URIs (the pairing QR code); no
/// page may frame the console; forms post only here.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// The console's routes, served on the main listener beside the API.
#[expect(
    clippy::disallowed_methods,
    reason = "HTML pages, not API: they are not in the OpenAPI document (docs/console.md)"
)]
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(|| async { Redirect::to("/console/devices") }))
        .route("/console/console.css", get(style))
        .route("/console/console.js", get(script))
        .route("/console/pair", get(pairing::show).post(pairing::create))
        .route("/console/tokens", get(tokens::list).post(tokens::create))
        .route("/console/members", get(members::list).post(members::create))
        .route(
            "/console/members/{id}/remove",
            get(members::confirm_remove).post(members::remove),
        )
        .route("/console/members/{id}/role", post(members::set_role))
        .route("/console/tokens/{id}/revoke", post(tokens::revoke))
        .route(
            "/console/delegations/{id}/revoke",
            post(delegations::revoke),
        )
        .route("/console/pairings/{id}/void", post(pairing::void))
        .route(
            "/console/sign-in",
            get(signed_in::sign_in_page).post(signed_in::sign_in),
        )
        .route("/console/sign-in/sso/{id}", get(sso::start))
        .route("/console/sign-in/sso/{id}/callback", get(sso::callback))
        .route("/console/sign-out", post(signed_in::sign_out))
        .route("/console/devices", get(devices::list))
        .route("/console/devices/live", get(live::devices))
        .route("/console/sessions", get(sessions::list))
        .route("/console/audit", get(audit::list))
        .route(
            "/console/devices/{id}/policy",
            get(policies::device_page).post(policies::device_save),
        )
        .route("/console/team", get(policies::team))
        .route(
            "/console/webhooks",
            get(webhooks::list).post(webhooks::create),
        )
        .route("/console/webhooks/{id}", get(webhooks::show))
        .route(
            "/console/webhooks/{id}/redeliver",
            post(webhooks::redeliver),
        )
        .route("/console/webhooks/{id}/enable", post(webhooks::enable))
        .route("/console/webhooks/{id}/remove", post(webhooks::remove))
        .route("/console/team/policy", post(policies::team_policy))
        .route("/console/team/retention", post(policies::team_retention))
        .route("/console/activity", get(activity::list))
        .route("/console/audit/export", get(audit::export))
        .route("/console/sessions/live", get(live::sessions))
        .route("/console/sessions/{id}/end", post(sessions::end))
        .route(
            "/console/devices/{id}/revoke",
            get(devices::confirm_revoke).post(devices::revoke),
        )
        .route(
            "/console/devices/{id}/rename",
            get(device_actions::confirm_rename).post(device_actions::rename),
        )
        .route(
            "/console/devices/revoke-all",
            get(device_actions::confirm_revoke_all).post(device_actions::revoke_all),
        )
        .layer(middleware::from_fn(security_headers))
}

async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// A built-in file: nothing private in it, so it may be cached a little.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
}

/// The headers every console answer carries (docs/console.md, "Security").
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}
