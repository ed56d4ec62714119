//! Keeping the team's audit trail (docs/operations.md, "Export" and "Retention"):
//! `latchkey admin audit export | keys | retention`, and `latchkey audit
//! verify-file`, which checks an export offline against the public keys with
//! the same rules the gateway's own `latchkeyd audit verify` uses.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use latchkey_protocol::api::{AuditList, AuditRetention, SetAuditRetention};
use latchkey_protocol::audit_chain::{
    AuditKeySet, ExportHeader, ExportedRow, Fault, VerifyingKeys, Walk,
};
use reqwest::Method;

use crate::args::AuditCommand;
use crate::client::ApiClient;
use crate::client::NO_BODY;
use crate::error::CliError;
use crate::output::{self, emit, out, table};
use crate::{ids, when};

/// An export may take a while for a large team: far beyond the client's 60 s.
const EXPORT_LIMIT: Duration = Duration::from_secs(3_600);

pub async fn run(client: &ApiClient, cmd: AuditCommand, json: bool) -> Result<(), CliError> {
    match cmd {
        AuditCommand::Export { since, until } => {
            let pairs: Vec<(&str, &str)> = [("since", &since), ("until", &until)]
                .into_iter()
                .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
                .collect();
            let url =
                reqwest::Url::parse_with_params("http://latchkey/v1/admin/audit/export", &pairs)
                    .map_err(|e| CliError::Config(format!("cannot build the query: {e}")))?;
            let path = format!("{}?{}", url.path(), url.query().unwrap_or_default());
            let mut response = client
                .send(Method::GET, &path, NO_BODY, Some(EXPORT_LIMIT))
                .await?;
            let mut stdout = std::io::stdout().lock();
            while let Some(chunk) = client.chunk(&mut response).await? {
                stdout
                    .write_all(&chunk)
                    .map_err(|e| CliError::Config(format!("cannot write the export: {e}")))?;
            }
            stdout
                .flush()
                .map_err(|e| CliError::Config(format!("cannot write the export: {e}")))?;
            Ok(())
        }
        AuditCommand::Keys => {
            let set: AuditKeySet = client
                .call(Method::GET, "/v1/admin/audit/keys", NO_BODY)
                .await?;
            // Always JSON: the file `verify-file --keys` reads.
            output::json(&set);
            Ok(())
        }
        AuditCommand::Retention { days } => {
            let now: AuditRetention = match days {
                None => {
                    client
                        .call(Method::GET, "/v1/admin/audit/retention", NO_BODY)
                        .await?
                }
                Some(days) => {
                    let days = match days.as_str() {
                        "default" => None,
                        n => Some(n.parse::<u32>().map_err(|_| {
                            CliError::Config(format!(
                                "retention must be a number of days or `default`, not {n:?}"
                            ))
                        })?),
                    };
                    client
                        .call(
                            Method::PUT,
                            "/v1/admin/audit/retention",
                            Some(&SetAuditRetention { days }),
                        )
                        .await?
                }
            };
            emit(json, &now, || {
                out!(
                    "audit rows are kept {} days{}",
                    now.days,
                    if now.is_default {
                        " (the gateway's default)"
                    } else {
                        ""
                    }
                )
            })
        }
    }
}

/// One page of an audit listing at `path` (`/v1/admin/audit`, `/v1/me/audit`)
/// with `pairs` as its query, encoded by the URL type: values hold `:` and `+`.
pub async fn page(
    client: &ApiClient,
    path: &str,
    pairs: &[(&str, &str)],
) -> Result<AuditList, CliError> {
    let url = reqwest::Url::parse_with_params(&format!("http://latchkey{path}"), pairs)
        .map_err(|e| CliError::Config(format!("cannot build the query: {e}")))?;
    let path = format!("{}?{}", url.path(), url.query().unwrap_or_default());
    client.call(Method::GET, &path, NO_BODY).await
}

