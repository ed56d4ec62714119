//! The `latchkey` command line (docs/agents.md, docs/cli.md).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use latchkey_protocol::api::{MemberRole, Role};
use latchkey_protocol::policy::Capability;

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";

#[derive(Debug, Parser)]
#[command(
    name = "latchkey",
    version,
    about = "Latchkey: drive a home browser from the cloud, and manage who may"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Server base URL, e.g. https://gw.example.com.
    #[arg(long, global = true, env = "LATCHKEY_URL")]
    pub url: Option<String>,
    /// API token (lk_…). Prefer `latchkey login` or the variable over the flag.
    #[arg(long, global = true, env = "LATCHKEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Saved profile to use (one named that does not exist is an error).
    #[arg(
        long,
        global = true,
        env = "LATCHKEY_PROFILE",
        default_value = DEFAULT_PROFILE
    )]
    pub profile: String,
    /// Print one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Extra PEM CA certificate to trust (for private CAs).
    #[arg(long, global = true, env = "LATCHKEY_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Session for tool commands (from `latchkey session start`).
    #[arg(long, global = true, env = "LATCHKEY_SESSION")]
    pub session: Option<String>,
    /// Deadline of a tool call in milliseconds (default 30000; at most 600000).
    #[arg(long = "timeout-ms", global = true)]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Save a server URL and token as a profile (checked against the server first).
    Login {
        #[arg(long)]
        url: String,
        #[arg(long, env = "LATCHKEY_TOKEN", hide_env_values = true)]
        token: String,
    },
    /// Team administration.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Your own browsers, with your own (member) token: who you are, your
    /// browsers, a pairing link for one, revoking one.
    #[command(subcommand)]
    Me(MeCommand),
    /// Delegation tokens: mint a narrower one from yours, list, revoke.
    #[command(subcommand)]
    Token(crate::delegations::TokenCommand),
    /// List the team's browsers and whether they are online.
    Browsers,
    /// The tool catalogue: every method, its effect, deadline and purpose (`--json`:
    /// with each method's params schema).
    Tools,
    /// Start, stop and list sessions (Agent Windows).
    #[command(subcommand)]
    Session(SessionCommand),
    #[command(flatten)]
    Tool(ToolCommand),
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Open an Agent Window; prints the session id.
    Start {
        /// Browser id (needed when more than one is online).
        #[arg(long)]
        browser: Option<String>,
        #[arg(long, requires = "height")]
        width: Option<u32>,
        #[arg(long, requires = "width")]
        height: Option<u32>,
        /// Bring the Agent Window to the front, taking focus from the browser's
        /// person (by default it opens behind what they are doing).
        #[arg(long)]
        focus: bool,
        /// The default now (the window opens behind); kept for old scripts.
        #[arg(long, hide = true, conflicts_with = "focus")]
        background: bool,
        /// Wait this long for a browser to come online, e.g. 30s (at most 60s).
        #[arg(long, value_parser = parse_ttl)]
        wait_for_browser: Option<u64>,
        /// Why you want the browser: shown to its person when they are asked
        /// first, and kept in the audit trail (at most 200 characters).
        #[arg(long)]
        purpose: Option<String>,
    },
    /// Close the Agent Window, returning borrowed tabs.
    Stop {
        id: String,
    },
    List,
}

/// The load phases a navigation can wait for (docs/protocol.md, "Navigation and waits").
/// The load phases, from the tool catalogue.
const WAIT_UNTIL: &[&str] = latchkey_protocol::tools::values::WaitUntil::NAMES;

