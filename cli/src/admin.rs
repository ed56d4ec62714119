//! `latchkey admin …`: pairing links, devices, tokens, audit (members: `members.rs`).

use latchkey_protocol::api::{
    CreatePairingRequest, CreateTokenRequest, DeviceList, DeviceView, ForgetResult, PairingCreated,
    RenameDeviceRequest, RevokeAllResult, TokenCreated, TokenList, TokenView,
};
use reqwest::Method;

use crate::args::{AdminCommand, TokensCommand};
use crate::client::{ApiClient, NO_BODY};
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, emit, out, table};
use crate::when;

/// Run one admin command; prints JSON or human output.
pub async fn run(client: &ApiClient, cmd: AdminCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        AdminCommand::Members(cmd) => crate::members::run(client, cmd, json).await,
        AdminCommand::Policy(cmd) => crate::policy::run_admin(client, cmd, json).await,
        AdminCommand::Pairings { command } => crate::team::pairings(client, command, json).await,
        AdminCommand::Webhooks(command) => crate::webhooks::run(client, command, json).await,
        AdminCommand::Sessions { command } => crate::team::sessions(client, command, json).await,
        AdminCommand::Pair {
            label,
            ttl,
            member,
            quiet,
        } => {
            let member_id = match member {
                Some(m) => Some(resolve(client, IdKind::Member, &m).await?),
                None => None,
            };
            let body = CreatePairingRequest {
                label,
                ttl_secs: ttl,
                member_id,
            };
            let created: PairingCreated = client
                .call(Method::POST, "/v1/admin/pairings", Some(&body))
                .await?;
            if quiet && !json {
                out!("{}", cell_whole(&created.link));
                return Ok(());
            }
            emit(json, &created, || print_link(&created))
        }
        AdminCommand::Devices => {
            let list: DeviceList = client
                .call(Method::GET, "/v1/admin/devices", NO_BODY)
                .await?;
            emit(json, &list, || devices_table(&list.devices))
        }
        AdminCommand::Rename { id, label } => {
            let id = resolve(client, IdKind::Device, &id).await?;
            let body = RenameDeviceRequest { label };
            let d: DeviceView = client
                .call(
                    Method::PATCH,
                    &format!("/v1/admin/devices/{}", crate::tools::segment(&id)),
                    Some(&body),
                )
                .await?;
            emit(json, &d, || {
                out!(
                    "device {} is now labelled {:?}",
                    cell(&d.id),
                    cell(&d.label)
                )
            })
        }
        AdminCommand::Revoke { id, all } => {
            if all {
                let r: RevokeAllResult = client
                    .call(Method::POST, "/v1/admin/devices/revoke-all", NO_BODY)
                    .await?;
                emit(json, &r, || {
                    out!(
                        "revoked {} device(s); voided {} unused pairing link(s)",
                        r.revoked_devices,
                        r.voided_pairings
                    )
                })
            } else {
                let id = resolve(client, IdKind::Device, &id.unwrap_or_default()).await?;
                let d: DeviceView = client
                    .call(
                        Method::DELETE,
                        &format!("/v1/admin/devices/{}", crate::tools::segment(&id)),
                        NO_BODY,
                    )
                    .await?;
                emit(json, &d, || {
                    out!("device {} revoked; its connection was closed", cell(&d.id))
                })
            }
        }
        AdminCommand::Forget { id } => {
            let id = resolve(client, IdKind::Device, &id).await?;
            let r: ForgetResult = client
                .call(
                    Method::POST,
                    &format!("/v1/admin/devices/{}/forget", crate::tools::segment(&id)),
                    NO_BODY,
                )
                .await?;
            emit(json, &r, || {
                out!("device {} forgotten; it is off the list", cell(&r.id))
            })
        }
        AdminCommand::Tokens(TokensCommand::Create {
            name,
            role,
            ttl,
            member,
            quiet,
        }) => {
            let member_id = match member {
                Some(m) => Some(resolve(client, IdKind::Member, &m).await?),
                None => None,
            };
            let body = CreateTokenRequest {
                name,
                role,
                ttl_secs: ttl,
                member_id,
            };
            let t: TokenCreated = client
                .call(Method::POST, "/v1/admin/tokens", Some(&body))
                .await?;
            if quiet && !json {
                out!("{}", cell_whole(&t.token));
                return Ok(());
            }
            emit(json, &t, || {
                out!(
                    "token {} ({}, role {}) created. Secret, shown once:",
                    t.view.id,
                    t.view.name,
                    t.view.role.as_str()
                );
                out!("  {}", cell_whole(&t.token));
            })
        }
        AdminCommand::Tokens(TokensCommand::List) => {
            let list: TokenList = client
                .call(Method::GET, "/v1/admin/tokens", NO_BODY)
                .await?;
            emit(json, &list, || tokens_table(&list.tokens))
        }
        AdminCommand::Tokens(TokensCommand::Revoke { id }) => {
            let id = resolve(client, IdKind::Token, &id).await?;
            let t: TokenView = client
                .call(
                    Method::DELETE,
                    &format!("/v1/admin/tokens/{}", crate::tools::segment(&id)),
                    NO_BODY,
                )
                .await?;
            emit(json, &t, || {
                out!("token {} ({}) revoked", cell(&t.id), cell(&t.name))
            })
        }
        AdminCommand::Audit {
            command: Some(command),
            ..
        } => crate::audit::run(client, command, json).await,
        AdminCommand::Audit {
            command: None,
            limit,
            before,
            filter,
        } => {
            let limit = limit.to_string();
            let before = before.map(|b| b.to_string());
            let mut pairs = vec![("limit", limit.as_str())];
            if let Some(b) = &before {
                pairs.push(("before", b.as_str()));
            }
            pairs.extend(filter.pairs());
            let list = crate::audit::page(client, "/v1/admin/audit", &pairs).await?;
            emit(json, &list, || crate::audit::print_page(&list))
        }
    }
}

