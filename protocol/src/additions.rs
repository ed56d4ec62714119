//! Latchkey's additions to the extension protocol (docs/protocol.md, "Latchkey's
//! additions"): what our extension can do beyond the BrowserSkill 1.x contract,
//! and the frames that use it.
//!
//! The contract's tolerance rule (unknown keys are ignored at every level) lets
//! these ride on frames a contract-only peer already understands. Nothing here
//! is ever sent to a peer that did not ask for it: the extension lists what it
//! can do in its handshake (`latchkey_features`), and the gateway adds a field
//! or sends a frame only for a feature listed there. An extension that lists
//! nothing is driven by the base contract alone, and the gateway says so
//! wherever that weakens a promise (a consent it cannot ask for refuses the
//! session; site rules it cannot enforce are enforced only where the gateway
//! sees the URL).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::policy::{Capability, PolicyReason};

/// The extension enforces `site_rules` in its Agent Windows: it stops any
/// navigation to a host the rules refuse, whoever started it, and reports it.
pub const FEATURE_SITE_RULES: &str = "site_rules";
/// The extension asks its person before a session starts when the start
/// carries `consent`, and answers with the person's decision.
pub const FEATURE_CONSENT: &str = "consent";
/// The extension shows its person which agent drives each session: the start
/// carries `agent` ([`SessionAgent`]), and a stop carries its `reason`.
pub const FEATURE_AGENT_INFO: &str = "agent_info";
/// The extension's `tool.click` reads [`CLICK_CHECKED`] on a checkbox, a radio
/// button or a switch: it clicks only when the element's state is not the one
/// asked for, and answers with the state it is in after. A contract-only
/// extension would ignore the param and click (toggle) regardless, so the
/// gateway refuses the param for a browser that does not list this.
pub const FEATURE_SET_CHECKED: &str = "set_checked";
/// `tool.click`'s param under [`FEATURE_SET_CHECKED`] (a bool: the state to
/// leave the element in), and the key of the state after in its answer.
pub const CLICK_CHECKED: &str = "latchkey_checked";
/// Every feature this gateway knows, in the order the docs list them.
pub const FEATURES: [&str; 4] = [
    FEATURE_SITE_RULES,
    FEATURE_CONSENT,
    FEATURE_AGENT_INFO,
    FEATURE_SET_CHECKED,
];
/// At most this many entries of `latchkey_features` are read; more are ignored.
pub const MAX_FEATURES: usize = 16;

/// Event: the extension stopped an agent tab on its way to a host the
/// session's site rules refuse. Sent only in a session whose start carried
/// `site_rules`, so a gateway that does not know it never receives it.
pub const EVENT_SITE_BLOCKED: &str = "latchkey.site_blocked";
/// Event: the person pressed "Stop all agents" in our extension, which closes
/// the connection right after. Sent only to a gateway whose handshake answer
/// lists [`GATEWAY_FEATURE_KILL_SWITCH`]; the sessions then end with reason
/// `kill_switch`, not as a plain disconnect.
pub const EVENT_KILL_SWITCH: &str = "latchkey.kill_switch";
/// The gateway's handshake answer lists this in `latchkey_features`: it reads
/// [`EVENT_KILL_SWITCH`].
pub const GATEWAY_FEATURE_KILL_SWITCH: &str = "kill_switch";
/// Event `{session_id}`: the person pressed Stop on an Agent Window, and the
/// extension has already ended the session on its side (borrowed tabs given
/// back, window closed). The gateway drops the session without
/// `tool.session_stop` and ends it with reason `user_stopped`. Sent only to a
/// gateway listing [`GATEWAY_FEATURE_USER_STOP`]; to any other the extension
/// reports the same end as `session.window_closed`, which the contract defines.
pub const EVENT_USER_STOP: &str = "latchkey.user_stop";
/// The gateway's handshake answer lists this: it reads [`EVENT_USER_STOP`].
pub const GATEWAY_FEATURE_USER_STOP: &str = "user_stop";
/// The gateway's handshake answer lists this: a device may end its own
/// pairing with `DELETE /extension/device` (docs/protocol.md, "Latchkey's
/// additions"), so "Forget this server" removes it on the server too.
pub const GATEWAY_FEATURE_UNPAIR: &str = "unpair";
/// What this gateway lists in its handshake answer.
pub const GATEWAY_FEATURES: [&str; 3] = [
    GATEWAY_FEATURE_KILL_SWITCH,
    GATEWAY_FEATURE_USER_STOP,
    GATEWAY_FEATURE_UNPAIR,
];

/// How long our extension waits for the person to answer a borrow
/// confirmation unless they set otherwise (the contract's 5 s is too short for
/// someone away from the screen). The gateway's default deadline for
/// `tool.tab_borrow` is longer still, so the browser's own answer arrives first.
pub const BORROW_CONFIRM_MS: u64 = 60_000;

/// Request: the session's site rules changed (a policy was written while it
/// ran); the extension answers `{}` and enforces the new rules from then on.
pub const SESSION_RULES: &str = "latchkey.session_rules";

/// How long the person has to answer a consent prompt; silence denies.
pub const CONSENT_TIMEOUT_MS: u64 = 60_000;
/// The longest allowance a person can grant from the prompt, in hours.
pub const MAX_ALLOWANCE_HOURS: u32 = 24;
/// The longest `purpose` an agent may give, in characters.
pub const MAX_PURPOSE_CHARS: usize = 200;
/// The longest host the extension reports in `latchkey.site_blocked`.
pub const MAX_REPORTED_HOST_CHARS: usize = 253;

