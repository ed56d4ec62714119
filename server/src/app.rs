//! Shared state (cheap-to-clone room handles, no global lock) and the HTTP router.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use latchkey_protocol::ErrorCode;

use crate::cluster::ClusterStatus;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api_error::ApiError;
use crate::core::Core;
use crate::rate_limits::rate::PeerRateLimiter;

/// Peers tracked by each keyed rate limiter before new peers share an overflow bucket.
pub const RATE_LIMIT_MAX_KEYS: usize = 1024;

/// The state every HTTP handler gets: the session core, and what only the surfaces
/// own (rate limiters, the token reader, agent socket slots, the public base URL).
///
/// It derefs to [`Surfaces`] and on to [`Core`], so `state.registry` and `&state`
/// passed as `&Core` read the core's handles without each handler naming the room
/// they live in. One `Arc`: axum clones the state for every extractor and
/// middleware of every request, and a clone of the handles themselves was some
/// thirty reference counts moved up and down each time (load-tests/notes.md,
/// "MCP").
#[derive(Clone)]
pub struct AppState(Arc<Surfaces>);

/// What [`AppState`] holds.
pub struct Surfaces {
    pub(crate) core: Core,
    /// Device upgrades read their grants through this, together when they arrive
    /// together.
    pub(crate) token_reads: crate::store::token_reads::TokenReads,
    /// API tokens in use here: revoking or expiring one ends what it holds.
    pub(crate) tokens: crate::auth::token_watch::TokenWatch,
    /// Token records read recently, good while no revocation has happened since.
    pub(crate) token_cache: crate::auth::token_cache::TokenCache,
    pub(crate) agent_sockets: crate::agent::socket_slots::AgentSocketCounter,
    /// Pairing attempts and anything else on `/extension/authorize` that is not a
    /// known device's renewal: per client address and per node.
    pub(crate) authorize_limiter: Arc<PeerRateLimiter>,
    /// Renewals, per device: once the store has said whose token a renewal
    /// presents, it is charged to that device alone, never to the address or the
    /// node, so pairing guesses cannot refuse it (docs/security.md).
    pub(crate) renewal_limiter: Arc<crate::rate_limits::keyed::SweptLimiter>,
    pub(crate) upgrade_limiter: Arc<PeerRateLimiter>,
    /// Web console sign-in attempts, per client address and per node.
    pub(crate) console_sign_in_limiter: Arc<PeerRateLimiter>,
    /// Moved on by every console sign-out here, so the live streams of that
    /// sign-in end at once (docs/console.md, "Live updates").
    pub(crate) console_sign_outs: Arc<tokio::sync::watch::Sender<u64>>,
    pub(crate) agent_limiter: Arc<crate::rate_limits::agent_rate::AgentRateLimiter>,
    /// `wss://host[:port][/prefix]` without a trailing slash: pairing links start here.
    pub(crate) public_base: Arc<str>,
    /// Every connection task, so shutdown can wait for them.
    pub(crate) tasks: TaskTracker,
    /// The keys delegation tokens are signed and verified with (docs/delegation.md).
    pub(crate) signing_keys: crate::delegation::keys::SigningKeys,
    /// Webhook deliveries' HTTP client (docs/webhooks.md): the worker's and a
    /// manual redelivery's.
    pub(crate) webhooks: Arc<crate::webhooks::deliver::Deliverer>,
    /// The console's single sign-on providers (docs/console.md).
    pub(crate) sso: Arc<crate::console::sso::Sso>,
}

impl std::ops::Deref for AppState {
    type Target = Surfaces;

    fn deref(&self) -> &Surfaces {
        &self.0
    }
}

