//! The checks themselves: pure functions of a session's effective policy and
//! what the agent asked, so they are tested without a server and cost no I/O.

use latchkey_protocol::policy::{Capability, Consent, EffectivePolicy, PolicyReason};
use latchkey_protocol::tools::tool_named;
use serde_json::{Map, Value};

use super::PolicyDenial;

/// The page `tool.record_start` opens when it is given none (docs/protocol.md,
/// "Tools"): it is checked like one the agent named.
const RECORD_START_DEFAULT_URL: &str = "https://example.com/";

/// Whether the agent token `token_id` may start a session under `policy`.
pub fn check_start(policy: &EffectivePolicy, token_id: &str) -> Result<(), PolicyDenial> {
    if !policy.admits(token_id) {
        return Err(PolicyDenial::new(
            PolicyReason::AgentNotAllowed,
            "this browser's policy does not let this agent in",
            &policy.agents.from,
        ));
    }
    match policy.consent.value {
        // `ask`: the start asks the person (sessions::admission); a session
        // already running when a policy turns to `ask` was let in and stays.
        Consent::Allow | Consent::Ask => Ok(()),
        Consent::Deny => Err(PolicyDenial::new(
            PolicyReason::ConsentDenied,
            "this browser's policy allows no sessions now",
            &policy.consent.from,
        )),
    }
}

/// Whether a call of `method` with `params` is within `policy`: its capability
/// class, and the URL it would open when it names one the gateway can see.
pub fn check_call(
    policy: &EffectivePolicy,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), PolicyDenial> {
    let Some(tool) = tool_named(method) else {
        // A method the catalogue does not know has no class: only a policy that
        // grants every class lets it through.
        if Capability::ALL.iter().all(|c| policy.grants(*c)) {
            return Ok(());
        }
        return Err(PolicyDenial::new(
            PolicyReason::CapabilityNotGranted,
            format!("{method} is not in the tool catalogue, and this policy limits capabilities"),
            &policy.capabilities.from,
        ));
    };
    if !policy.grants(tool.capability) {
        return Err(PolicyDenial::new(
            PolicyReason::CapabilityNotGranted,
            format!(
                "{method} needs the {} capability, which this browser's policy does not grant",
                tool.capability.as_str()
            ),
            &policy.capabilities.from,
        )
        .with("capability", tool.capability.as_str()));
    }
    let url = params.get("url").and_then(Value::as_str);
    match (method, url) {
        ("tool.navigate" | "tool.tab_create" | "tool.record_start", Some(url)) => {
            check_url(policy, url)
        }
        ("tool.record_start", None) => check_url(policy, RECORD_START_DEFAULT_URL),
        // `tab_create` without a URL opens the browser's new-tab page: no site.
        _ => Ok(()),
    }
}

