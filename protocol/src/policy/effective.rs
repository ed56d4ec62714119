//! The policy a session runs under: the intersection of the team's and the
//! browser's, with where each limit came from (`GET …/policy?effective=true`).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::{Capability, Consent, DEFAULT_SCHEMES, Policy, PolicyReason, sites};

/// Where a limit was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The team's policy, set by its admins.
    Team,
    /// The browser's own, set by its owner or an admin.
    Device,
    /// The delegation token the agent acts with (docs/delegation.md).
    Delegation,
}

impl Layer {
    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::Team => "team",
            Layer::Device => "device",
            Layer::Delegation => "delegation",
        }
    }
}

/// One limit's value and the layers that set it; `from` is empty for the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct Limit<T> {
    pub value: T,
    pub from: Vec<Layer>,
}

/// One layer's `allow_sites`: a host must match one of its patterns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct SiteList {
    pub from: Layer,
    pub patterns: Vec<String>,
}

/// One blocked pattern and the layer that blocked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct BlockedSite {
    pub pattern: String,
    pub from: Layer,
}

/// The intersection of every layer. A host is allowed when it matches no
/// blocked pattern and one pattern of each `allow_sites` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS, utoipa::ToSchema)]
pub struct EffectivePolicy {
    /// The agents let in; `null`: every agent of the team.
    pub agents: Limit<Option<Vec<String>>>,
    /// The strictest consent of the layers (`deny` over `ask` over `allow`).
    pub consent: Limit<Consent>,
    /// Every layer's allow list; all must admit a host.
    pub allow_sites: Vec<SiteList>,
    pub block_sites: Vec<BlockedSite>,
    pub schemes: Limit<Vec<String>>,
    /// The granted classes; `session` is always among them.
    pub capabilities: Limit<Vec<Capability>>,
    /// The shortest limit of the layers; `null`: none.
    pub max_session_minutes: Limit<Option<u32>>,
}

/// Why a URL is refused: the rule, the pattern that refused it (if one did) and
/// the layers the rule came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteRefusal {
    pub reason: PolicyReason,
    pub pattern: Option<String>,
    pub from: Vec<Layer>,
}

/// The layers whose `pick` is set, with the value.
fn set<'a, T: 'a>(
    layers: &'a [(Layer, &'a Policy)],
    pick: impl Fn(&'a Policy) -> Option<&'a T>,
) -> impl Iterator<Item = (Layer, &'a T)> {
    layers
        .iter()
        .filter_map(move |(l, p)| pick(p).map(|v| (*l, v)))
}

/// Intersect the lists of every layer that sets one; `None` when none does.
fn intersect<T: Clone + PartialEq>(lists: Vec<(Layer, &Vec<T>)>) -> Option<Limit<Vec<T>>> {
    let mut it = lists.iter();
    let (_, first) = it.next()?;
    let mut value: Vec<T> = (*first).clone();
    for (_, list) in it {
        value.retain(|v| list.contains(v));
    }
    Some(Limit {
        value,
        from: lists.iter().map(|(l, _)| *l).collect(),
    })
}

impl EffectivePolicy {
    /// The intersection of `layers` (team first, then the device).
    pub fn of(layers: &[(Layer, &Policy)]) -> Self {
        let agents = match intersect(set(layers, |p| p.agents.as_ref()).collect()) {
            Some(l) => Limit {
                value: Some(l.value),
                from: l.from,
            },
            None => Limit {
                value: None,
                from: vec![],
            },
        };
        let strictest = set(layers, |p| p.consent.as_ref()).map(|(_, c)| *c).max();
        let consent = Limit {
            value: strictest.unwrap_or(Consent::Allow),
            from: set(layers, |p| p.consent.as_ref())
                .filter(|(_, c)| Some(**c) == strictest)
                .map(|(l, _)| l)
                .collect(),
        };
        let allow_sites = set(layers, |p| p.allow_sites.as_ref())
            .map(|(from, patterns)| SiteList {
                from,
                patterns: patterns.clone(),
            })
            .collect();
        let mut block_sites: Vec<BlockedSite> = Vec::new();
        for (from, patterns) in set(layers, |p| p.block_sites.as_ref()) {
            for pattern in patterns {
                if !block_sites.iter().any(|b| &b.pattern == pattern) {
                    block_sites.push(BlockedSite {
                        pattern: pattern.clone(),
                        from,
                    });
                }
            }
        }
        let schemes = intersect(set(layers, |p| p.schemes.as_ref()).collect()).unwrap_or(Limit {
            value: DEFAULT_SCHEMES.iter().map(|s| s.to_string()).collect(),
            from: vec![],
        });
        let mut capabilities = intersect(set(layers, |p| p.capabilities.as_ref()).collect())
            .unwrap_or(Limit {
                value: Capability::ALL.to_vec(),
                from: vec![],
            });
        if !capabilities.value.contains(&Capability::Session) {
            capabilities.value.push(Capability::Session);
        }
        capabilities.value.sort();
        let shortest = set(layers, |p| p.max_session_minutes.as_ref())
            .map(|(_, m)| *m)
            .min();
        let max_session_minutes = Limit {
            value: shortest,
            from: set(layers, |p| p.max_session_minutes.as_ref())
                .filter(|(_, m)| Some(**m) == shortest)
                .map(|(l, _)| l)
                .collect(),
        };
        EffectivePolicy {
            agents,
            consent,
            allow_sites,
            block_sites,
            schemes,
            capabilities,
            max_session_minutes,
        }
    }

