//! A policy as a form (docs/console.md, "Policies"): every field of
//! [`Policy`] as the person sees it, and back. The form only reads what was
//! typed; whether the policy holds is the policy API's own check, so the console
//! and the API accept and refuse the same policies.

use std::collections::HashMap;

use latchkey_protocol::ErrorCode;
use latchkey_protocol::policy::{Capability, Consent, Policy};
use serde::Deserialize;

use super::posted::WithCsrf;
use crate::api_error::ApiError;

/// An agent the policy can name, as a checkbox.
pub struct AgentChoice {
    pub id: String,
    pub name: String,
    pub checked: bool,
}

/// A capability class, as a checkbox.
pub struct CapabilityChoice {
    pub name: &'static str,
    pub checked: bool,
}

/// What the form shows.
pub struct PolicyFields {
    /// `""` (no limit here), `allow`, `ask` or `deny`.
    pub consent: String,
    /// Only the checked agents may start sessions (otherwise: every agent).
    pub agents_limited: bool,
    pub agents: Vec<AgentChoice>,
    /// One host pattern a line.
    pub allow_sites: String,
    pub block_sites: String,
    /// Comma-separated; blank is no limit here.
    pub schemes: String,
    /// Only the checked classes (otherwise: all).
    pub capabilities_limited: bool,
    pub capabilities: Vec<CapabilityChoice>,
    /// Blank is no limit here.
    pub max_minutes: String,
}

impl PolicyFields {
    /// The form for `policy`, offering the team's `agents` (id, name) and any
    /// agent the policy names that is no longer among them.
    pub fn of(policy: &Policy, agents: Vec<(String, String)>) -> Self {
        let named = policy.agents.clone().unwrap_or_default();
        let mut choices: Vec<AgentChoice> = agents
            .into_iter()
            .map(|(id, name)| AgentChoice {
                checked: named.contains(&id),
                id,
                name,
            })
            .collect();
        for id in &named {
            if !choices.iter().any(|c| &c.id == id) {
                choices.push(AgentChoice {
                    id: id.clone(),
                    name: "(revoked or gone)".into(),
                    checked: true,
                });
            }
        }
        let caps = policy.capabilities.clone().unwrap_or_default();
        PolicyFields {
            consent: policy
                .consent
                .map(|c| c.as_str().to_string())
                .unwrap_or_default(),
            agents_limited: policy.agents.is_some(),
            agents: choices,
            allow_sites: policy.allow_sites.clone().unwrap_or_default().join("\n"),
            block_sites: policy.block_sites.clone().unwrap_or_default().join("\n"),
            schemes: policy.schemes.clone().unwrap_or_default().join(", "),
            capabilities_limited: policy.capabilities.is_some(),
            capabilities: Capability::ALL
                .iter()
                .filter(|c| **c != Capability::Session)
                .map(|c| CapabilityChoice {
                    name: c.as_str(),
                    checked: caps.contains(c),
                })
                .collect(),
            max_minutes: policy
                .max_session_minutes
                .map(|m| m.to_string())
                .unwrap_or_default(),
        }
    }
}

/// The posted form: its fields by name (checkboxes are `agent:<id>` and
/// `capability:<name>`, each `on` when checked).
#[derive(Deserialize)]
#[serde(transparent)]
pub struct PolicyForm(HashMap<String, String>);

impl WithCsrf for PolicyForm {
    fn csrf(&self) -> &str {
        self.0.get("csrf").map_or("", String::as_str)
    }
}

/// Lines (or commas) to a list; `None` when blank, which is no limit here.
fn list(text: Option<&String>, by: char) -> Option<Vec<String>> {
    let items: Vec<String> = text?
        .split([by, '\n'])
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!items.is_empty()).then_some(items)
}

impl PolicyForm {
    /// The form as typed, to show again beside what was refused.
    pub fn typed(&self, agents: Vec<(String, String)>) -> PolicyFields {
        let get = |name: &str| self.0.get(name).cloned().unwrap_or_default();
        let on = |key: String| self.0.get(&key).is_some_and(|v| v == "on");
        PolicyFields {
            consent: get("consent"),
            agents_limited: get("agents_mode") == "only",
            agents: agents
                .into_iter()
                .map(|(id, name)| AgentChoice {
                    checked: on(format!("agent:{id}")),
                    id,
                    name,
                })
                .collect(),
            allow_sites: get("allow_sites"),
            block_sites: get("block_sites"),
            schemes: get("schemes"),
            capabilities_limited: get("capabilities_mode") == "only",
            capabilities: Capability::ALL
                .iter()
                .filter(|c| **c != Capability::Session)
                .map(|c| CapabilityChoice {
                    name: c.as_str(),
                    checked: on(format!("capability:{}", c.as_str())),
                })
                .collect(),
            max_minutes: get("max_minutes"),
        }
    }

