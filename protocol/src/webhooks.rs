//! Signed webhooks (docs/webhooks.md): the events a team's endpoints can follow,
//! the API bodies that register and inspect them, and the payload each delivery
//! carries, signed in the Standard Webhooks format.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The events an endpoint can follow: each is an audit action, delivered when its
/// row is committed to the team's trail.
pub const EVENTS: &[&str] = &[
    "device.pair",
    "device.renew",
    "device.revoke",
    "device.revoke_all",
    "device.unpair",
    "device.kill_switch",
    "device.expiring",
    "session.start",
    "session.end",
    "session.help_requested",
    "session.consent_requested",
    "policy.deny",
    "token.create",
    "token.revoke",
    "delegation.create",
    "delegation.revoke",
    "member.add",
    "member.remove",
    "member.role",
    "webhook.disabled",
];

/// Endpoints a team may register.
pub const MAX_ENDPOINTS_PER_TEAM: usize = 20;
/// Longest endpoint URL.
pub const MAX_URL_CHARS: usize = 2048;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 200;

/// `POST /v1/admin/webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookRequest {
    /// Where deliveries are POSTed: `https://` (plain `http://` only where the
    /// operator allows private destinations).
    pub url: String,
    /// Events to deliver, from [`EVENTS`]; at least one.
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub description: Option<String>,
}

/// Whether an endpoint is being delivered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookStatus {
    /// Delivering.
    Active,
    /// The last attempt failed; retrying with backoff.
    Failing,
    /// Failing for 24 hours: stopped until an admin enables it again.
    Disabled,
}

/// One endpoint, never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub description: Option<String>,
    pub status: WebhookStatus,
    pub created_at: String,
    /// The last place of the team's trail handled (delivered or not followed).
    pub delivered_through: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub failing_since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub disabled_at: Option<String>,
}

/// `POST /v1/admin/webhooks` answer: the signing secret, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub view: WebhookView,
    /// `whsec_…`: the Standard Webhooks signing secret.
    pub secret: String,
}

/// `GET /v1/admin/webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// One attempt to deliver one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookDeliveryView {
    /// The `webhook-id` sent: the same for every attempt of the event.
    pub event_id: String,
    pub event_type: String,
    /// The event's place in the team's trail.
    pub seq: i64,
    pub attempt: i64,
    pub at: String,
    pub delivered: bool,
    /// The receiver's HTTP status, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub status: Option<u16>,
    /// Why the attempt failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub error: Option<String>,
}

/// `GET /v1/admin/webhooks/{id}/deliveries`: the last attempts, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookDeliveryList {
    pub deliveries: Vec<WebhookDeliveryView>,
}

/// `POST /v1/admin/webhooks/{id}/redeliver`: send one event again, now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeliverRequest {
    pub seq: i64,
}

/// What a delivery's body holds: the audit row, as the trail has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookPayload {
    /// The event: the audit action.
    #[serde(rename = "type")]
    pub event_type: String,
    /// When the event happened (RFC 3339).
    pub timestamp: String,
    pub data: WebhookEventData,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct WebhookEventData {
    pub team: String,
    /// The row's place in the team's trail (`latchkey admin audit export`).
    pub seq: i64,
    pub actor: String,
    pub target: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub detail: Option<String>,
}
