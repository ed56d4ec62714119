//! `latchkey token …` (docs/delegation.md): with an agent's own token (or a
//! delegation token), mint a narrower, short-lived delegation for a sub-agent or
//! one workflow run, list those minted, revoke one.

use clap::Subcommand;
use latchkey_protocol::delegation::{
    CreateDelegationRequest, DelegationList, DelegationRevoked, DelegationScope, DelegationView,
};
use latchkey_protocol::policy::Capability;
use reqwest::Method;
use serde_json::Value;

use crate::args::{parse_capability, parse_ttl};
use crate::client::ApiClient;
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, out, table};
use crate::tools::segment;
use crate::when;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Mint a delegation token from yours, narrowed to what you name; prints it once.
    Delegate {
        /// Lifetime, e.g. 15m, 2h (at most 24h, and no longer than your token's).
        #[arg(long, value_parser = parse_ttl)]
        ttl: u64,
        /// Browsers (ids) it may use; default: yours.
        #[arg(long = "browser", value_delimiter = ',')]
        browsers: Option<Vec<String>>,
        /// Host patterns it may open (example.com, *.example.com); default: yours.
        #[arg(long = "site", value_delimiter = ',')]
        sites: Option<Vec<String>>,
        /// Capability classes: read, input, navigate, script, borrow; default: yours.
        #[arg(long = "cap", value_delimiter = ',', value_parser = parse_capability)]
        capabilities: Option<Vec<Capability>>,
        /// Only this session of yours; it starts none of its own.
        #[arg(long = "only-session")]
        session_id: Option<String>,
        /// A name for the audit trail.
        #[arg(long)]
        name: Option<String>,
    },
    /// The delegations you minted, and those below them.
    Delegations,
    /// Revoke a delegation (and every one minted from it): what it holds ends at once.
    Revoke {
        /// The delegation's id (del_…), or a unique prefix of it.
        id: String,
    },
}

fn scope_text(s: &DelegationScope) -> String {
    let mut parts = Vec::new();
    if let Some(b) = &s.browsers {
        let shown = ids::shorten_each(b, |b| b);
        parts.push(format!("browsers {}", shown.join(",")));
    }
    if let Some(x) = &s.sites {
        parts.push(format!("sites {}", x.join(",")));
    }
    if let Some(c) = &s.capabilities {
        let names: Vec<&str> = c.iter().map(|c| c.as_str()).collect();
        parts.push(format!("caps {}", names.join(",")));
    }
    if let Some(id) = &s.session_id {
        parts.push(format!("session {id}"));
    }
    if parts.is_empty() {
        "as its delegator".into()
    } else {
        cell(&parts.join("; "))
    }
}

pub async fn run(client: &ApiClient, cmd: TokenCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        TokenCommand::Delegate {
            ttl,
            browsers,
            sites,
            capabilities,
            session_id,
            name,
        } => {
            let browsers = ids::resolve_all(client, IdKind::Browser, browsers).await?;
            let session_id = match session_id {
                Some(s) => Some(resolve(client, IdKind::Session, &s).await?),
                None => None,
            };
            let body = CreateDelegationRequest {
                ttl_secs: ttl,
                name,
                scope: DelegationScope {
                    browsers,
                    sites,
                    capabilities,
                    session_id,
                },
            };
            let d: DelegationView = client
                .call(Method::POST, "/v1/delegations", Some(&body))
                .await?;
            if json {
                crate::output::json(&d);
            } else {
                out!(
                    "delegation {} until {} ({}): {}",
                    cell(&d.id),
                    cell(&d.expires_at),
                    when::relative(&d.expires_at, when::now()),
                    scope_text(&d.scope)
                );
                out!("token (shown once): {}", d.token.as_deref().unwrap_or(""));
            }
        }
        TokenCommand::Delegations => {
            let list: DelegationList = client
                .call(Method::GET, "/v1/delegations", None::<&Value>)
                .await?;
            if json {
                crate::output::json(&list);
            } else {
                let now = when::now();
                let shown = ids::shorten_each(&list.delegations, |d| &d.id);
                let rows: Vec<Vec<String>> = list
                    .delegations
                    .iter()
                    .zip(shown)
                    .map(|(d, id)| {
                        vec![
                            id,
                            d.name.clone(),
                            scope_text(&d.scope),
                            when::relative(&d.expires_at, now),
                            when::relative_opt(d.revoked_at.as_deref(), now),
                        ]
                    })
                    .collect();
                table(&["ID", "NAME", "SCOPE", "EXPIRES", "REVOKED"], &rows);
            }
        }
        TokenCommand::Revoke { id } => {
            let id = resolve(client, IdKind::Delegation, &id).await?;
            let path = format!("/v1/delegations/{}", segment(&id));
            let r: DelegationRevoked = client.call(Method::DELETE, &path, None::<&Value>).await?;
            if json {
                crate::output::json(&r);
            } else {
                let n = r.revoked.len();
                out!(
                    "revoked {} ({n} delegation(s) in all); what they held has ended",
                    cell(&id)
                );
            }
        }
    }
    Ok(())
}
