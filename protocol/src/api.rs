//! Bodies of the admin HTTP API (docs/agents.md, docs/cli.md). Timestamps are RFC 3339 strings.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// Role of an API token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Manages devices, tokens and pairings of its tenant; may also act as an agent.
    Admin,
    /// Drives browsers through sessions.
    Agent,
    /// A person's own token: manages that member's own browsers (`/v1/me`), and
    /// nothing else (docs/people.md).
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Agent => "agent",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "agent" => Some(Role::Agent),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// `POST /v1/admin/pairings`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePairingRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub label: Option<String>,
    /// Link lifetime in seconds: 1 … 3600, default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ttl_secs: Option<u64>,
    /// The member the browser will belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub member_id: Option<String>,
}

/// A new pairing link. The secret in its fragment is shown only here, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct PairingCreated {
    pub id: String,
    pub link: String,
    pub expires_at: String,
}

/// A pairing link not yet used: `GET /v1/admin/pairings` lists them, `DELETE
/// /v1/admin/pairings/{id}` voids one. Never its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct PendingPairingView {
    pub id: String,
    /// The label the device will get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub label: Option<String>,
    /// The member whose browser it will pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub member: Option<MemberRef>,
    /// The API token that made it, by name.
    pub created_by: String,
    pub created_at: String,
    pub expires_at: String,
}

/// `GET /v1/admin/pairings`: the team's unused, unexpired links, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct PairingList {
    pub pairings: Vec<PendingPairingView>,
}

/// Lifecycle state of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeviceStatus {
    Active,
    Expired,
    Revoked,
}

/// A device as an admin sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DeviceView {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browser_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub browser_version: Option<String>,
    /// The member whose browser this is (the one its pairing link was made for);
    /// absent for a link made for no one, and in local mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub owner: Option<MemberRef>,
    /// The API token that made the pairing link, by name (`local` in local mode).
    pub created_by: String,
    pub created_at: String,
    pub expires_at: String,
    pub renew_after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub last_seen_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub revoked_at: Option<String>,
    pub status: DeviceStatus,
    /// Whether the device has a live, handshaken connection on this node.
    pub online: bool,
}

/// `GET /v1/admin/devices`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DeviceList {
    pub devices: Vec<DeviceView>,
}

/// `PATCH /v1/admin/devices/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameDeviceRequest {
    pub label: String,
}

/// `POST /v1/admin/devices/{id}/forget`: the device is off the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct ForgetResult {
    pub id: String,
    pub forgotten: bool,
}

/// `POST /v1/admin/devices/revoke-all`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct RevokeAllResult {
    pub revoked_devices: u64,
    pub voided_pairings: u64,
}

/// `POST /v1/admin/tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTokenRequest {
    pub name: String,
    pub role: Role,
    /// Lifetime in seconds; absent means no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ttl_secs: Option<u64>,
    /// An admin or member token: the member whose own token it is (required for a
    /// member token). An agent token instead records the member behind the token
    /// that creates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub member_id: Option<String>,
}

/// An API token as listed; never carries the secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct TokenView {
    pub id: String,
    pub name: String,
    pub role: Role,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub revoked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub last_used_at: Option<String>,
    /// The person behind the token: whose own token it is, or who created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub member_id: Option<String>,
}

/// A freshly created token: the secret is shown only here, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct TokenCreated {
    #[serde(flatten)]
    pub view: TokenView,
    pub token: String,
}

/// `GET /v1/admin/tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
}

/// One audit record: metadata only, never a parameter value or a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct AuditEventView {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub detail: Option<String>,
}

/// `GET /v1/admin/audit?before=ID&limit=N`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct AuditList {
    pub events: Vec<AuditEventView>,
    /// Pass as `before` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub next_before: Option<i64>,
}

/// `GET` and `PUT /v1/admin/audit/retention`: how long the team keeps its audit
/// rows (docs/operations.md, "Retention").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct AuditRetention {
    /// Days rows are kept before they are pruned (up to a signed checkpoint).
    pub days: u32,
    /// Whether that is the gateway's default rather than the team's own setting.
    pub is_default: bool,
}

/// `PUT /v1/admin/audit/retention`: days (1..=3660), or null for the gateway's
/// default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetAuditRetention {
    /// Required, even as null: a body without it is a mistake, not a reset.
    #[serde(deserialize_with = "Option::deserialize")]
    pub days: Option<u32>,
}

/// A member's role in the team (docs/people.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, TS, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    Owner,
    Admin,
    #[default]
    Member,
}

impl MemberRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberRole::Owner => "owner",
            MemberRole::Admin => "admin",
            MemberRole::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<MemberRole> {
        match s {
            "owner" => Some(MemberRole::Owner),
            "admin" => Some(MemberRole::Admin),
            "member" => Some(MemberRole::Member),
            _ => None,
        }
    }
}

/// `POST /v1/admin/members`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMemberRequest {
    pub display_name: String,
    pub email: String,
    /// Default `member`.
    #[serde(default)]
    #[ts(as = "Option<MemberRole>", optional)]
    pub role: MemberRole,
}

/// `PATCH /v1/admin/members/{id}`: what changes about a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemberRequest {
    /// The member's new role: what they may do when they sign in to the console
    /// as themselves (docs/people.md, "Roles").
    pub role: MemberRole,
}

/// A member of the team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct MemberView {
    pub id: String,
    pub display_name: String,
    pub email: String,
    pub role: MemberRole,
    pub created_at: String,
}

/// `POST /v1/me/pairings`: a link for one of the caller's own browsers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOwnPairingRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub label: Option<String>,
    /// Link lifetime in seconds: 1 … 3600, default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub ttl_secs: Option<u64>,
}

/// Who a browser belongs to, as a device lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct MemberRef {
    pub id: String,
    pub display_name: String,
    pub email: String,
}

/// `GET /v1/admin/members`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct MemberList {
    pub members: Vec<MemberView>,
}

/// `DELETE /v1/admin/members/{id}`: what the removal ended, at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct MemberRemovedView {
    pub id: String,
    /// Their browsers, revoked (live connections closed with 4001).
    pub revoked_devices: Vec<String>,
    /// The API tokens behind them, revoked (live sockets closed with 4006).
    pub revoked_tokens: Vec<String>,
    pub voided_pairings: u64,
}

/// `GET` / `PUT` `/v1/admin/policy`, `/v1/admin/devices/{id}/policy` and
/// `/v1/me/devices/{id}/policy` (docs/policy.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct PolicyView {
    /// Whose policy this is: the team's, or one browser's.
    pub scope: crate::policy::Layer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub device_id: Option<String>,
    /// The policy as set at this layer (`{}`: no limit here).
    pub policy: crate::policy::Policy,
    /// With `?effective=true`: what sessions run under, and where each limit
    /// came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub effective: Option<crate::policy::EffectivePolicy>,
    /// After a `PUT`: how many open sessions the new policy ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub sessions_ended: Option<u32>,
}
