//! Delegations on the Agents and tokens page (docs/console.md, "Agents and
//! tokens"; docs/delegation.md): the team's live delegation tokens, each with
//! the API token at its root, what it is narrowed to and when it ends, and
//! Revoke, which ends it and every delegation below it at once, through the
//! delegation API's own function.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use latchkey_protocol::delegation::DelegationScope;

use super::human::When;
use super::page::ConsoleError;
use super::posted::{CsrfForm, Posted};
use crate::api_error::ApiError;
use crate::app::AppState;

/// Live delegations shown at most.
const SHOWN: i64 = 200;

/// One live delegation, never its token.
pub struct DelegationRow {
    pub id: String,
    pub name: String,
    /// The API token at the root of its chain, by name.
    pub root: String,
    /// Delegations between it and its root.
    pub depth: usize,
    /// What it is narrowed to, in words.
    pub scope: String,
    pub created: When,
    pub expires: When,
}

fn scope_words(raw: &str) -> String {
    let scope: DelegationScope = serde_json::from_str(raw).unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(b) = &scope.browsers {
        parts.push(format!("{} browser(s)", b.len()));
    }
    if let Some(s) = &scope.sites {
        parts.push(format!("sites {}", s.join(", ")));
    }
    if let Some(c) = &scope.capabilities {
        let names: Vec<&str> = c.iter().map(|c| c.as_str()).collect();
        parts.push(format!("tools {}", names.join(", ")));
    }
    if scope.session_id.is_some() {
        parts.push("one session".to_string());
    }
    if parts.is_empty() {
        "as its delegator".to_string()
    } else {
        parts.join("; ")
    }
}

/// The team's live delegations, newest first; `token_name` names a root token.
pub async fn rows(
    state: &AppState,
    tenant_id: &str,
    token_name: impl Fn(&str) -> Option<String>,
) -> Result<Vec<DelegationRow>, ApiError> {
    let now = state.clock.now_ms();
    Ok(state
        .store
        .live_delegations(tenant_id, now, SHOWN)
        .await?
        .into_iter()
        .map(|d| DelegationRow {
            root: token_name(&d.root_token_id).unwrap_or_else(|| d.root_token_id.clone()),
            depth: d.chain.split(' ').count().saturating_sub(1),
            scope: scope_words(&d.scope),
            created: When::of(now, d.created_at),
            expires: When::of(now, d.expires_at),
            name: d.name,
            id: d.id,
        })
        .collect())
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    me.admin_only("delegations are revoked here by the team's admins")?;
    crate::delegation::mint::revoke_one(&state, &me.principal, id).await?;
    Ok(Redirect::to("/console/tokens").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_reads_as_words() {
        assert_eq!(scope_words("{}"), "as its delegator");
        assert_eq!(
            scope_words(r#"{"browsers":["a","b"],"sites":["shop.test"],"capabilities":["read"]}"#),
            "2 browser(s); sites shop.test; tools read"
        );
        assert_eq!(scope_words("not json"), "as its delegator");
    }
}