    /// Whether the agent token `token_id` is let in.
    pub fn admits(&self, token_id: &str) -> bool {
        self.agents
            .value
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id == token_id))
    }

    /// Whether `capability` is granted.
    pub fn grants(&self, capability: Capability) -> bool {
        self.capabilities.value.contains(&capability)
    }

    /// Whether a URL with `scheme` and `host` (lower case, as a URL parser gives
    /// them) may be opened. `about:blank` always may: it is no site.
    pub fn check_site(&self, scheme: &str, host: Option<&str>) -> Result<(), SiteRefusal> {
        if !self.schemes.value.iter().any(|s| s == scheme) {
            return Err(SiteRefusal {
                reason: PolicyReason::SchemeNotAllowed,
                pattern: None,
                from: self.schemes.from.clone(),
            });
        }
        // A scheme allowed without a host (`file:`, `data:`) has no site to match;
        // an allow list still requires one.
        let host = host.unwrap_or("");
        if let Some(b) = self
            .block_sites
            .iter()
            .find(|b| sites::matches(&b.pattern, host))
        {
            return Err(SiteRefusal {
                reason: PolicyReason::SiteBlocked,
                pattern: Some(b.pattern.clone()),
                from: vec![b.from],
            });
        }
        if let Some(list) = self
            .allow_sites
            .iter()
            .find(|l| host.is_empty() || sites::first_match(&l.patterns, host).is_none())
        {
            return Err(SiteRefusal {
                reason: PolicyReason::SiteNotAllowed,
                pattern: None,
                from: vec![list.from],
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: serde_json::Value) -> Policy {
        serde_json::from_value::<Policy>(v)
            .expect("shape")
            .normalized()
            .expect("valid")
    }

    #[test]
    fn no_policy_allows_every_agent_and_class_on_http_and_https() {
        let e = EffectivePolicy::of(&[(Layer::Team, &Policy::default())]);
        assert!(e.admits("tok_any"));
        assert_eq!(e.consent.value, Consent::Allow);
        assert!(Capability::ALL.iter().all(|c| e.grants(*c)));
        assert!(e.check_site("https", Some("example.com")).is_ok());
        let refused = e.check_site("file", None).expect_err("file");
        assert_eq!(refused.reason, PolicyReason::SchemeNotAllowed);
        assert!(refused.from.is_empty(), "the default refused it");
        assert_eq!(e.max_session_minutes.value, None);
    }

    #[test]
    fn each_limit_is_the_intersection_and_names_its_layers() {
        let team = p(json!({
            "agents": ["tok_a", "tok_b"], "consent": "allow",
            "capabilities": ["read", "input", "navigate"],
            "block_sites": ["*.bank.example"], "max_session_minutes": 60,
            "allow_sites": ["*.example", "example"],
        }));
        let device = p(json!({
            "agents": ["tok_b", "tok_c"], "consent": "deny",
            "capabilities": ["read", "script"], "max_session_minutes": 90,
            "allow_sites": ["shop.example"],
        }));
        let e = EffectivePolicy::of(&[(Layer::Team, &team), (Layer::Device, &device)]);
        assert_eq!(e.agents.value, Some(vec!["tok_b".to_string()]));
        assert_eq!(e.agents.from, vec![Layer::Team, Layer::Device]);
        assert_eq!(e.consent.value, Consent::Deny);
        assert_eq!(e.consent.from, vec![Layer::Device]);
        assert_eq!(
            e.capabilities.value,
            vec![Capability::Session, Capability::Read]
        );
        assert_eq!(e.max_session_minutes.value, Some(60));
        assert_eq!(e.max_session_minutes.from, vec![Layer::Team]);
        assert!(e.check_site("https", Some("shop.example")).is_ok());
        let r = e
            .check_site("https", Some("news.example"))
            .expect_err("device list");
        assert_eq!(
            (r.reason, r.from),
            (PolicyReason::SiteNotAllowed, vec![Layer::Device])
        );
        let r = e
            .check_site("https", Some("www.bank.example"))
            .expect_err("blocked");
        assert_eq!(r.reason, PolicyReason::SiteBlocked);
        assert_eq!(r.pattern.as_deref(), Some("*.bank.example"));
        assert_eq!(r.from, vec![Layer::Team]);
    }

    #[test]
    fn an_allowed_scheme_without_a_host_still_meets_allow_lists() {
        let e = EffectivePolicy::of(&[(Layer::Team, &p(json!({"schemes": ["https", "data"]})))]);
        assert!(e.check_site("data", None).is_ok());
        assert!(e.check_site("http", Some("example.com")).is_err());
        let listed = p(json!({"schemes": ["data"], "allow_sites": ["*"]}));
        let e = EffectivePolicy::of(&[(Layer::Device, &listed)]);
        assert!(e.check_site("data", None).is_err());
    }
}
