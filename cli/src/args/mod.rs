//! The `latchkey` command line (docs/agents.md, docs/cli.md).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use latchkey_protocol::policy::Capability;

mod admin;
mod shape;

pub use admin::*;
pub use shape::parse;

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
        /// Server base URL, e.g. https://gw.example.com.
        #[arg(long)]
        url: String,
        /// API token (lk_…) to save; read from the variable when set, so it
        /// never sits in the shell's history.
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
    /// Check an audit export offline: no server, no token.
    #[command(subcommand)]
    Audit(AuditFileCommand),
    #[command(flatten)]
    Tool(ToolCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuditFileCommand {
    /// Check a file from `latchkey admin audit export` against the gateway's
    /// public keys: every row chained, every checkpoint signed; exits 1 naming
    /// the first line that is not.
    VerifyFile {
        /// The export (JSON lines).
        file: std::path::PathBuf,
        /// The public keys, as `latchkey admin audit keys` or `latchkeyd audit
        /// keys` printed them, kept apart from the export.
        #[arg(long)]
        keys: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Open an Agent Window; prints the session id.
    Start {
        /// Browser id, or a unique prefix of it (needed when more than one is online).
        #[arg(long)]
        browser: Option<String>,
        /// Agent Window width in pixels (100 to 7680; with --height).
        #[arg(long, requires = "height")]
        width: Option<u32>,
        /// Agent Window height in pixels (100 to 7680; with --width).
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
        /// The session's id, or a unique prefix of it.
        id: String,
    },
    /// Your open sessions: browser, state, started, last action.
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
        /// The address to open (http or https, as the browser's policy allows).
        #[arg(id = "page_url", value_name = "URL")]
        url: String,
        /// The load phase to wait for.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(WAIT_UNTIL))]
        wait_until: Option<String>,
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// Go back one page in the tab's history.
    Back {
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// Go forward one page in the tab's history.
    Forward {
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// Reload the page.
    Reload {
        /// Bypass the browser's cache.
        #[arg(long)]
        hard: bool,
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// The page as text with @eN element refs.
    Snapshot {
        /// Cut the text to about this many tokens.
        #[arg(long)]
        max_tokens: Option<u32>,
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// The page's HTML (or one element's, with --target), cut at --max-bytes.
    Html {
        /// An element ref from `latchkey snapshot` (e12 or @e12): that element's own HTML.
        #[arg(long)]
        target: Option<String>,
        /// Cut the HTML at this many bytes (the extension's own limit otherwise).
        #[arg(long)]
        max_bytes: Option<u32>,
        /// A tab of the session instead of the active one.
        #[arg(long)]
        tab: Option<i64>,
    },
    /// Click a ref (e12 or @e12) or a CSS selector.
    Click {
        /// An element ref from `latchkey snapshot` (e12 or @e12), or a CSS selector.
        target: String,
    },
    /// Type a value into a field (replacing its content).
    Fill {
        /// An element ref from `latchkey snapshot` (e12 or @e12), or a CSS selector.
        target: String,
        /// The text to put in the field.
        value: String,
    },
    /// Press a key or chord (Enter, Ctrl+A), optionally on a target.
    Press {
        /// A key or chord: Enter, Tab, Escape, ArrowDown, Ctrl+A, …
        key: String,
        /// The element to press it on (a ref or CSS selector); default: the focused one.
        #[arg(long)]
        target: Option<String>,
    },
    /// Choose option values of a <select>.
    Select {
        /// The <select> element: a ref (e12 or @e12) or a CSS selector.
        target: String,
        /// The option values to choose.
        #[arg(required = true)]
        values: Vec<String>,
    },
    /// Move the pointer over an element (menus that open on hover).
    Hover {
        /// An element ref from `latchkey snapshot` (e12 or @e12), or a CSS selector.
        target: String,
    },
    /// Save a PNG of the active tab (or of one element with --target).
    Screenshot {
        /// The file to write the PNG to.
        #[arg(long)]
        out: PathBuf,
        /// An element ref from `latchkey snapshot` (e12 or @e12) to crop to.
        #[arg(long)]
        target: Option<String>,
    },
    /// Evaluate JavaScript in the page (if the browser's owner allows it).
    Evaluate {
        /// A JavaScript expression; its value comes back as JSON.
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
        /// What the person should do, shown to them (e.g. "solve the CAPTCHA").
        #[arg(long)]
        reason: String,
        /// A short title for the request.
        #[arg(long)]
        title: Option<String>,
    },
    /// Any method with JSON params.
    Call {
        /// A method of the catalogue (`latchkey tools`), e.g. tool.tab_list.
        method: String,
        /// Its params as a JSON object.
        #[arg(long, default_value = "{}")]
        params: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TabCommand {
    /// The tabs: the session's own, the person's, or all.
    List {
        /// user, agent or all.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(latchkey_protocol::tools::values::TabScope::NAMES))]
        scope: Option<String>,
    },
    /// Open a tab in the Agent Window.
    Create {
        /// The address to open in it (default: a blank page).
        // A distinct id: `url` is the global server URL.
        #[arg(id = "tab_url", value_name = "URL")]
        url: Option<String>,
        /// Leave the current tab active.
        #[arg(long)]
        background: bool,
    },
    /// Close a tab of the session.
    Close {
        /// The tab's id (`latchkey tab list`).
        id: i64,
    },
    /// Make a tab of the session the active one.
    Select {
        /// The tab's id (`latchkey tab list`).
        id: i64,
    },
    /// Ask the person to lend one of their tabs (they confirm in the browser).
    Borrow {
        /// The person's tab's id (`latchkey tab list --scope user`).
        id: i64,
    },
    /// Give a borrowed tab back to the person.
    Return {
        /// The borrowed tab's id.
        id: i64,
    },
}

/// A capability class by name.
pub fn parse_capability(s: &str) -> Result<Capability, String> {
    Capability::ALL
        .into_iter()
        .find(|c| c.as_str() == s)
        .ok_or_else(|| {
            "a capability is one of session, read, input, navigate, script, borrow".to_string()
        })
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