    /// The policy the form asks for, unchecked; `invalid_params` naming the
    /// field when a value cannot be read at all.
    pub fn policy(&self) -> Result<Policy, ApiError> {
        let get = |name: &str| self.0.get(name);
        let consent = match get("consent").map(|s| s.trim()) {
            None | Some("") => None,
            Some("allow") => Some(Consent::Allow),
            Some("ask") => Some(Consent::Ask),
            Some("deny") => Some(Consent::Deny),
            Some(_) => {
                return Err(ApiError::at_field(
                    ErrorCode::InvalidParams,
                    "consent",
                    "consent must be allow, ask or deny",
                ));
            }
        };
        let checked = |prefix: &str| -> Vec<String> {
            let mut names: Vec<String> = self
                .0
                .iter()
                .filter(|(_, v)| v.as_str() == "on")
                .filter_map(|(k, _)| k.strip_prefix(prefix).map(str::to_string))
                .collect();
            names.sort();
            names
        };
        let agents =
            (get("agents_mode").map(String::as_str) == Some("only")).then(|| checked("agent:"));
        let capabilities = if get("capabilities_mode").map(String::as_str) == Some("only") {
            let mut classes = Vec::new();
            for name in checked("capability:") {
                let class = Capability::ALL
                    .into_iter()
                    .find(|c| c.as_str() == name)
                    .ok_or_else(|| {
                        ApiError::at_field(
                            ErrorCode::InvalidParams,
                            "capabilities",
                            format!("{name} is not a capability class"),
                        )
                    })?;
                classes.push(class);
            }
            Some(classes)
        } else {
            None
        };
        let max_session_minutes = match get("max_minutes").map(|s| s.trim()) {
            None | Some("") => None,
            Some(n) => Some(n.parse::<u32>().map_err(|_| {
                ApiError::at_field(
                    ErrorCode::InvalidParams,
                    "max_session_minutes",
                    "max_session_minutes must be a whole number of minutes",
                )
            })?),
        };
        Ok(Policy {
            agents,
            consent,
            allow_sites: list(get("allow_sites"), '\n'),
            block_sites: list(get("block_sites"), '\n'),
            schemes: list(get("schemes"), ','),
            capabilities,
            max_session_minutes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> PolicyForm {
        PolicyForm(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_blank_form_is_no_policy() {
        assert_eq!(
            form(&[("csrf", "x")]).policy().expect("policy"),
            Policy::default()
        );
    }

    #[test]
    fn every_field_is_read_and_shown_again() {
        let f = form(&[
            ("consent", "ask"),
            ("agents_mode", "only"),
            ("agent:tok_b", "on"),
            ("agent:tok_a", "on"),
            ("allow_sites", "example.com\r\n *.shop.example \n\n"),
            ("block_sites", ""),
            ("schemes", "https, http"),
            ("capabilities_mode", "only"),
            ("capability:read", "on"),
            ("capability:input", "on"),
            ("max_minutes", " 30 "),
        ]);
        let p = f.policy().expect("policy");
        assert_eq!(p.consent, Some(Consent::Ask));
        assert_eq!(p.agents, Some(vec!["tok_a".into(), "tok_b".into()]));
        assert_eq!(
            p.allow_sites,
            Some(vec!["example.com".into(), "*.shop.example".into()])
        );
        assert_eq!(p.block_sites, None);
        assert_eq!(p.schemes, Some(vec!["https".into(), "http".into()]));
        assert_eq!(
            p.capabilities,
            Some(vec![Capability::Input, Capability::Read])
        );
        assert_eq!(p.max_session_minutes, Some(30));
        let shown = PolicyFields::of(&p, vec![("tok_a".into(), "Booker".into())]);
        assert!(shown.agents_limited && shown.capabilities_limited);
        assert_eq!(
            shown.agents.len(),
            2,
            "the gone one is still shown, checked"
        );
        assert!(shown.agents.iter().all(|a| a.checked));
        assert_eq!(shown.allow_sites, "example.com\n*.shop.example");
        assert_eq!(shown.max_minutes, "30");
    }

    #[test]
    fn only_with_nothing_checked_lets_none_in() {
        let p = form(&[("agents_mode", "only")]).policy().expect("policy");
        assert_eq!(p.agents, Some(Vec::new()));
    }

    #[test]
    fn unreadable_values_name_their_field() {
        for (pairs, field) in [
            (vec![("consent", "maybe")], "consent"),
            (vec![("max_minutes", "ten")], "max_session_minutes"),
            (
                vec![("capabilities_mode", "only"), ("capability:fly", "on")],
                "capabilities",
            ),
        ] {
            let e = form(&pairs).policy().expect_err("refused");
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert_eq!(
                e.data.as_ref().and_then(|d| d["field"].as_str()),
                Some(field)
            );
        }
    }
}