/// A secret or link printed whole (cutting it would make it useless), still
/// without any unsafe character.
fn cell_whole(raw: &str) -> String {
    crate::output::lines(raw).replace('\n', " ")
}

/// A new pairing link, for a person to paste into the extension.
pub fn print_link(created: &PairingCreated) {
    out!(
        "Pairing link (single use, expires {}, at {}):",
        when::relative(&created.expires_at, when::now()),
        cell(&created.expires_at)
    );
    out!("  {}", cell_whole(&created.link));
    out!("Paste it into the Latchkey extension's popup on the browser to lend.");
}

pub fn devices_table(devices: &[DeviceView]) {
    if devices.is_empty() {
        out!("no devices; create a pairing link with `latchkey admin pair`");
        return;
    }
    let now = when::now();
    let shown = ids::shorten_each(devices, |d| &d.id);
    let rows: Vec<Vec<String>> = devices
        .iter()
        .zip(shown)
        .map(|(d, id)| {
            vec![
                id,
                d.label.clone(),
                owner(d),
                format!("{:?}", d.status).to_lowercase(),
                if d.online {
                    "online".into()
                } else {
                    "offline".into()
                },
                when::relative(&d.expires_at, now),
                when::relative_opt(d.last_seen_at.as_deref(), now),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "LABEL",
            "OWNER",
            "STATUS",
            "CONNECTION",
            "EXPIRES",
            "LAST SEEN",
        ],
        &rows,
    );
}

/// Whose a browser is: the member's name and email, else the token that paired it.
fn owner(d: &DeviceView) -> String {
    match &d.owner {
        Some(m) => format!("{} <{}>", m.display_name, m.email),
        None => format!("({})", d.created_by),
    }
}

fn tokens_table(tokens: &[TokenView]) {
    let now = when::now();
    let shown = ids::shorten_each(tokens, |t| &t.id);
    let rows: Vec<Vec<String>> = tokens
        .iter()
        .zip(shown)
        .map(|(t, id)| {
            vec![
                id,
                t.name.clone(),
                t.role.as_str().to_string(),
                when::relative(&t.created_at, now),
                when::relative_opt(t.expires_at.as_deref(), now),
                when::relative_opt(t.revoked_at.as_deref(), now),
                when::relative_opt(t.last_used_at.as_deref(), now),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "NAME",
            "ROLE",
            "CREATED",
            "EXPIRES",
            "REVOKED",
            "LAST USED",
        ],
        &rows,
    );
}

/// Narrow `latchkey admin audit` (docs/operations.md, "Audit").
#[derive(Debug, Default, clap::Args)]
pub struct AuditFilterArgs {
    /// An action (`session.call`), or a family (`session.*`).
    #[arg(long)]
    pub action: Option<String>,
    /// Who acted: `token:<name>`, `device:<id>`, `system`.
    #[arg(long)]
    pub actor: Option<String>,
    /// What it was about: `session:<id>`, `device:<id>`, …
    #[arg(long)]
    pub target: Option<String>,
    /// `ok`, or an error code.
    #[arg(long)]
    pub outcome: Option<String>,
    /// From this long ago (`2h`, `7d`) or this RFC 3339 time.
    #[arg(long)]
    pub since: Option<String>,
    /// Up to this long ago or this RFC 3339 time.
    #[arg(long)]
    pub until: Option<String>,
}

impl AuditFilterArgs {
    /// The query pairs the API takes.
    pub fn pairs(&self) -> Vec<(&'static str, &str)> {
        [
            ("action", &self.action),
            ("actor", &self.actor),
            ("target", &self.target),
            ("outcome", &self.outcome),
            ("since", &self.since),
            ("until", &self.until),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
        .collect()
    }
}
