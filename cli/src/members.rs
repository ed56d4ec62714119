//! `latchkey admin members …`: the people of the team, and `latchkey me …`: a
//! person's own browsers with their own token (docs/people.md).

use latchkey_protocol::agent::{SessionList, StopSessionResult};
use latchkey_protocol::api::{
    CreateMemberRequest, CreateOwnPairingRequest, DeviceList, DeviceView, MemberList,
    MemberRemovedView, MemberView, PairingCreated, UpdateMemberRequest,
};
use reqwest::Method;
use serde_json::Value;

use crate::args::{MeCommand, MembersCommand};
use crate::client::ApiClient;
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, out, table};
use crate::when;

pub async fn run(client: &ApiClient, cmd: MembersCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        MembersCommand::List => {
            let list: MemberList = client
                .call(Method::GET, "/v1/admin/members", None::<&Value>)
                .await?;
            if json {
                crate::output::json(&list);
            } else if list.members.is_empty() {
                out!(
                    "no members; add one with `latchkey admin members add --name NAME --email EMAIL`"
                );
            } else {
                let now = when::now();
                let shown = ids::shorten_each(&list.members, |m| &m.id);
                let rows: Vec<Vec<String>> = list
                    .members
                    .iter()
                    .zip(shown)
                    .map(|(m, id)| {
                        vec![
                            id,
                            m.display_name.clone(),
                            m.email.clone(),
                            m.role.as_str().to_string(),
                            when::relative(&m.created_at, now),
                        ]
                    })
                    .collect();
                table(&["ID", "NAME", "EMAIL", "ROLE", "ADDED"], &rows);
            }
        }
        MembersCommand::Add { name, email, role } => {
            let body = CreateMemberRequest {
                display_name: name,
                email,
                role,
            };
            let m: MemberView = client
                .call(Method::POST, "/v1/admin/members", Some(&body))
                .await?;
            if json {
                crate::output::json(&m);
            } else {
                out!(
                    "member {} added: {} <{}>, {}",
                    cell(&m.id),
                    cell(&m.display_name),
                    cell(&m.email),
                    m.role.as_str()
                );
            }
        }
        MembersCommand::SetRole { id, role } => {
            let id = resolve(client, IdKind::Member, &id).await?;
            let path = format!("/v1/admin/members/{}", crate::tools::segment(&id));
            let m: MemberView = client
                .call(Method::PATCH, &path, Some(&UpdateMemberRequest { role }))
                .await?;
            if json {
                crate::output::json(&m);
            } else {
                out!(
                    "member {} ({}) is now {}",
                    cell(&m.id),
                    cell(&m.display_name),
                    m.role.as_str()
                );
            }
        }
        MembersCommand::Remove { id } => {
            let id = resolve(client, IdKind::Member, &id).await?;
            let path = format!("/v1/admin/members/{}", crate::tools::segment(&id));
            let r: MemberRemovedView = client.call(Method::DELETE, &path, None::<&Value>).await?;
            if json {
                crate::output::json(&r);
            } else {
                out!(
                    "member {} removed: {} browser(s) and {} token(s) revoked, {} pairing link(s) voided",
                    cell(&r.id),
                    r.revoked_devices.len(),
                    r.revoked_tokens.len(),
                    r.voided_pairings
                );
            }
        }
    }
    Ok(())
}

pub async fn run_me(client: &ApiClient, cmd: MeCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        MeCommand::Show => {
            let m: MemberView = client.call(Method::GET, "/v1/me", None::<&Value>).await?;
            if json {
                crate::output::json(&m);
            } else {
                out!(
                    "{} <{}>, {} of the team ({})",
                    cell(&m.display_name),
                    cell(&m.email),
                    m.role.as_str(),
                    cell(&m.id)
                );
            }
        }
        MeCommand::Devices => {
            let list: DeviceList = client
                .call(Method::GET, "/v1/me/devices", None::<&Value>)
                .await?;
            if json {
                crate::output::json(&list);
            } else {
                crate::admin::devices_table(&list.devices);
            }
        }
        MeCommand::Pair { label, ttl } => {
            let body = CreateOwnPairingRequest {
                label,
                ttl_secs: ttl,
            };
            let created: PairingCreated = client
                .call(Method::POST, "/v1/me/pairings", Some(&body))
                .await?;
            if json {
                crate::output::json(&created);
            } else {
                crate::admin::print_link(&created);
            }
        }
        MeCommand::Policy(cmd) => return crate::policy::run_me(client, cmd, json).await,
        MeCommand::Sessions => {
            let list: SessionList = client
                .call(Method::GET, "/v1/me/sessions", None::<&Value>)
                .await?;
            if json {
                crate::output::json(&list);
                return Ok(());
            }
            let mut labels = std::collections::HashMap::new();
            if !list.sessions.is_empty() {
                let devices: DeviceList = client
                    .call(Method::GET, "/v1/me/devices", None::<&Value>)
                    .await?;
                labels.extend(devices.devices.into_iter().map(|d| (d.id, d.label)));
            }
            crate::sessions::sessions_table(&list.sessions, Some(&labels));
        }
        MeCommand::End { id } => {
            let id = resolve(client, IdKind::MySession, &id).await?;
            let path = format!("/v1/me/sessions/{}", crate::tools::segment(&id));
            let r: StopSessionResult = client.call(Method::DELETE, &path, None::<&Value>).await?;
            crate::sessions::say_stopped(&id, &r, "user_stopped", json);
        }
        MeCommand::Audit {
            session,
            limit,
            before,
        } => {
            let session = match session {
                Some(s) => Some(resolve(client, IdKind::MySession, &s).await?),
                None => None,
            };
            let limit = limit.to_string();
            let before = before.map(|b| b.to_string());
            let mut pairs = vec![("limit", limit.as_str())];
            if let Some(b) = &before {
                pairs.push(("before", b));
            }
            if let Some(s) = &session {
                pairs.push(("session", s));
            }
            let list = crate::audit::page(client, "/v1/me/audit", &pairs).await?;
            crate::output::emit(json, &list, || crate::audit::print_page(&list))?;
        }
        MeCommand::Revoke { id } => {
            let id = resolve(client, IdKind::MyDevice, &id).await?;
            let path = format!("/v1/me/devices/{}", crate::tools::segment(&id));
            let d: DeviceView = client.call(Method::DELETE, &path, None::<&Value>).await?;
            if json {
                crate::output::json(&d);
            } else {
                out!(
                    "revoked {}; its live connection, if any, is closed",
                    cell(&d.id)
                );
            }
        }
    }
    Ok(())
}
