//! The admin's and the member's commands: `latchkey admin …` and `latchkey me …`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use latchkey_protocol::api::{MemberRole, Role};
use latchkey_protocol::policy::Capability;

use super::{parse_capability, parse_pairing_ttl, parse_ttl};

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a one-time pairing link for a browser.
    Pair {
        /// Label the device will get.
        #[arg(long)]
        label: Option<String>,
        /// Link lifetime, e.g. 90s, 5m, 1h (at most 1h).
        #[arg(long, value_parser = parse_pairing_ttl)]
        ttl: Option<u64>,
        /// The member whose browser this link pairs: their id (mem_…, or a unique
        /// prefix) or email address.
        #[arg(long)]
        member: Option<String>,
        /// Print only the link, for scripts.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Webhook endpoints: signed deliveries of the team's events (docs/webhooks.md).
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Pending pairing links: list them (the default), or void one before it is used.
    Pairings {
        #[command(subcommand)]
        command: Option<PairingsCommand>,
    },
    /// Sessions on the team's browsers: list them (the default), or stop one.
    Sessions {
        #[command(subcommand)]
        command: Option<TeamSessionsCommand>,
    },
    /// The people of the team: list, add, remove.
    #[command(subcommand)]
    Members(MembersCommand),
    /// List devices with owner, status and expiry.
    Devices,
    /// Rename a device.
    Rename {
        /// The device's id, or a unique prefix of it.
        id: String,
        /// Its new label (at most 100 characters).
        label: String,
    },
    /// Revoke a device (its live connection closes at once), or all with --all.
    Revoke {
        /// The device's id, or a unique prefix of it.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Revoke every device of the team and void unused pairing links.
        #[arg(long)]
        all: bool,
    },
    /// Take a revoked or expired device off the list (a revoked local browser can
    /// then connect again as a new device).
    Forget {
        /// The device's id, or a unique prefix of it.
        id: String,
    },
    /// API tokens.
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// The team's policy, or one browser's (docs/policy.md).
    #[command(subcommand)]
    Policy(AdminPolicyCommand),
    /// The audit trail, newest first; or export it, print its keys, set how
    /// long it is kept.
    #[command(args_conflicts_with_subcommands = true)]
    Audit {
        #[command(subcommand)]
        command: Option<AuditCommand>,
        /// Rows to show, newest first (at most 500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Only events older than this id (for paging).
        #[arg(long)]
        before: Option<i64>,
        #[command(flatten)]
        filter: crate::admin::AuditFilterArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The team's trail as JSON lines on standard output, oldest first, running
    /// to a signed checkpoint: to keep, and to check offline with `latchkey audit
    /// verify-file`.
    Export {
        /// From this long ago (`30d`, `2h`) or this RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// Up to this long ago or this RFC 3339 time (then on to the next
        /// checkpoint, so the last rows are signed too).
        #[arg(long)]
        until: Option<String>,
    },
    /// The gateway's public audit keys as JSON: save them apart from the export
    /// for `latchkey audit verify-file --keys`.
    Keys,
    /// How long the team keeps audit rows; with DAYS, set it (`default`: the
    /// gateway's default).
    Retention {
        /// Days (1 to 3660), or `default`.
        days: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register an endpoint; its signing secret is printed once.
    Add {
        /// Where deliveries are POSTed (https://). (Not `url`: that names the
        /// server, a flag every command takes.)
        #[arg(value_name = "URL")]
        endpoint: String,
        /// Events to deliver, comma-separated (`latchkey admin webhooks events`).
        #[arg(long, value_delimiter = ',', required = true)]
        events: Vec<String>,
        /// What it is for, shown in the list.
        #[arg(long)]
        description: Option<String>,
    },
    /// The team's endpoints, with their status (never their secrets).
    List,
    /// The events an endpoint can follow.
    Events,
    /// Remove an endpoint.
    Remove {
        /// The endpoint's id (wh_…), or a unique prefix of it.
        id: String,
    },
    /// The endpoint's last delivery attempts, newest first.
    Deliveries {
        /// The endpoint's id, or a unique prefix of it.
        id: String,
    },
    /// Send one event to the endpoint again, now.
    Redeliver {
        /// The endpoint's id, or a unique prefix of it.
        id: String,
        /// The event's place in the trail (`seq` in its delivery or payload).
        seq: i64,
    },
    /// Deliver again to an endpoint that was disabled, from where it stopped.
    Enable {
        /// The endpoint's id, or a unique prefix of it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PairingsCommand {
    /// The team's unused, unexpired links, newest first (never their secrets).
    List,
    /// Void a link: it can never pair a browser afterwards.
    Void {
        /// The link's id (pair_…), or a unique prefix of it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TeamSessionsCommand {
    /// Every session on the team's browsers: browser, agent, state, started, last action.
    List,
    /// Stop a session: its Agent Window closes, borrowed tabs go back, and its agent
    /// is told `session_ended` (`stopped_by_admin`).
    Stop {
        /// The session's id, or a unique prefix of it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create a token; its secret is printed once.
    Create {
        /// A name for it, shown in the audit trail (`token:<name>`).
        #[arg(long)]
        name: String,
        /// agent (drives browsers), admin (runs the team) or member (a person's own).
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Lifetime, e.g. 30d, 12h; none means no expiry.
        #[arg(long, value_parser = parse_ttl)]
        ttl: Option<u64>,
        /// An admin or member token: the member whose own token it is (id, unique
        /// prefix or email address).
        #[arg(long)]
        member: Option<String>,
        /// Print only the secret, for scripts:
        /// `export LATCHKEY_TOKEN=$(latchkey admin tokens create --name a --role agent --quiet)`.
        #[arg(long, short)]
        quiet: bool,
    },
    /// The team's tokens: role, created, expiry, last use.
    List,
    /// Revoke a token: sessions and sockets it opened end at once.
    Revoke {
        /// The token's id (tok_…), or a unique prefix of it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// The team's members.
    List,
    /// Add a member.
    Add {
        /// Their name, as the team knows them.
        #[arg(long)]
        name: String,
        /// Their email address (one live member per address).
        #[arg(long)]
        email: String,
        /// owner, admin or member (default member).
        #[arg(long, value_parser = parse_member_role, default_value = "member")]
        role: MemberRole,
    },
    /// Change a member's role: what they may do when they sign in to the console
    /// as themselves (single sign-on). The team's last owner stays an owner.
    SetRole {
        /// The member's id (mem_…), or a unique prefix of it.
        id: String,
        /// owner, admin or member.
        #[arg(value_parser = parse_member_role)]
        role: MemberRole,
    },
    /// Remove a member: their browsers and the API tokens behind them are revoked
    /// at once, their unused pairing links voided.
    Remove {
        /// The member's id (mem_…), or a unique prefix of it.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum MeCommand {
    /// Who the token's person is.
    Show,
    /// Your browsers.
    Devices,
    /// A one-time pairing link for a browser of yours.
    Pair {
        /// Label the device will get.
        #[arg(long)]
        label: Option<String>,
        /// Link lifetime, e.g. 90s, 5m, 1h (at most 1h).
        #[arg(long, value_parser = parse_pairing_ttl)]
        ttl: Option<u64>,
    },
    /// Revoke a browser of yours: its live connection closes at once.
    Revoke {
        /// The device's id, or a unique prefix of it.
        id: String,
    },
    /// The agent sessions open now on your browsers.
    Sessions,
    /// End an agent session on a browser of yours, as Stop in the browser does:
    /// the agent is told `user_stopped`.
    End {
        /// The session's id, or a unique prefix of it.
        id: String,
    },
    /// The policy of a browser of yours (docs/policy.md).
    #[command(subcommand)]
    Policy(MePolicyCommand),
    /// What the audit trail says about your browsers, newest first; given a
    /// session, every action it took on them.
    Audit {
        /// One session on your browsers (its id, or a unique prefix of a live one).
        #[arg(id = "audit_session", value_name = "SESSION")]
        session: Option<String>,
        /// Rows per page (1..=1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Rows before this id (the `--before` a previous page printed).
        #[arg(long)]
        before: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminPolicyCommand {
    /// Show the team's policy, or a browser's with --device.
    Show {
        /// A browser's policy instead of the team's (its id, or a unique prefix).
        #[arg(long)]
        device: Option<String>,
        /// Also what sessions run under, and where each limit came from.
        #[arg(long)]
        effective: bool,
    },
    /// Replace the team's policy, or a browser's with --device: limits not
    /// given are lifted at that layer.
    Set {
        /// A browser's policy instead of the team's (its id, or a unique prefix).
        #[arg(long)]
        device: Option<String>,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum MePolicyCommand {
    /// Show a browser's policy.
    Show {
        /// The device's id, or a unique prefix of it.
        id: String,
        /// Also what sessions run under, and where each limit came from.
        #[arg(long)]
        effective: bool,
    },
    /// Replace a browser's policy (within the team's): limits not given are lifted.
    Set {
        /// The device's id, or a unique prefix of it.
        id: String,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

/// A policy from flags; every limit left out is not set at this layer.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// Only these agent tokens (ids or unique prefixes, comma-separated) may start sessions.
    #[arg(long, value_delimiter = ',')]
    pub agents: Option<Vec<String>>,
    /// allow (start without asking), ask (the browser's person confirms each new
    /// session) or deny (no sessions).
    #[arg(long, value_parser = latchkey_protocol::policy::Consent::NAMES)]
    pub consent: Option<String>,
    /// Only hosts matching these patterns (example.com, *.example.com, *).
    #[arg(long, value_delimiter = ',')]
    pub allow_sites: Option<Vec<String>>,
    /// Never hosts matching these patterns.
    #[arg(long, value_delimiter = ',')]
    pub block_sites: Option<Vec<String>>,
    /// URL schemes allowed (default http,https).
    #[arg(long, value_delimiter = ',')]
    pub schemes: Option<Vec<String>>,
    /// Capability classes granted: read, input, navigate, script, borrow.
    #[arg(long, value_delimiter = ',', value_parser = parse_capability)]
    pub capabilities: Option<Vec<Capability>>,
    /// The longest a session may last, e.g. 30m, 2h.
    #[arg(long, value_parser = parse_ttl)]
    pub max_session: Option<u64>,
    /// The whole policy as a JSON file (- for standard input), instead of flags.
    #[arg(long, conflicts_with_all = ["agents", "consent", "allow_sites", "block_sites", "schemes", "capabilities", "max_session"])]
    pub file: Option<PathBuf>,
}

fn parse_member_role(s: &str) -> Result<MemberRole, String> {
    MemberRole::parse(s).ok_or_else(|| "role must be owner, admin or member".to_string())
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| "role must be agent, admin or member".to_string())
}