/// Tool commands; all need `--session`.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Tabs: list, create, close, select, borrow, return.
    #[command(subcommand)]
    Tab(TabCommand),
    /// Navigate the active tab (or --tab).
    Navigate {
        #[arg(id = "page_url", value_name = "URL")]
        url: String,
        /// The load phase to wait for.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(WAIT_UNTIL))]
        wait_until: Option<String>,
        #[arg(long)]
        tab: Option<i64>,
    },
    Back {
        #[arg(long)]
        tab: Option<i64>,
    },
    Forward {
        #[arg(long)]
        tab: Option<i64>,
    },
    Reload {
        #[arg(long)]
        hard: bool,
        #[arg(long)]
        tab: Option<i64>,
    },
    /// The page as text with @eN element refs.
    Snapshot {
        #[arg(long)]
        max_tokens: Option<u32>,
        #[arg(long)]
        tab: Option<i64>,
    },
    /// Click a ref (e12 or @e12) or a CSS selector.
    Click {
        target: String,
    },
    /// Type a value into a field (replacing its content).
    Fill {
        target: String,
        value: String,
    },
    /// Press a key or chord (Enter, Ctrl+A), optionally on a target.
    Press {
        key: String,
        #[arg(long)]
        target: Option<String>,
    },
    /// Choose option values of a <select>.
    Select {
        target: String,
        #[arg(required = true)]
        values: Vec<String>,
    },
    Hover {
        target: String,
    },
    /// Save a PNG of the active tab (or of one element with --target).
    Screenshot {
        #[arg(long)]
        out: PathBuf,
        /// An element ref from `latchkey snapshot` (e12 or @e12) to crop to.
        #[arg(long)]
        target: Option<String>,
    },
    /// Evaluate JavaScript in the page (if the browser's owner allows it).
    Evaluate {
        expression: String,
    },
    /// Wait for the tab to reach a load phase.
    WaitForNavigation {
        /// The load phase to wait for.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(WAIT_UNTIL))]
        wait_until: Option<String>,
    },
    /// Hand the page to the person (CAPTCHA, MFA, QR code) and wait for them.
    RequestHelp {
        #[arg(long)]
        reason: String,
        #[arg(long)]
        title: Option<String>,
    },
    /// Any method with JSON params.
    Call {
        method: String,
        #[arg(long, default_value = "{}")]
        params: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TabCommand {
    List {
        /// user, agent or all.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(latchkey_protocol::tools::values::TabScope::NAMES))]
        scope: Option<String>,
    },
    Create {
        /// (A distinct id: `url` is the global server URL.)
        #[arg(id = "tab_url", value_name = "URL")]
        url: Option<String>,
        #[arg(long)]
        background: bool,
    },
    Close {
        id: i64,
    },
    Select {
        id: i64,
    },
    /// Ask the person to lend one of their tabs (they confirm in the browser).
    Borrow {
        id: i64,
    },
    Return {
        id: i64,
    },
}

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
        /// The member (mem_…) whose browser this link pairs.
        #[arg(long)]
        member: Option<String>,
        /// Print only the link, for scripts.
        #[arg(long, short)]
        quiet: bool,
    },
    /// The people of the team: list, add, remove.
    #[command(subcommand)]
    Members(MembersCommand),
    /// List devices with owner, status and expiry.
    Devices,
    /// Rename a device.
    Rename { id: String, label: String },
    /// Revoke a device (its live connection closes at once), or all with --all.
    Revoke {
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Revoke every device of the team and void unused pairing links.
        #[arg(long)]
        all: bool,
    },
    /// Take a revoked or expired device off the list (a revoked local browser can
    /// then connect again as a new device).
    Forget { id: String },
    /// API tokens.
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// The team's policy, or one browser's (docs/policy.md).
    #[command(subcommand)]
    Policy(AdminPolicyCommand),
    /// The audit trail, newest first.
    Audit {
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
pub enum TokensCommand {
    /// Create a token; its secret is printed once.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Lifetime, e.g. 30d, 12h; none means no expiry.
        #[arg(long, value_parser = parse_ttl)]
        ttl: Option<u64>,
        /// An admin or member token: the member (mem_…) whose own token it is.
        #[arg(long)]
        member: Option<String>,
        /// Print only the secret, for scripts:
        /// `export LATCHKEY_TOKEN=$(latchkey admin tokens create --name a --role agent --quiet)`.
        #[arg(long, short)]
        quiet: bool,
    },
    List,
    Revoke {
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum MembersCommand {
    /// The team's members.
    List,
    /// Add a member.
    Add {
        #[arg(long)]
        name: String,
        #[arg(long)]
        email: String,
        /// owner, admin or member (default member).
        #[arg(long, value_parser = parse_member_role, default_value = "member")]
        role: MemberRole,
    },
    /// Remove a member: their browsers and the API tokens behind them are revoked
    /// at once, their unused pairing links voided.
    Remove { id: String },
}

#[derive(Debug, Subcommand)]
pub enum MeCommand {
    /// Who the token's person is.
    Show,
    /// Your browsers.
    Devices,
    /// A one-time pairing link for a browser of yours.
    Pair {
        #[arg(long)]
        label: Option<String>,
        /// Link lifetime, e.g. 90s, 5m, 1h (at most 1h).
        #[arg(long, value_parser = parse_pairing_ttl)]
        ttl: Option<u64>,
    },
    /// Revoke a browser of yours: its live connection closes at once.
    Revoke { id: String },
    /// The policy of a browser of yours (docs/policy.md).
    #[command(subcommand)]
    Policy(MePolicyCommand),
}

#[derive(Debug, Subcommand)]
pub enum AdminPolicyCommand {
    /// Show the team's policy, or a browser's with --device.
    Show {
        /// A browser's policy instead of the team's.
        #[arg(long)]
        device: Option<String>,
        /// Also what sessions run under, and where each limit came from.
        #[arg(long)]
        effective: bool,
    },
    /// Replace the team's policy, or a browser's with --device: limits not
    /// given are lifted at that layer.
    Set {
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
        id: String,
        #[arg(long)]
        effective: bool,
    },
    /// Replace a browser's policy (within the team's): limits not given are lifted.
    Set {
        id: String,
        #[command(flatten)]
        policy: PolicyArgs,
    },
}

/// A policy from flags; every limit left out is not set at this layer.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// Only these agent tokens (ids, comma-separated) may start sessions.
    #[arg(long, value_delimiter = ',')]
    pub agents: Option<Vec<String>>,
    /// allow (start without asking) or deny (no sessions).
    #[arg(long, value_parser = ["allow", "deny"])]
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

fn parse_capability(s: &str) -> Result<Capability, String> {
    Capability::ALL
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| {
            "a capability is one of session, read, input, navigate, script, borrow".to_string()
        })
}

fn parse_member_role(s: &str) -> Result<MemberRole, String> {
    MemberRole::parse(s).ok_or_else(|| "role must be owner, admin or member".to_string())
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| "role must be agent, admin or member".to_string())
}

