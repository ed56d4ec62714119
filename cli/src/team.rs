//! `latchkey admin sessions` and `latchkey admin pairings`: what is running on the
//! team's browsers and which pairing links are still outstanding, each with the
//! one action an admin takes on it (stop, void).

use std::collections::HashMap;

use latchkey_protocol::agent::{SessionList, StopSessionResult};
use latchkey_protocol::api::{DeviceList, PairingList, PendingPairingView};
use reqwest::Method;

use crate::args::{PairingsCommand, TeamSessionsCommand};
use crate::client::{ApiClient, NO_BODY};
use crate::error::CliError;
use crate::ids::{self, IdKind, resolve};
use crate::output::{cell, out, table};
use crate::tools::segment;
use crate::when;

pub async fn sessions(
    client: &ApiClient,
    cmd: Option<TeamSessionsCommand>,
    json: bool,
) -> Result<(), CliError> {
    match cmd.unwrap_or(TeamSessionsCommand::List) {
        TeamSessionsCommand::List => {
            let list: SessionList = client
                .call(Method::GET, "/v1/admin/sessions", NO_BODY)
                .await?;
            if json {
                crate::output::json(&list);
                return Ok(());
            }
            // Browsers by the labels their people know them by.
            let mut labels = HashMap::new();
            if !list.sessions.is_empty() {
                let devices: DeviceList = client
                    .call(Method::GET, "/v1/admin/devices", NO_BODY)
                    .await?;
                labels.extend(devices.devices.into_iter().map(|d| (d.id, d.label)));
            }
            crate::sessions::sessions_table(&list.sessions, Some(&labels));
        }
        TeamSessionsCommand::Stop { id } => {
            let id = resolve(client, IdKind::TeamSession, &id).await?;
            let path = format!("/v1/admin/sessions/{}", segment(&id));
            let r: StopSessionResult = client.call(Method::DELETE, &path, NO_BODY).await?;
            crate::sessions::say_stopped(&id, &r, "stopped_by_admin", json);
        }
    }
    Ok(())
}

pub async fn pairings(
    client: &ApiClient,
    cmd: Option<PairingsCommand>,
    json: bool,
) -> Result<(), CliError> {
    match cmd.unwrap_or(PairingsCommand::List) {
        PairingsCommand::List => {
            let list: PairingList = client
                .call(Method::GET, "/v1/admin/pairings", NO_BODY)
                .await?;
            if json {
                crate::output::json(&list);
            } else if list.pairings.is_empty() {
                out!("no pending pairing links; create one with `latchkey admin pair`");
            } else {
                pairings_table(&list.pairings);
            }
        }
        PairingsCommand::Void { id } => {
            let id = resolve(client, IdKind::Pairing, &id).await?;
            let path = format!("/v1/admin/pairings/{}", segment(&id));
            let p: PendingPairingView = client.call(Method::DELETE, &path, NO_BODY).await?;
            if json {
                crate::output::json(&p);
            } else {
                out!(
                    "pairing link {} voided: it can no longer pair a browser",
                    cell(&p.id)
                );
            }
        }
    }
    Ok(())
}

fn pairings_table(pairings: &[PendingPairingView]) {
    let now = when::now();
    let shown = ids::shorten_each(pairings, |p| &p.id);
    let rows: Vec<Vec<String>> = pairings
        .iter()
        .zip(shown)
        .map(|(p, id)| {
            vec![
                id,
                p.label.clone().unwrap_or_else(|| "-".into()),
                p.member.as_ref().map_or_else(
                    || "-".into(),
                    |m| format!("{} <{}>", m.display_name, m.email),
                ),
                p.created_by.clone(),
                when::relative(&p.created_at, now),
                when::relative(&p.expires_at, now),
            ]
        })
        .collect();
    table(&["ID", "LABEL", "FOR", "MADE BY", "MADE", "EXPIRES"], &rows);
}
