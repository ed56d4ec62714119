//! The team's webhook endpoints (docs/webhooks.md):
//! - `POST /v1/admin/webhooks`: register one; its signing secret is answered once;
//! - `GET /v1/admin/webhooks`, `DELETE /v1/admin/webhooks/{id}`;
//! - `GET /v1/admin/webhooks/{id}/deliveries`: the last attempts;
//! - `POST /v1/admin/webhooks/{id}/redeliver {"seq"}`: one event again, now;
//! - `POST /v1/admin/webhooks/{id}/enable`: deliver again after it was disabled.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::webhooks::{
    CreateWebhookRequest, EVENTS, MAX_DESCRIPTION_CHARS, MAX_ENDPOINTS_PER_TEAM, RedeliverRequest,
    WebhookCreated, WebhookDeliveryList, WebhookDeliveryView, WebhookList, WebhookStatus,
    WebhookView,
};

use crate::api_error::ApiError;
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::auth::principal::{AdminPrincipal, Principal};
use crate::clock::rfc3339;
use crate::store::webhooks::{DeliveryRecord, WebhookRecord};
use crate::webhooks::destination::check_url;

type JsonBody<T> = Result<Json<T>, axum::extract::rejection::JsonRejection>;

fn view(w: &WebhookRecord) -> WebhookView {
    WebhookView {
        id: w.id.clone(),
        url: w.url.clone(),
        events: w.events.split(' ').map(str::to_string).collect(),
        description: w.description.clone(),
        status: if w.disabled_at.is_some() {
            WebhookStatus::Disabled
        } else if w.failing_since.is_some() {
            WebhookStatus::Failing
        } else {
            WebhookStatus::Active
        },
        created_at: rfc3339(w.created_at),
        delivered_through: w.cursor_seq,
        failing_since: w.failing_since.map(rfc3339),
        disabled_at: w.disabled_at.map(rfc3339),
    }
}

fn delivery_view(d: DeliveryRecord, tenant_id: &str) -> WebhookDeliveryView {
    WebhookDeliveryView {
        event_id: crate::webhooks::event_id(tenant_id, d.seq),
        event_type: d.event_type,
        seq: d.seq,
        attempt: d.attempt,
        at: rfc3339(d.at),
        delivered: d.delivered,
        status: d.status.and_then(|s| u16::try_from(s).ok()),
        error: d.error,
    }
}

/// The tenant's endpoint `id`; a malformed, foreign or unknown id is `not_found`.
async fn endpoint(state: &AppState, tenant_id: &str, id: &str) -> Result<WebhookRecord, ApiError> {
    if !crate::ids::WEBHOOK.holds(id) {
        return Err(ApiError::not_found("webhook"));
    }
    state
        .store
        .get_webhook(tenant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook"))
}

async fn audit(
    state: &AppState,
    p: &Principal,
    act: &'static str,
    id: &str,
    detail: Option<String>,
) {
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: act,
            target: format!("webhook:{id}"),
            outcome: "ok",
            detail,
        })
        .await;
}

#[utoipa::path(
    post,
    operation_id = "webhooks_create",
    path = "/v1/admin/webhooks",
    tag = "webhooks",
    summary = "Add a webhook endpoint",
    request_body = CreateWebhookRequest,
    responses((status = 201, description = "The endpoint; its signing secret is shown only here.", body = WebhookCreated), crate::openapi::refusals::Create),
)]
pub async fn create(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    body: JsonBody<CreateWebhookRequest>,
) -> Result<(StatusCode, Json<WebhookCreated>), ApiError> {
    let Json(req) = body.map_err(|e| ApiError::invalid(e.body_text()))?;
    Ok((
        StatusCode::CREATED,
        Json(create_one(&state, &p, req).await?),
    ))
}

