//! The Webhooks page (docs/console.md, "Webhooks"), for admins: the team's
//! endpoints with what they follow and how delivery goes; adding one (its
//! signing secret shown once, with a copy button); and, per endpoint, the last
//! deliveries with Deliver again, Enable after it was disabled, and Remove.
//! Everything goes through the webhook API's own functions.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::webhooks::{
    CreateWebhookRequest, EVENTS, WebhookDeliveryView, WebhookStatus, WebhookView,
};
use serde::Deserialize;

use super::human::When;
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::webhooks::{
    create_one, deliveries_of, enable_one, list_of, redeliver_one, remove_one,
};
use crate::app::AppState;

/// Why a member is refused here.
const ADMINS_ONLY: &str = "webhooks are managed by the team's admins";

/// One endpoint as a row.
pub struct EndpointRow {
    pub id: String,
    pub url: String,
    pub description: String,
    pub events: String,
    /// "Active", "Failing", "Disabled".
    pub status: &'static str,
    pub added: When,
}

fn row(now: i64, w: WebhookView) -> EndpointRow {
    EndpointRow {
        status: match w.status {
            WebhookStatus::Active => "Active",
            WebhookStatus::Failing => "Failing",
            WebhookStatus::Disabled => "Disabled",
        },
        added: When::of(
            now,
            crate::clock::parse_rfc3339(&w.created_at).unwrap_or(now),
        ),
        events: w.events.join(", "),
        description: w.description.unwrap_or_default(),
        url: w.url,
        id: w.id,
    }
}

#[derive(Template)]
#[template(path = "console/webhooks.html")]
struct WebhooksPage {
    frame: Option<Frame>,
    rows: Vec<EndpointRow>,
    events: &'static [&'static str],
    /// The endpoint just added and its secret, shown once.
    created: Option<(String, String)>,
    refused: Option<(&'static str, String)>,
}

async fn page(
    state: &AppState,
    me: &SignedIn,
    created: Option<(String, String)>,
    refused: Option<(&'static str, String)>,
) -> Result<Response, ConsoleError> {
    let now = state.clock.now_ms();
    let list = list_of(state, &me.principal.tenant_id).await?;
    let status = if refused.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Ok(render(
        status,
        &WebhooksPage {
            frame: Some(me.frame()),
            rows: list.webhooks.into_iter().map(|w| row(now, w)).collect(),
            events: EVENTS,
            created,
            refused,
        },
    ))
}

pub async fn list(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    page(&state, &me, None, None).await
}

/// The add form: `url`, `description`, and `event:<name>=on` per event.
#[derive(Deserialize)]
#[serde(transparent)]
pub struct NewEndpointForm(HashMap<String, String>);

impl WithCsrf for NewEndpointForm {
    fn csrf(&self) -> &str {
        self.0.get("csrf").map_or("", String::as_str)
    }
}

pub async fn create(
    State(state): State<AppState>,
    Posted { me, form }: Posted<NewEndpointForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let field = |name: &str| form.0.get(name).map(|v| v.trim().to_string());
    let request = CreateWebhookRequest {
        url: field("url").unwrap_or_default(),
        events: EVENTS
            .iter()
            .filter(|e| form.0.get(&format!("event:{e}")).is_some_and(|v| v == "on"))
            .map(|e| (*e).to_string())
            .collect(),
        description: field("description").filter(|d| !d.is_empty()),
    };
    match create_one(&state, &me.principal, request).await {
        Ok(created) => page(&state, &me, Some((created.view.url, created.secret)), None).await,
        Err(e) if e.code.http_status() == 400 || e.code.http_status() == 409 => {
            page(&state, &me, None, Some((e.code.as_str(), e.message))).await
        }
        Err(e) => Err(e.into()),
    }
}

/// One delivery as a row.
pub struct DeliveryRow {
    pub event: String,
    pub seq: i64,
    pub attempt: i64,
    pub at: When,
    pub delivered: bool,
    /// The receiver's HTTP status, or why there was none.
    pub answer: String,
}

fn delivery(now: i64, d: WebhookDeliveryView) -> DeliveryRow {
    DeliveryRow {
        at: When::of(now, crate::clock::parse_rfc3339(&d.at).unwrap_or(now)),
        answer: match (d.status, d.error) {
            (Some(s), _) => format!("HTTP {s}"),
            (None, Some(e)) => e,
            (None, None) => String::new(),
        },
        event: d.event_type,
        seq: d.seq,
        attempt: d.attempt,
        delivered: d.delivered,
    }
}

#[derive(Template)]
#[template(path = "console/webhook.html")]
struct EndpointPage {
    frame: Option<Frame>,
    endpoint: EndpointRow,
    disabled: bool,
    deliveries: Vec<DeliveryRow>,
}

/// One endpoint: its deliveries, and what can be done to it.
pub async fn show(
    State(state): State<AppState>,
    me: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    let now = state.clock.now_ms();
    let (view, log) = deliveries_of(&state, &me.principal.tenant_id, &id).await?;
    Ok(render(
        StatusCode::OK,
        &EndpointPage {
            frame: Some(me.frame()),
            disabled: view.status == WebhookStatus::Disabled,
            endpoint: row(now, view),
            deliveries: log
                .deliveries
                .into_iter()
                .map(|d| delivery(now, d))
                .collect(),
        },
    ))
}

#[derive(Deserialize)]
pub struct RedeliverForm {
    csrf: String,
    seq: i64,
}

impl WithCsrf for RedeliverForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn redeliver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form }: Posted<RedeliverForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    redeliver_one(&state, &me.principal, &id, form.seq).await?;
    Ok(Redirect::to(&format!("/console/webhooks/{id}")).into_response())
}

pub async fn enable(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    enable_one(&state, &me.principal, &id).await?;
    Ok(Redirect::to(&format!("/console/webhooks/{id}")).into_response())
}

pub async fn remove(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only(ADMINS_ONLY)?;
    remove_one(&state, &me.principal, &id).await?;
    Ok(Redirect::to("/console/webhooks").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_says_what_the_receiver_answered_or_why_not() {
        let d = |status, error: Option<&str>| WebhookDeliveryView {
            event_id: "e".into(),
            event_type: "device.pair".into(),
            seq: 3,
            attempt: 1,
            at: "2026-12-06T00:00:00Z".into(),
            delivered: status == Some(200),
            status,
            error: error.map(str::to_string),
        };
        assert_eq!(delivery(0, d(Some(500), None)).answer, "HTTP 500");
        assert_eq!(delivery(0, d(None, Some("timed out"))).answer, "timed out");
    }
}