impl std::ops::Deref for Surfaces {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl AppState {
    /// The surfaces' state around `core`, with limiters tuned by its config.
    pub fn new(
        core: Core,
        public_base: Arc<str>,
        webhooks: Arc<crate::webhooks::deliver::Deliverer>,
    ) -> Self {
        let limits = &core.config.limits;
        Self(Arc::new(Surfaces {
            token_reads: crate::store::token_reads::TokenReads::new(core.store.clone()),
            authorize_limiter: Arc::new(PeerRateLimiter::per_minute(
                limits.authorize_per_minute,
                RATE_LIMIT_MAX_KEYS,
            )),
            renewal_limiter: Arc::new(crate::rate_limits::keyed::SweptLimiter::per_minute(
                limits.renewals_per_minute_per_device,
            )),
            console_sign_outs: Arc::default(),
            console_sign_in_limiter: Arc::new(PeerRateLimiter::per_minute(
                limits.console_sign_ins_per_minute,
                RATE_LIMIT_MAX_KEYS,
            )),
            upgrade_limiter: Arc::new(PeerRateLimiter::per_peer_only(
                limits.upgrades_per_minute,
                RATE_LIMIT_MAX_KEYS,
            )),
            agent_limiter: Arc::new(
                crate::rate_limits::agent_rate::AgentRateLimiter::per_second(
                    limits.agent_calls_per_second_per_token,
                    limits.agent_calls_per_second_per_tenant,
                ),
            ),
            tokens: crate::auth::token_watch::TokenWatch::default(),
            token_cache: crate::auth::token_cache::TokenCache::default(),
            agent_sockets: crate::agent::socket_slots::AgentSocketCounter::default(),
            public_base,
            tasks: TaskTracker::new(),
            signing_keys: crate::delegation::keys::SigningKeys::default(),
            webhooks,
            sso: Arc::new(crate::console::sso::Sso::new(&core.config.console.sso)),
            core,
        }))
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("backend", &self.store.backend())
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

/// The public router: the documented routes ([`crate::openapi`]), `/mcp`, and
/// the document itself; `extra` routes (tests only: the conformance echo) are
/// served by the same stack, before the fallback.
pub fn router(state: AppState, extra: Router<AppState>) -> Router {
    let mcp = state.config.mcp.enabled;
    let (documented, doc) = crate::openapi::routes(mcp).split_for_parts();
    let document = crate::openapi::Rendered::new(&crate::openapi::finish(doc, mcp));
    #[expect(
        clippy::disallowed_methods,
        reason = "the document's own route, declared in openapi/mod.rs"
    )]
    let served = Router::new().route(
        crate::openapi::PATH,
        get(move || std::future::ready(document.response())),
    );
    Router::new()
        .merge(extra)
        .merge(documented)
        .merge(crate::mcp::service(&state))
        .merge(crate::console::routes())
        .merge(served)
        .fallback(fallback)
        .layer(middleware::from_fn(request_span))
        .with_state(state)
}

/// Health, readiness: for load balancers and orchestrators, no token.
pub(crate) fn operations_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// A span per request with method and path only: never headers, query or body.
/// Every answer also says `Cache-Control: no-store` unless its handler set one:
/// several carry a secret shown once (a new token, a pairing link) and none is worth
/// keeping in a cache.
async fn request_span(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
        tenant = tracing::field::Empty,
    );
    // An agent's `traceparent` makes this request part of its trace.
    crate::telemetry::otel::adopt_parent(&span, request.headers());
    async move {
        let mut response = next.run(request).await;
        tracing::debug!(status = response.status().as_u16(), "request done");
        response
            .headers_mut()
            .entry(axum::http::header::CACHE_CONTROL)
            .or_insert(axum::http::HeaderValue::from_static("no-store"));
        response
    }
    .instrument(span)
    .await
}

/// Liveness: the process answers.
#[utoipa::path(
    get,
    operation_id = "healthz",
    path = "/healthz",
    tag = "operations",
    summary = "Liveness",
    security(()),
    responses((status = 200, description = "`ok`: the process answers.", body = String, content_type = "text/plain")),
)]
async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: the store answers and the server is not draining.
#[utoipa::path(
    get,
    operation_id = "readyz",
    path = "/readyz",
    tag = "operations",
    summary = "Readiness",
    security(()),
    responses(
        (status = 200, description = "`ready`: the store answers and the node takes work; `ready; cluster: disconnected` in cluster mode while NATS is unreachable.", body = String, content_type = "text/plain"),
        (status = 503, description = "`draining` or `store unavailable`.", body = String, content_type = "text/plain"),
    ),
)]
async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response();
    }
    match state.store.ping().await {
        // A replica whose NATS is away still serves its own devices: it stays
        // ready and says so (docs/cluster.md, "When NATS is unreachable").
        Ok(()) => match state.peers.status() {
            ClusterStatus::Disconnected => "ready; cluster: disconnected".into_response(),
            _ => "ready".into_response(),
        },
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store unavailable").into_response(),
    }
}

async fn fallback() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint")
}
