//! The `[[console.sso]]` entries of the configuration (docs/console.md, "Single
//! sign-on"): one OpenID provider each, for one team. Checked up front with the
//! rest of the configuration, so a typo is a startup error, not a failed sign-in.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Who a first sign-in through single sign-on makes a member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstLogin {
    /// Only people an admin already added (by email) may sign in.
    #[default]
    Refuse,
    /// A verified address in an allowed domain becomes a member on its first
    /// sign-in (an admin when it is listed in `admins`).
    Member,
}

/// One OpenID provider the console offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsoProvider {
    /// Short name in the console's addresses (`/console/sign-in/sso/<id>`):
    /// lower-case letters, digits and `-`.
    pub id: String,
    /// What the sign-in button says: "Sign in with <label>".
    pub label: String,
    /// The provider's issuer URL; its discovery document is at
    /// `<issuer>/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// The client secret; masked when printed. Prefer `client_secret_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// A file holding the client secret (a Kubernetes secret mounted as a
    /// file); read once at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<PathBuf>,
    /// The team (tenant name) whose members sign in here.
    pub team: String,
    /// Email domains that may sign in (`example.com`); at least one.
    pub allowed_domains: Vec<String>,
    #[serde(default)]
    pub first_login: FirstLogin,
    /// Addresses that a first sign-in makes admins rather than members.
    #[serde(default)]
    pub admins: Vec<String>,
    /// Refuse an address the provider does not say it verified (on by default;
    /// turn off only for a provider that never sends `email_verified` and
    /// verifies every address itself).
    #[serde(default = "yes")]
    pub require_verified_email: bool,
}

fn yes() -> bool {
    true
}

/// Longest provider id.
const MAX_ID_CHARS: usize = 32;

impl SsoProvider {
    /// A copy safe to print.
    pub fn masked(&self) -> SsoProvider {
        let mut p = self.clone();
        if p.client_secret.is_some() {
            p.client_secret = Some("****".to_string());
        }
        p
    }

    /// Whether `email` (lower case) is in one of the allowed domains.
    pub fn allows(&self, email: &str) -> bool {
        email
            .rsplit_once('@')
            .is_some_and(|(_, domain)| self.allowed_domains.iter().any(|d| d == domain))
    }

    /// Every problem with this entry, each naming it.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let name = format!("console.sso {:?}", self.id);
        let id_ok = !self.id.is_empty()
            && self.id.len() <= MAX_ID_CHARS
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !id_ok {
            out.push(format!(
                "{name}: id must be 1 to {MAX_ID_CHARS} lower-case letters, digits or -"
            ));
        }
        if self.label.trim().is_empty() || self.label.chars().count() > 64 {
            out.push(format!("{name}: label must be 1 to 64 characters"));
        }
        match url::Url::parse(&self.issuer) {
            Err(e) => out.push(format!(
                "{name}: issuer {:?} does not parse: {e}",
                self.issuer
            )),
            Ok(u) => {
                let loopback = u
                    .host()
                    .is_some_and(|h| crate::config::is_loopback_host(&h));
                if u.scheme() != "https" && !(u.scheme() == "http" && loopback) {
                    out.push(format!(
                        "{name}: issuer must be an https:// URL (http:// only on loopback)"
                    ));
                }
            }
        }
        if self.client_id.trim().is_empty() {
            out.push(format!("{name}: client_id is empty"));
        }
        match (&self.client_secret, &self.client_secret_file) {
            (Some(_), Some(_)) => out.push(format!(
                "{name}: give client_secret or client_secret_file, not both"
            )),
            (_, Some(path)) if !path.is_file() => out.push(format!(
                "{name}: client_secret_file {} is not a readable file",
                path.display()
            )),
            _ => {}
        }
        if self.team.trim().is_empty() {
            out.push(format!("{name}: team is empty"));
        }
        if self.allowed_domains.is_empty() {
            out.push(format!(
                "{name}: allowed_domains must name at least one email domain"
            ));
        }
        for d in &self.allowed_domains {
            let ok = !d.is_empty()
                && *d == d.to_lowercase()
                && !d.starts_with('.')
                && d.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            if !ok {
                out.push(format!(
                    "{name}: allowed domain {d:?} must be a lower-case domain like example.com"
                ));
            }
        }
        for a in &self.admins {
            if *a != a.to_lowercase() || !self.allows(a) {
                out.push(format!(
                    "{name}: admin {a:?} must be a lower-case address in an allowed domain"
                ));
            }
        }
        out
    }

    /// The client secret, from the configuration or its file.
    pub fn secret(&self) -> std::io::Result<Option<String>> {
        match (&self.client_secret, &self.client_secret_file) {
            (Some(s), _) => Ok(Some(s.clone())),
            (None, Some(path)) => Ok(Some(std::fs::read_to_string(path)?.trim().to_string())),
            (None, None) => Ok(None),
        }
    }
}

/// Every problem with the `[[console.sso]]` entries together.
pub fn problems(providers: &[SsoProvider]) -> Vec<String> {
    let mut out: Vec<String> = providers.iter().flat_map(SsoProvider::problems).collect();
    let mut ids: Vec<&str> = providers.iter().map(|p| p.id.as_str()).collect();
    ids.sort_unstable();
    for pair in ids.windows(2) {
        if pair[0] == pair[1] {
            out.push(format!("console.sso id {:?} is used twice", pair[0]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn provider() -> SsoProvider {
        SsoProvider {
            id: "acme".into(),
            label: "Acme".into(),
            issuer: "https://id.acme.example".into(),
            client_id: "latchkey".into(),
            client_secret: Some("s3cret".into()),
            client_secret_file: None,
            team: "default".into(),
            allowed_domains: vec!["acme.example".into()],
            first_login: FirstLogin::Refuse,
            admins: vec!["boss@acme.example".into()],
            require_verified_email: true,
        }
    }

    #[test]
    fn a_good_entry_has_no_problems_and_prints_without_its_secret() {
        let p = provider();
        assert_eq!(problems(std::slice::from_ref(&p)), Vec::<String>::new());
        let printed = toml::to_string(&p.masked()).expect("toml");
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(printed.contains("****"));
    }

    #[test]
    fn each_mistake_is_named() {
        let mut p = provider();
        p.id = "Acme Corp".into();
        p.issuer = "http://id.acme.example".into();
        p.client_secret_file = Some("/nonexistent/secret".into());
        p.allowed_domains = vec!["ACME.example".into()];
        p.admins = vec!["boss@elsewhere.example".into()];
        let found = problems(&[p.clone(), p]).join("\n");
        for want in [
            "id must be",
            "issuer must be an https:// URL",
            "not both",
            "must be a lower-case domain",
            "admin \"boss@elsewhere.example\"",
            "used twice",
        ] {
            assert!(found.contains(want), "{want} missing from:\n{found}");
        }
        let mut none = provider();
        none.allowed_domains.clear();
        assert!(problems(&[none])[0].contains("at least one email domain"));
    }

    #[test]
    fn plain_http_is_allowed_for_a_loopback_issuer_only() {
        let mut p = provider();
        p.issuer = "http://127.0.0.1:8080".into();
        assert_eq!(p.problems(), Vec::<String>::new());
    }

    #[test]
    fn only_addresses_in_the_allowed_domains_pass() {
        let p = provider();
        assert!(p.allows("ann@acme.example"));
        assert!(!p.allows("ann@sub.acme.example"));
        assert!(!p.allows("ann@acme.example.evil"));
        assert!(!p.allows("acme.example"));
    }
}