/// Register the endpoint `req` asks for in `p`'s team; audited as `p`'s act.
/// Also the console's.
pub(crate) async fn create_one(
    state: &AppState,
    p: &Principal,
    req: CreateWebhookRequest,
) -> Result<WebhookCreated, ApiError> {
    let allow_private = state.config.webhooks.allow_private_destinations;
    let url = check_url(&req.url, allow_private)
        .map_err(|m| ApiError::at_field(ErrorCode::InvalidParams, "url", m))?;
    if req.events.is_empty() {
        return Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "events",
            "events must name at least one event",
        ));
    }
    if let Some(unknown) = req.events.iter().find(|e| !EVENTS.contains(&e.as_str())) {
        let shown = latchkey_protocol::text::clean(unknown, 64);
        return Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "events",
            format!("{shown:?} is not an event; events: {}", EVENTS.join(", ")),
        ));
    }
    let description = req
        .description
        .as_deref()
        .map(|d| super::clean_name(d, "description", MAX_DESCRIPTION_CHARS))
        .transpose()?;
    let mut events: Vec<&str> = EVENTS
        .iter()
        .copied()
        .filter(|e| req.events.iter().any(|r| r == e))
        .collect();
    events.dedup();
    let secret = crate::webhooks::sign::new_secret();
    let record = WebhookRecord {
        id: crate::ids::WEBHOOK.mint(),
        tenant_id: p.tenant_id.clone(),
        url: url.to_string(),
        events: events.join(" "),
        description,
        secret: secret.clone(),
        created_at: state.clock.now_ms(),
        cursor_seq: 0,
        attempts: 0,
        failing_since: None,
        next_attempt_at: 0,
        disabled_at: None,
    };
    if !state
        .store
        .create_webhook(&record, MAX_ENDPOINTS_PER_TEAM as i64)
        .await?
    {
        return Err(ApiError::new(
            ErrorCode::LimitReached,
            format!("a team has at most {MAX_ENDPOINTS_PER_TEAM} webhook endpoints"),
        ));
    }
    // Never the URL in the trail: it may carry the receiver's token.
    audit(
        state,
        p,
        action::WEBHOOK_CREATE,
        &record.id,
        Some(record.events.clone()),
    )
    .await;
    let stored = endpoint(state, &p.tenant_id, &record.id).await?;
    Ok(WebhookCreated {
        view: view(&stored),
        secret,
    })
}

#[utoipa::path(
    get,
    operation_id = "webhooks_list",
    path = "/v1/admin/webhooks",
    tag = "webhooks",
    summary = "List webhook endpoints",
    responses((status = 200, description = "The team's endpoints.", body = WebhookList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<WebhookList>, ApiError> {
    Ok(Json(list_of(&state, &p.tenant_id).await?))
}

/// The team's endpoints. Also the console's.
pub(crate) async fn list_of(state: &AppState, tenant_id: &str) -> Result<WebhookList, ApiError> {
    let all = state.store.list_webhooks(tenant_id).await?;
    Ok(WebhookList {
        webhooks: all.iter().map(view).collect(),
    })
}

#[utoipa::path(
    delete,
    operation_id = "webhooks_remove",
    path = "/v1/admin/webhooks/{id}",
    tag = "webhooks",
    summary = "Remove a webhook endpoint",
    params(("id" = String, Path, description = "Webhook endpoint id")),
    responses((status = 200, description = "The endpoint, removed.", body = WebhookView), crate::openapi::refusals::ReadOne),
)]
pub async fn remove(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    Ok(Json(remove_one(&state, &p, &id).await?))
}

/// Remove endpoint `id` of `p`'s team; audited. Also the console's.
pub(crate) async fn remove_one(
    state: &AppState,
    p: &Principal,
    id: &str,
) -> Result<WebhookView, ApiError> {
    let w = endpoint(state, &p.tenant_id, id).await?;
    if !state.store.delete_webhook(&p.tenant_id, id).await? {
        return Err(ApiError::not_found("webhook"));
    }
    audit(state, p, action::WEBHOOK_DELETE, id, None).await;
    Ok(view(&w))
}

