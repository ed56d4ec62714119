//! Policies (docs/policy.md): who may use a browser, whether its person is asked
//! first, on which sites, with which capability classes, and for how long.
//!
//! A team's admins set one policy for the whole team; a browser's owner (or an
//! admin) sets one for the browser. Both have the same shape, every field
//! optional: an absent field sets no limit at that layer. What a session runs
//! under is their intersection, [`EffectivePolicy`], which says for every limit
//! which layer it came from.

mod effective;
pub mod sites;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

pub use crate::tools::capability::Capability;
pub use effective::{BlockedSite, EffectivePolicy, Layer, Limit, SiteList};

/// At most this many agents in a policy's `agents`.
pub const MAX_AGENTS: usize = 100;
/// At most this many patterns in `allow_sites`, and as many in `block_sites`.
pub const MAX_SITE_PATTERNS: usize = 100;
/// At most this many entries in `schemes`.
pub const MAX_SCHEMES: usize = 8;
/// The longest `max_session_minutes`: a week.
pub const MAX_SESSION_MINUTES: u32 = 7 * 24 * 60;
/// The URL schemes a session may open when no layer names its own.
pub const DEFAULT_SCHEMES: [&str; 2] = ["http", "https"];

/// One layer's policy, as its setter wrote it (`PUT …/policy`). `{}` sets no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The agent tokens (ids) that may start sessions; absent: every agent of
    /// the team. An empty list lets no agent in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub agents: Option<Vec<String>>,
    /// Whether a session may start without asking the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub consent: Option<Consent>,
    /// Host patterns a session may open (`example.com`, `*.example.com`, `*`);
    /// absent: any host not blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub allow_sites: Option<Vec<String>>,
    /// Host patterns a session may never open; they win over `allow_sites`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub block_sites: Option<Vec<String>>,
    /// URL schemes a session may open; absent: `http` and `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub schemes: Option<Vec<String>>,
    /// The capability classes an agent may use; absent: all. `session` is
    /// always granted to an agent let in at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub capabilities: Option<Vec<Capability>>,
    /// The longest a session may last, in minutes (1 … 10080); it is then ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub max_session_minutes: Option<u32>,
}

/// Whether a new session needs the person's yes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    TS,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Consent {
    /// Sessions start without asking.
    Allow,
    /// The person confirms each new session in the extension.
    Ask,
    /// No session starts.
    Deny,
}

impl Consent {
    /// Every value by name, for command lines and forms.
    pub const NAMES: [&'static str; 3] = [
        Consent::Allow.as_str(),
        Consent::Ask.as_str(),
        Consent::Deny.as_str(),
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Consent::Allow => "allow",
            Consent::Ask => "ask",
            Consent::Deny => "deny",
        }
    }
}

/// The `data.reason` of a `permission_denied` that a policy gave: which rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyReason {
    /// The agent's token is not among the policy's `agents`.
    AgentNotAllowed,
    /// The policy's consent is `deny`, or the person said no.
    ConsentDenied,
    /// The method's capability class is not among the policy's `capabilities`.
    CapabilityNotGranted,
    /// The URL's host matches a `block_sites` pattern.
    SiteBlocked,
    /// The URL's host matches no pattern of an `allow_sites` list.
    SiteNotAllowed,
    /// The URL's scheme is not among the policy's `schemes`, or it is not an
    /// absolute URL.
    SchemeNotAllowed,
    /// The browser is not among those the caller's delegation names.
    BrowserNotDelegated,
    /// The caller's delegation acts in one session and starts none.
    SessionNotDelegated,
    /// The policy asks the person first, and the browser's extension cannot
    /// ask (it does not list `consent` among its features).
    ConsentUnavailable,
}

impl PolicyReason {
    pub const ALL: [PolicyReason; 9] = [
        Self::AgentNotAllowed,
        Self::ConsentDenied,
        Self::CapabilityNotGranted,
        Self::SiteBlocked,
        Self::SiteNotAllowed,
        Self::SchemeNotAllowed,
        Self::BrowserNotDelegated,
        Self::SessionNotDelegated,
        Self::ConsentUnavailable,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AgentNotAllowed => "agent_not_allowed",
            Self::ConsentDenied => "consent_denied",
            Self::CapabilityNotGranted => "capability_not_granted",
            Self::SiteBlocked => "site_blocked",
            Self::SiteNotAllowed => "site_not_allowed",
            Self::SchemeNotAllowed => "scheme_not_allowed",
            Self::BrowserNotDelegated => "browser_not_delegated",
            Self::SessionNotDelegated => "session_not_delegated",
            Self::ConsentUnavailable => "consent_unavailable",
        }
    }
}

/// A policy field that cannot be stored as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    /// The field, with the index of the entry when it is one of a list
    /// (`allow_sites[2]`).
    pub field: String,
    pub message: String,
}