/// `90s`, `5m`, `1h`, `30d` → seconds. A bare number is refused: `10` could be
/// ten seconds or ten days, and a token's lifetime is no place to guess.
pub fn parse_ttl(s: &str) -> Result<u64, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 5m, 1h, 30d"))?;
    let mult = match unit {
        "" => return Err(format!("{s:?} has no unit: write {n}s, {n}m, {n}h or {n}d")),
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: unit must be s, m, h or d")),
    };
    n.checked_mul(mult)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{s:?} is out of range"))
}

/// The longest a pairing link lives (the server refuses more).
const MAX_PAIRING_TTL_SECS: u64 = 3600;

/// A pairing link's lifetime: a duration of at most 1h, refused here before
/// anything is sent.
pub fn parse_pairing_ttl(s: &str) -> Result<u64, String> {
    let secs = parse_ttl(s)?;
    if secs > MAX_PAIRING_TTL_SECS {
        return Err(format!("{s:?}: a pairing link lives at most 1h"));
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_parsing() {
        assert_eq!(parse_ttl("90s"), Ok(90));
        assert!(parse_ttl("10").is_err_and(|e| e.contains("no unit")));
        assert_eq!(parse_pairing_ttl("1h"), Ok(3600));
        assert!(parse_pairing_ttl("2h").is_err_and(|e| e.contains("at most 1h")));
        assert_eq!(parse_ttl("5m"), Ok(300));
        assert_eq!(parse_ttl("1h"), Ok(3600));
        assert_eq!(parse_ttl("30d"), Ok(2_592_000));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("5w").is_err());
        assert!(parse_ttl("m").is_err());
    }
}
