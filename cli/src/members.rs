//! `latchkey admin members …`: the people of the team (docs/people.md).

use latchkey_protocol::api::{CreateMemberRequest, MemberList, MemberRemovedView, MemberView};
use reqwest::Method;
use serde_json::Value;

use crate::args::MembersCommand;
use crate::client::ApiClient;
use crate::error::CliError;
use crate::output::{cell, out, table};

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
                let rows: Vec<Vec<String>> = list
                    .members
                    .iter()
                    .map(|m| {
                        vec![
                            m.id.clone(),
                            m.display_name.clone(),
                            m.email.clone(),
                            m.role.as_str().to_string(),
                            m.created_at.clone(),
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
        MembersCommand::Remove { id } => {
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
