//! Who a verified ID token signs in as (docs/console.md, "Single sign-on"): the
//! live member of the provider's team with the token's email address, or, when
//! the provider lets a first sign-in in, a new member made for it.
//!
//! The address is the link between the provider's person and the team's member,
//! as an admin who adds a member by email expects; it counts only when the
//! provider says it verified it and it is in one of the allowed domains.

use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::MemberRole;

use super::config::{FirstLogin, SsoProvider};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::audit::{Event, action};
use crate::store::{MemberRecord, StoreError};

/// What a verified ID token says about the person.
#[derive(Debug, Clone, Default)]
pub(super) struct Person {
    pub email: Option<String>,
    pub email_verified: Option<bool>,
    /// The name to give a member made at a first sign-in.
    pub name: Option<String>,
}

/// A sign-in refused for a reason the person can act on.
fn refused(why: String) -> ApiError {
    ApiError::new(ErrorCode::PermissionDenied, why)
}

/// The address `person` signs in with, if `provider` lets it sign in at all.
pub(super) fn address(provider: &SsoProvider, person: &Person) -> Result<String, ApiError> {
    let raw = person.email.as_deref().ok_or_else(|| {
        refused(
            "The identity provider did not say who you are by email address (the `email` scope)."
                .into(),
        )
    })?;
    let email = crate::admin::members::clean_email(raw)
        .map_err(|_| refused("The identity provider gave an address that is not one.".into()))?;
    if provider.require_verified_email && person.email_verified != Some(true) {
        return Err(refused(format!(
            "The identity provider has not verified {email}; verify it there and sign in again."
        )));
    }
    if !provider.allows(&email) {
        return Err(refused(format!(
            "{email} is not in a domain that signs in to this team here."
        )));
    }
    Ok(email)
}

/// The member `person` signs in as through `provider`, made now if the provider
/// lets a first sign-in in.
pub(super) async fn member_for(
    state: &AppState,
    provider: &SsoProvider,
    person: &Person,
) -> Result<MemberRecord, ApiError> {
    let email = address(provider, person)?;
    let Some(team) = state.store.tenant_by_name(&provider.team).await? else {
        tracing::error!(provider = %provider.id, team = %provider.team, "console.sso names a team that does not exist");
        return Err(refused(
            "This sign-in is for a team that does not exist here; tell your operator.".into(),
        ));
    };
    if let Some(member) = state.store.member_by_email(&team.id, &email).await? {
        return Ok(member);
    }
    if provider.first_login == FirstLogin::Refuse {
        return Err(refused(format!(
            "{email} is not a member of this team; ask an admin to add you, then sign in again."
        )));
    }
    let role = if provider.admins.contains(&email) {
        MemberRole::Admin
    } else {
        MemberRole::Member
    };
    let record = MemberRecord {
        id: crate::ids::MEMBER.mint(),
        tenant_id: team.id.clone(),
        display_name: display_name(person.name.as_deref(), &email),
        email: email.clone(),
        role: role.as_str().to_string(),
        created_at: state.clock.now_ms(),
        removed_at: None,
    };
    match state.store.insert_member(&record).await {
        Ok(()) => {}
        // The same person signing in twice at once: the other made them.
        Err(StoreError::Conflict(_)) => {
            return state
                .store
                .member_by_email(&team.id, &email)
                .await?
                .ok_or_else(|| refused("Sign in again.".into()));
        }
        Err(e) => return Err(e.into()),
    }
    state
        .audit
        .record(Event {
            tenant_id: &team.id,
            actor: format!("sso:{}", provider.id),
            action: action::MEMBER_ADD,
            target: crate::audit::member_ref(&record.id),
            outcome: "ok",
            detail: Some(format!("first sign-in, role {}", record.role)),
        })
        .await;
    Ok(record)
}

/// A new member's display name: the provider's name for them, cleaned, or the
/// address's local part.
fn display_name(name: Option<&str>, email: &str) -> String {
    let max = latchkey_protocol::text::MAX_LABEL_CHARS;
    name.map(|n| latchkey_protocol::text::clean(n, max))
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            let local = email.split('@').next().unwrap_or(email);
            latchkey_protocol::text::clean(local, max)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::sso::config::FirstLogin;

    fn provider(verified: bool) -> SsoProvider {
        SsoProvider {
            id: "acme".into(),
            label: "Acme".into(),
            issuer: "https://id.acme.example".into(),
            client_id: "latchkey".into(),
            client_secret: None,
            client_secret_file: None,
            team: "default".into(),
            allowed_domains: vec!["acme.example".into()],
            first_login: FirstLogin::Member,
            admins: Vec::new(),
            require_verified_email: verified,
        }
    }

    fn person(email: &str, verified: Option<bool>) -> Person {
        Person {
            email: Some(email.into()),
            email_verified: verified,
            name: None,
        }
    }

    fn why(r: Result<String, ApiError>) -> String {
        let e = r.expect_err("refused");
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        e.message
    }

    #[test]
    fn a_verified_address_in_an_allowed_domain_signs_in_in_lower_case() {
        let p = provider(true);
        assert_eq!(
            address(&p, &person(" Ann@ACME.example", Some(true))).expect("ok"),
            "ann@acme.example"
        );
    }

    #[test]
    fn an_unverified_address_is_refused_unless_the_operator_said_so() {
        assert!(
            why(address(&provider(true), &person("ann@acme.example", None)))
                .contains("not verified")
        );
        assert!(
            why(address(
                &provider(true),
                &person("ann@acme.example", Some(false))
            ))
            .contains("not verified")
        );
        assert!(address(&provider(false), &person("ann@acme.example", None)).is_ok());
    }

    #[test]
    fn other_domains_and_missing_addresses_are_refused() {
        let p = provider(true);
        assert!(
            why(address(&p, &person("ann@evil.example", Some(true)))).contains("not in a domain")
        );
        assert!(why(address(&p, &Person::default())).contains("email"));
        assert!(why(address(&p, &person("not an address", Some(true)))).contains("not one"));
    }

    #[test]
    fn a_new_member_is_named_by_the_provider_or_by_the_address() {
        assert_eq!(
            display_name(Some(" Ann Lee "), "ann@acme.example"),
            "Ann Lee"
        );
        assert_eq!(display_name(Some("  "), "ann@acme.example"), "ann");
        assert_eq!(display_name(None, "ann@acme.example"), "ann");
    }
}