#[utoipa::path(
    get,
    operation_id = "webhooks_deliveries",
    path = "/v1/admin/webhooks/{id}/deliveries",
    tag = "webhooks",
    summary = "List an endpoint's deliveries",
    params(("id" = String, Path, description = "Webhook endpoint id")),
    responses((status = 200, description = "Recent deliveries, newest first.", body = WebhookDeliveryList), crate::openapi::refusals::ReadOne),
)]
pub async fn deliveries(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<WebhookDeliveryList>, ApiError> {
    Ok(Json(deliveries_of(&state, &p.tenant_id, &id).await?.1))
}

/// Endpoint `id` of team `tenant_id` and its recent deliveries, newest first.
/// Also the console's.
pub(crate) async fn deliveries_of(
    state: &AppState,
    tenant_id: &str,
    id: &str,
) -> Result<(WebhookView, WebhookDeliveryList), ApiError> {
    let w = endpoint(state, tenant_id, id).await?;
    let log = state
        .store
        .list_deliveries(&w.id, crate::store::webhooks::DELIVERIES_KEPT)
        .await?;
    let deliveries = WebhookDeliveryList {
        deliveries: log
            .into_iter()
            .map(|d| delivery_view(d, &w.tenant_id))
            .collect(),
    };
    Ok((view(&w), deliveries))
}

#[utoipa::path(
    post,
    operation_id = "webhooks_redeliver",
    path = "/v1/admin/webhooks/{id}/redeliver",
    tag = "webhooks",
    summary = "Deliver an event again",
    request_body = RedeliverRequest,
    params(("id" = String, Path, description = "Webhook endpoint id")),
    responses((status = 200, description = "The new delivery.", body = WebhookDeliveryView), crate::openapi::refusals::WriteOne),
)]
pub async fn redeliver(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
    body: JsonBody<RedeliverRequest>,
) -> Result<Json<WebhookDeliveryView>, ApiError> {
    let Json(req) = body.map_err(|e| ApiError::invalid(e.body_text()))?;
    Ok(Json(redeliver_one(&state, &p, &id, req.seq).await?))
}

/// Deliver the event at `seq` to endpoint `id` of `p`'s team again, now;
/// audited. Also the console's.
pub(crate) async fn redeliver_one(
    state: &AppState,
    p: &Principal,
    id: &str,
    seq: i64,
) -> Result<WebhookDeliveryView, ApiError> {
    let w = endpoint(state, &p.tenant_id, id).await?;
    let page = state
        .store
        .audit_chain_page(&w.tenant_id, seq.saturating_sub(1), 1)
        .await?;
    let Some(row) = page
        .into_iter()
        .find(|r| r.seq == seq && w.follows(&r.event.action))
    else {
        return Err(ApiError::at_field(
            ErrorCode::InvalidParams,
            "seq",
            "seq must be the place of an event in the trail that the endpoint follows",
        ));
    };
    let team = state
        .team_names
        .of(state.store.as_ref(), &w.tenant_id)
        .await
        .unwrap_or_default();
    let now = state.clock.now_ms();
    let attempt = state.webhooks.attempt(&w, &row, &team, now).await;
    crate::webhooks::deliver::log(state, &w, &row, 0, now, &attempt).await;
    audit(
        state,
        p,
        action::WEBHOOK_REDELIVER,
        id,
        Some(format!("seq {}", row.seq)),
    )
    .await;
    Ok(WebhookDeliveryView {
        event_id: crate::webhooks::event_id(&w.tenant_id, row.seq),
        event_type: row.event.action,
        seq: row.seq,
        attempt: 0,
        at: rfc3339(now),
        delivered: attempt.delivered,
        status: attempt.status,
        error: attempt.error,
    })
}

#[utoipa::path(
    post,
    operation_id = "webhooks_enable",
    path = "/v1/admin/webhooks/{id}/enable",
    tag = "webhooks",
    summary = "Re-enable a disabled endpoint",
    params(("id" = String, Path, description = "Webhook endpoint id")),
    responses((status = 200, description = "The endpoint, enabled.", body = WebhookView), crate::openapi::refusals::ReadOne),
)]
pub async fn enable(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    Ok(Json(enable_one(&state, &p, &id).await?))
}

/// Deliver to endpoint `id` of `p`'s team again after it was disabled;
/// audited. Also the console's.
pub(crate) async fn enable_one(
    state: &AppState,
    p: &Principal,
    id: &str,
) -> Result<WebhookView, ApiError> {
    let w = endpoint(state, &p.tenant_id, id).await?;
    state
        .store
        .enable_webhook(&p.tenant_id, &w.id, state.clock.now_ms())
        .await?;
    audit(state, p, action::WEBHOOK_ENABLE, id, None).await;
    Ok(view(&endpoint(state, &p.tenant_id, id).await?))
}
