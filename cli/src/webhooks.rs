//! `latchkey admin webhooks`: the team's endpoints for signed deliveries of its
//! events (docs/webhooks.md).

use latchkey_protocol::webhooks::{
    CreateWebhookRequest, EVENTS, RedeliverRequest, WebhookCreated, WebhookDeliveryList,
    WebhookDeliveryView, WebhookList, WebhookView,
};
use reqwest::Method;

use crate::args::WebhooksCommand;
use crate::client::{ApiClient, NO_BODY};
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, emit, opt, out, table};
use crate::tools::segment;
use crate::when;

pub async fn run(client: &ApiClient, cmd: WebhooksCommand, json: bool) -> Result<(), CliError> {
    let path = |id: &str, tail: &str| format!("/v1/admin/webhooks/{}{tail}", segment(id));
    match cmd {
        WebhooksCommand::Add {
            endpoint,
            events,
            description,
        } => {
            let body = CreateWebhookRequest {
                url: endpoint,
                events,
                description,
            };
            let created: WebhookCreated = client
                .call(Method::POST, "/v1/admin/webhooks", Some(&body))
                .await?;
            emit(json, &created, || {
                out!(
                    "webhook {} added for {}",
                    cell(&created.view.id),
                    cell(&created.view.events.join(", "))
                );
                out!("signing secret (shown once; verify deliveries with it):");
                out!("  {}", cell(&created.secret));
            })
        }
        WebhooksCommand::List => {
            let list: WebhookList = client
                .call(Method::GET, "/v1/admin/webhooks", NO_BODY)
                .await?;
            emit(json, &list, || endpoints_table(&list.webhooks))
        }
        WebhooksCommand::Events => emit(json, &EVENTS, || {
            for e in EVENTS {
                out!("{e}");
            }
        }),
        WebhooksCommand::Remove { id } => {
            let id = resolve(client, IdKind::Webhook, &id).await?;
            let w: WebhookView = client.call(Method::DELETE, &path(&id, ""), NO_BODY).await?;
            emit(json, &w, || out!("webhook {} removed", cell(&w.id)))
        }
        WebhooksCommand::Deliveries { id } => {
            let id = resolve(client, IdKind::Webhook, &id).await?;
            let list: WebhookDeliveryList = client
                .call(Method::GET, &path(&id, "/deliveries"), NO_BODY)
                .await?;
            emit(json, &list, || deliveries_table(&list.deliveries))
        }
        WebhooksCommand::Redeliver { id, seq } => {
            let id = resolve(client, IdKind::Webhook, &id).await?;
            let d: WebhookDeliveryView = client
                .call(
                    Method::POST,
                    &path(&id, "/redeliver"),
                    Some(&RedeliverRequest { seq }),
                )
                .await?;
            emit(json, &d, || deliveries_table(std::slice::from_ref(&d)))
        }
        WebhooksCommand::Enable { id } => {
            let id = resolve(client, IdKind::Webhook, &id).await?;
            let w: WebhookView = client
                .call(Method::POST, &path(&id, "/enable"), NO_BODY)
                .await?;
            emit(json, &w, || out!("webhook {} delivers again", cell(&w.id)))
        }
    }
}

fn endpoints_table(all: &[WebhookView]) {
    if all.is_empty() {
        out!("no webhooks yet: latchkey admin webhooks add URL --events device.revoke,…");
        return;
    }
    let now = when::now();
    let shown = ids::shorten_each(all, |w| w.id.as_str());
    let rows: Vec<Vec<String>> = all
        .iter()
        .zip(shown)
        .map(|(w, id)| {
            vec![
                id,
                w.url.clone(),
                w.events.join(","),
                format!("{:?}", w.status).to_lowercase(),
                when::relative_opt(w.failing_since.as_deref(), now),
                opt(&w.description),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "URL",
            "EVENTS",
            "STATUS",
            "FAILING SINCE",
            "DESCRIPTION",
        ],
        &rows,
    );
}

fn deliveries_table(all: &[WebhookDeliveryView]) {
    if all.is_empty() {
        out!("no deliveries yet");
        return;
    }
    let now = when::now();
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|d| {
            vec![
                d.seq.to_string(),
                d.event_type.clone(),
                if d.attempt == 0 {
                    "manual".into()
                } else {
                    d.attempt.to_string()
                },
                when::relative(&d.at, now),
                if d.delivered { "delivered" } else { "failed" }.into(),
                d.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(&["SEQ", "EVENT", "ATTEMPT", "AT", "RESULT", "ERROR"], &rows);
}