/// The site rules of a session's effective policy, as the extension enforces
/// them (param `site_rules` of `tool.session_start`, and of
/// `latchkey.session_rules`). Patterns are canonical (docs/policy.md, "Where"):
/// the extension matches them exactly as `policy::sites::matches` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SiteRules {
    /// Each layer's allow list: a host must match a pattern of every list.
    /// Empty: any host not blocked.
    pub allow_lists: Vec<Vec<String>>,
    /// Hosts never opened; they win over `allow_sites`.
    pub block_sites: Vec<String>,
    /// The URL schemes a page may have. The extension's own pages and
    /// `about:blank` are always allowed.
    pub schemes: Vec<String>,
}

/// What the person is asked before a session starts (param `consent` of
/// `tool.session_start`). Every string was cleaned by the gateway; the
/// extension shows it as text, never as markup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct ConsentRequest {
    /// The agent token's id: what a remembered allowance is keyed by.
    pub agent_id: String,
    /// The agent's name, as its team named its token.
    pub agent: String,
    /// The team the agent belongs to.
    pub team: String,
    /// Why the agent wants the browser, in its own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub purpose: Option<String>,
    /// The capability classes the session would have.
    pub capabilities: Vec<Capability>,
    /// How long the person has to answer; no answer denies.
    #[ts(type = "number")]
    pub timeout_ms: u64,
}

/// Who drives a session (param `agent` of `tool.session_start`, to an
/// extension listing [`FEATURE_AGENT_INFO`]): what its banner and popup show.
/// Every string was cleaned by the gateway; the extension shows it as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SessionAgent {
    /// The agent token's id.
    pub agent_id: String,
    /// The agent's name, as its team named its token.
    pub name: String,
    /// The team the agent belongs to.
    pub team: String,
    /// Why the agent wants the browser, in its own words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub purpose: Option<String>,
}

/// The device as the team knows it (`latchkey_device` of the handshake
/// answer, to an extension listing [`FEATURE_AGENT_INFO`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct DeviceInfo {
    /// Its name in the team's device list (the admin may have renamed it).
    pub label: String,
    /// The name of the team it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub team: Option<String>,
}

/// How the person let a session in (`consent` in `tool.session_start`'s
/// result, when the start asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConsentGiven {
    /// Allowed this once.
    Once,
    /// Allowed now and for the hours that follow (the allowance is remembered
    /// in the extension, where the person can withdraw it).
    ForHours,
    /// An allowance given earlier covered it; nobody was asked.
    Remembered,
}

impl ConsentGiven {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::ForHours => "for_hours",
            Self::Remembered => "remembered",
        }
    }
}

impl SiteRules {
    /// The site rules of `policy`.
    pub fn of(policy: &crate::policy::EffectivePolicy) -> Self {
        Self {
            allow_lists: policy
                .allow_sites
                .iter()
                .map(|l| l.patterns.clone())
                .collect(),
            block_sites: policy
                .block_sites
                .iter()
                .map(|b| b.pattern.clone())
                .collect(),
            schemes: policy.schemes.value.clone(),
        }
    }
}

/// Payload of `latchkey.site_blocked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SiteBlocked {
    pub session_id: String,
    pub tab_id: i64,
    /// The host (or, for a refused scheme, the scheme) the tab was headed to.
    pub host: String,
    /// `site_blocked`, `site_not_allowed` or `scheme_not_allowed`.
    pub reason: PolicyReason,
    /// The `block_sites` pattern that matched, for `site_blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub pattern: Option<String>,
}

/// The features of `latchkey_features` this gateway knows; the rest, and
/// anything past [`MAX_FEATURES`], are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    pub site_rules: bool,
    pub consent: bool,
    pub agent_info: bool,
    pub set_checked: bool,
}

impl Features {
    /// Read a handshake's list.
    pub fn of(list: Option<&[String]>) -> Self {
        let mut f = Self::default();
        for name in list.unwrap_or_default().iter().take(MAX_FEATURES) {
            match name.as_str() {
                FEATURE_SITE_RULES => f.site_rules = true,
                FEATURE_CONSENT => f.consent = true,
                FEATURE_AGENT_INFO => f.agent_info = true,
                FEATURE_SET_CHECKED => f.set_checked = true,
                _ => {}
            }
        }
        f
    }

    /// The names of those present, for logs and the browser list.
    pub fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.site_rules {
            out.push(FEATURE_SITE_RULES);
        }
        if self.consent {
            out.push(FEATURE_CONSENT);
        }
        if self.agent_info {
            out.push(FEATURE_AGENT_INFO);
        }
        if self.set_checked {
            out.push(FEATURE_SET_CHECKED);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_read_known_names_only_and_a_bounded_list() {
        let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(Features::of(None), Features::default());
        let f = Features::of(Some(&list(&["consent", "telepathy", "site_rules"])));
        assert!(f.consent && f.site_rules && !f.agent_info && !f.set_checked);
        assert_eq!(f.names(), vec!["site_rules", "consent"]);
        let all = Features::of(Some(&list(&FEATURES)));
        assert_eq!(all.names(), FEATURES);
        assert_eq!(Features::of(Some(&list(&FEATURES))).names(), FEATURES);
        let mut long = list(&["x"; MAX_FEATURES]);
        long.push("consent".into());
        assert_eq!(Features::of(Some(&long)), Features::default());
    }
}