fn error(field: impl Into<String>, message: impl Into<String>) -> PolicyError {
    PolicyError {
        field: field.into(),
        message: message.into(),
    }
}

impl Policy {
    /// The policy as it is stored and enforced: every pattern in its canonical
    /// form, duplicates dropped, every bound checked. The first field that
    /// breaks a rule is named.
    pub fn normalized(self) -> Result<Policy, PolicyError> {
        let agents = match self.agents {
            None => None,
            Some(list) => Some(bounded("agents", list, MAX_AGENTS, |id| {
                let ok = !id.is_empty()
                    && id.len() <= 64
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                ok.then(|| id.to_string())
                    .ok_or_else(|| "not a token id (up to 64 of A-Z a-z 0-9 _ -)".to_string())
            })?),
        };
        let patterns = |field: &str, list: Option<Vec<String>>| match list {
            None => Ok(None),
            Some(list) => bounded(field, list, MAX_SITE_PATTERNS, sites::normalize).map(Some),
        };
        let allow_sites = patterns("allow_sites", self.allow_sites)?;
        let block_sites = patterns("block_sites", self.block_sites)?;
        let schemes = match self.schemes {
            None => None,
            Some(list) => Some(bounded(
                "schemes",
                list,
                MAX_SCHEMES,
                sites::normalize_scheme,
            )?),
        };
        let capabilities = self.capabilities.map(|mut list| {
            list.sort();
            list.dedup();
            list
        });
        if let Some(m) = self.max_session_minutes
            && !(1..=MAX_SESSION_MINUTES).contains(&m)
        {
            return Err(error(
                "max_session_minutes",
                format!("must be 1 … {MAX_SESSION_MINUTES} (a week)"),
            ));
        }
        Ok(Policy {
            agents,
            consent: self.consent,
            allow_sites,
            block_sites,
            schemes,
            capabilities,
            max_session_minutes: self.max_session_minutes,
        })
    }
}

/// Each entry of `list` through `each`, duplicates dropped, at most `max` of them.
fn bounded(
    field: &str,
    list: Vec<String>,
    max: usize,
    each: impl Fn(&str) -> Result<String, String>,
) -> Result<Vec<String>, PolicyError> {
    if list.len() > max {
        return Err(error(field, format!("at most {max} entries")));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let entry = each(entry).map_err(|m| error(format!("{field}[{i}]"), m))?;
        if !out.contains(&entry) {
            out.push(entry);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(v: serde_json::Value) -> Result<Policy, PolicyError> {
        serde_json::from_value::<Policy>(v)
            .expect("shape")
            .normalized()
    }

    #[test]
    fn patterns_are_stored_in_canonical_form_without_duplicates() {
        let p = policy(json!({
            "allow_sites": ["Example.COM.", "*.Docs.example.com", "example.com"],
            "schemes": ["HTTPS", "https"],
            "capabilities": ["read", "navigate", "read"],
        }))
        .expect("valid");
        assert_eq!(
            p.allow_sites,
            Some(vec!["example.com".into(), "*.docs.example.com".into()])
        );
        assert_eq!(p.schemes, Some(vec!["https".into()]));
        assert_eq!(
            p.capabilities,
            Some(vec![Capability::Read, Capability::Navigate])
        );
    }

    #[test]
    fn the_first_bad_entry_is_named_with_its_index() {
        let e = policy(json!({"block_sites": ["ok.example", "a*b.example"]})).expect_err("bad");
        assert_eq!(e.field, "block_sites[1]");
        let e = policy(json!({"agents": ["tok_1", "no spaces"]})).expect_err("bad");
        assert_eq!(e.field, "agents[1]");
        let e = policy(json!({"max_session_minutes": 0})).expect_err("bad");
        assert_eq!(e.field, "max_session_minutes");
        let e = policy(json!({"schemes": ["javascript"]})).expect_err("bad");
        assert_eq!(e.field, "schemes[0]");
        let many: Vec<String> = (0..=MAX_SITE_PATTERNS)
            .map(|i| format!("h{i}.example"))
            .collect();
        let e = policy(json!({ "allow_sites": many })).expect_err("too many");
        assert_eq!(e.field, "allow_sites");
    }

    #[test]
    fn unknown_fields_and_values_are_refused_by_the_shape() {
        assert!(serde_json::from_value::<Policy>(json!({"sites": []})).is_err());
        assert!(serde_json::from_value::<Policy>(json!({"consent": "maybe"})).is_err());
        assert!(serde_json::from_value::<Policy>(json!({"capabilities": ["fly"]})).is_err());
    }

    #[test]
    fn reason_names_agree_with_serde() {
        for r in PolicyReason::ALL {
            assert_eq!(serde_json::to_value(r).expect("json"), r.as_str());
        }
        for c in [Consent::Allow, Consent::Ask, Consent::Deny] {
            assert_eq!(serde_json::to_value(c).expect("json"), c.as_str());
        }
    }
}