/// A page of rows as a table, and how to get the next.
pub fn print_page(list: &AuditList) {
    let now = when::now();
    let rows: Vec<Vec<String>> = list
        .events
        .iter()
        .map(|e| {
            vec![
                e.id.to_string(),
                when::relative(&e.at, now),
                ids::abbreviate(&e.actor),
                e.action.clone(),
                ids::abbreviate(&e.target),
                e.outcome.clone(),
                ids::abbreviate(e.detail.as_deref().unwrap_or_default()),
            ]
        })
        .collect();
    table(
        &["ID", "AT", "ACTOR", "ACTION", "TARGET", "OUTCOME", "DETAIL"],
        &rows,
    );
    if let Some(next) = list.next_before {
        out!("(more: --before {next})");
    }
}

/// What an intact export holds.
#[derive(Debug, serde::Serialize)]
pub struct FileReport {
    pub team: String,
    pub rows: i64,
    pub first: i64,
    pub last: i64,
    pub checkpoints: i64,
    pub signed_through: i64,
    /// Rows after the last checkpoint: chained, but no signature covers them.
    pub unsigned: i64,
}

fn broken(line: usize, why: impl std::fmt::Display) -> CliError {
    CliError::AuditBroken(format!("line {line}: {why}"))
}

/// Check an export read from `reader` against `keys`.
pub fn verify_export(reader: impl BufRead, keys: &VerifyingKeys) -> Result<FileReport, CliError> {
    let mut lines = reader.lines();
    let header: ExportHeader = match lines.next() {
        Some(Ok(text)) => serde_json::from_str(&text)
            .map_err(|e| broken(1, format!("not an audit export's header: {e}")))?,
        Some(Err(e)) => return Err(CliError::Config(format!("cannot read the export: {e}"))),
        None => return Err(broken(1, "the file is empty")),
    };
    if header.latchkey_audit_export != 1 {
        return Err(broken(
            1,
            format!(
                "export format {} is not one this CLI reads",
                header.latchkey_audit_export
            ),
        ));
    }
    let mut walk = Walk::after(keys, header.after_seq, header.after_hash.clone());
    for (i, text) in lines.enumerate() {
        let n = i + 2;
        let text = text.map_err(|e| CliError::Config(format!("cannot read the export: {e}")))?;
        let row: ExportedRow =
            serde_json::from_str(&text).map_err(|e| broken(n, format!("not an audit row: {e}")))?;
        if crate::when::parse_ms(&row.at) != Some(row.at_ms) {
            return Err(broken(
                n,
                format!("row {}'s at and at_ms disagree", row.seq),
            ));
        }
        walk.step(&row.as_row(&header.tenant_id))
            .map_err(|f: Fault| broken(n, f))?;
    }
    let s = walk.summary();
    Ok(FileReport {
        team: header.team,
        rows: s.rows,
        first: s.first,
        last: s.last,
        checkpoints: s.checkpoints,
        signed_through: s.signed_through,
        unsigned: s.unsigned(),
    })
}

/// `latchkey audit verify-file FILE --keys KEYS`.
pub fn verify_file(file: &Path, keys: &Path, json: bool) -> Result<(), CliError> {
    let read = |p: &Path| {
        std::fs::File::open(p)
            .map_err(|e| CliError::Config(format!("cannot read {}: {e}", p.display())))
    };
    let set: AuditKeySet =
        serde_json::from_reader(std::io::BufReader::new(read(keys)?)).map_err(|e| {
            CliError::Config(format!("{} is not an audit key set: {e}", keys.display()))
        })?;
    let keys = VerifyingKeys::from_set(&set)
        .map_err(|e| CliError::Config(format!("{}: {e}", keys.display())))?;
    let report = verify_export(std::io::BufReader::new(read(file)?), &keys)?;
    if report.rows > 0 && report.checkpoints == 0 {
        return Err(CliError::AuditBroken(
            "no signed checkpoint in the file: nothing in it is signed".into(),
        ));
    }
    emit(json, &report, || {
        out!(
            "team {}: {} rows ({}..{}), chain intact; {} signed checkpoint{}, the last covering rows up to {}{}",
            report.team,
            report.rows,
            report.first,
            report.last,
            report.checkpoints,
            if report.checkpoints == 1 { "" } else { "s" },
            report.signed_through,
            if report.unsigned > 0 {
                format!("; {} rows after it are not signed", report.unsigned)
            } else {
                String::new()
            }
        )
    })
}
