//! Rows as stored. Times are Unix milliseconds; `*_hash` fields are SHA-256 hex.

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TenantRecord {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ApiTokenRecord {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    /// `admin` or `agent` (a CHECK constraint keeps it so).
    pub role: String,
    pub token_hash: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub last_used_at: Option<i64>,
    /// The person behind the token: whose own token it is, or (an agent token) the
    /// member whose token created it. `None` for team tokens such as the first
    /// admin token.
    pub member_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeviceRecord {
    pub id: String,
    pub tenant_id: String,
    pub label: String,
    pub browser_name: Option<String>,
    pub browser_version: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub token_hash: String,
    pub previous_hash: Option<String>,
    pub expires_at: i64,
    pub renew_after: i64,
    pub last_seen_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// The member the pairing link was made for: whose browser this is.
    pub owner_id: Option<String>,
}

/// What the node's grant sweep needs of a device: is its grant still good?
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeviceGrant {
    pub id: String,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

impl DeviceRecord {
    /// Whether the grant lets the device authenticate at `now`
    /// (the rule is [`crate::devices::grant::Verdict::of`]).
    pub fn is_live(&self, now: i64) -> bool {
        crate::devices::grant::Verdict::of(Some(self), now) == crate::devices::grant::Verdict::Live
    }
}

/// Which audit rows a listing wants; every field set narrows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Ids below this (the next page).
    pub before: Option<i64>,
    /// This action exactly (`session.call`).
    pub action: Option<String>,
    /// Actions that start with this (`session.`).
    pub action_prefix: Option<String>,
    pub actor: Option<String>,
    pub target: Option<String>,
    pub outcome: Option<String>,
    /// At or after this time (ms).
    pub since: Option<i64>,
    /// Before this time (ms).
    pub until: Option<i64>,
    /// Rows whose detail starts with this: `device:ID` finds the rows about
    /// sessions on that browser (docs/people.md, "Their own audit").
    pub detail_prefix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRecord {
    pub id: i64,
    pub tenant_id: String,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: Option<String>,
}

/// An audit event to write; the store assigns the id and its place in the chain.
/// Read back, it is the part of a [`crate::audit_chain::ChainedRow`] the hash covers.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct NewAuditEvent {
    pub tenant_id: String,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: Option<String>,
}

impl NewAuditEvent {
    /// What its hash in the chain covers.
    pub fn content(&self) -> crate::audit_chain::Content<'_> {
        crate::audit_chain::Content {
            tenant_id: &self.tenant_id,
            at: self.at,
            actor: &self.actor,
            action: &self.action,
            target: &self.target,
            outcome: &self.outcome,
            detail: self.detail.as_deref(),
        }
    }
}

/// A person of a team.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MemberRecord {
    pub id: String,
    pub tenant_id: String,
    pub display_name: String,
    /// Lower case.
    pub email: String,
    /// `owner`, `admin` or `member` (a CHECK constraint keeps it so).
    pub role: String,
    pub created_at: i64,
    pub removed_at: Option<i64>,
}

/// What removing a member ended, so the live connections can be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRemoved {
    pub member: MemberRecord,
    /// Their devices revoked now.
    pub device_ids: Vec<String>,
    /// The API tokens behind them, revoked now.
    pub token_ids: Vec<String>,
    /// Their pairing links not yet used, voided.
    pub pairings_voided: u64,
}