/// Whether `policy` lets a session open `url`. `about:blank` always may; a URL
/// that is not absolute is refused, since the browser would resolve it against
/// a page the gateway cannot see.
pub fn check_url(policy: &EffectivePolicy, url: &str) -> Result<(), PolicyDenial> {
    if url == "about:blank" {
        return Ok(());
    }
    let Ok(parsed) = url::Url::parse(url) else {
        return Err(PolicyDenial::new(
            PolicyReason::SchemeNotAllowed,
            "not an absolute URL (write it with its scheme, https://…)",
            &policy.schemes.from,
        ));
    };
    let host = parsed
        .host_str()
        .map(|h| h.strip_suffix('.').unwrap_or(h))
        .filter(|h| !h.is_empty());
    policy.check_site(parsed.scheme(), host).map_err(|refusal| {
        let what = match refusal.reason {
            PolicyReason::SchemeNotAllowed => format!("{}: URLs are not allowed", parsed.scheme()),
            PolicyReason::SiteBlocked => format!(
                "{} is blocked by this browser's policy",
                host.unwrap_or_default()
            ),
            _ => format!(
                "{} is not among the sites this browser's policy allows",
                host.unwrap_or("a URL without a host")
            ),
        };
        let mut denial =
            PolicyDenial::new(refusal.reason, what, &refusal.from).with("scheme", parsed.scheme());
        if let Some(host) = host {
            denial = denial.with("host", host);
        }
        if let Some(pattern) = refusal.pattern {
            denial = denial.with("pattern", pattern);
        }
        denial
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use latchkey_protocol::policy::{Layer, Policy};
    use serde_json::json;

    fn effective(team: serde_json::Value, device: serde_json::Value) -> EffectivePolicy {
        let p = |v| {
            serde_json::from_value::<Policy>(v)
                .expect("shape")
                .normalized()
                .expect("valid")
        };
        let (team, device) = (p(team), p(device));
        EffectivePolicy::of(&[(Layer::Team, &team), (Layer::Device, &device)])
    }

    fn params(v: serde_json::Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_class_not_granted_is_refused_naming_the_class_and_layer() {
        let e = effective(json!({}), json!({"capabilities": ["read", "input"]}));
        assert!(check_call(&e, "tool.snapshot", &Map::new()).is_ok());
        assert!(
            check_call(&e, "tool.wait_ms", &Map::new()).is_ok(),
            "session class"
        );
        let d = check_call(&e, "tool.evaluate", &params(json!({"expression": "1"})))
            .expect_err("script");
        assert_eq!(d.reason, PolicyReason::CapabilityNotGranted);
        assert_eq!(d.data["capability"], "script");
        assert_eq!(d.data["from"], json!(["device"]));
        let d = check_call(&e, "tool.someday", &Map::new()).expect_err("unknown");
        assert_eq!(d.reason, PolicyReason::CapabilityNotGranted);
        let open = effective(json!({}), json!({}));
        assert!(check_call(&open, "tool.someday", &Map::new()).is_ok());
    }

    #[test]
    fn urls_the_gateway_sees_are_checked_against_the_sites() {
        let e = effective(
            json!({"block_sites": ["*.bank.example"]}),
            json!({"allow_sites": ["*.example"]}),
        );
        let nav = |url: &str| check_call(&e, "tool.navigate", &params(json!({ "url": url })));
        assert!(nav("https://shop.example/cart").is_ok());
        assert!(nav("about:blank").is_ok());
        let d = nav("https://WWW.Bank.Example./login").expect_err("blocked");
        assert_eq!(d.reason, PolicyReason::SiteBlocked);
        assert_eq!(d.data["host"], "www.bank.example");
        assert_eq!(d.data["pattern"], "*.bank.example");
        assert_eq!(d.data["from"], json!(["team"]));
        let d = nav("https://elsewhere.test/").expect_err("not allowed");
        assert_eq!(d.reason, PolicyReason::SiteNotAllowed);
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "shop.example/cart",
        ] {
            let d = nav(bad).expect_err(bad);
            assert_eq!(d.reason, PolicyReason::SchemeNotAllowed, "{bad}");
        }
        let tab = |v| check_call(&e, "tool.tab_create", &params(v));
        assert!(tab(json!({})).is_ok(), "the new-tab page");
        assert!(tab(json!({"url": "https://elsewhere.test"})).is_err());
        let d = check_call(&e, "tool.record_start", &Map::new()).expect_err("default page");
        assert_eq!(d.data["host"], "example.com");
    }

    #[test]
    fn a_start_needs_the_agent_let_in_and_consent() {
        let e = effective(json!({"agents": ["tok_a"]}), json!({}));
        assert!(check_start(&e, "tok_a").is_ok());
        let d = check_start(&e, "tok_b").expect_err("not listed");
        assert_eq!(d.reason, PolicyReason::AgentNotAllowed);
        let e = effective(json!({"consent": "allow"}), json!({"consent": "deny"}));
        let d = check_start(&e, "tok_a").expect_err("deny");
        assert_eq!(d.reason, PolicyReason::ConsentDenied);
        assert_eq!(d.data["from"], json!(["device"]));
    }
}
