//! `latchkey`: the command-line client for agents and team admins.
//!
//! Exit codes come from the protocol crate's one table; with `--json` every command
//! prints exactly one JSON document on stdout, errors included.

mod admin;
mod args;
mod audit;
mod catalogue;
mod client;
mod delegations;
mod error;
mod ids;
mod members;
mod output;
mod policy;
mod profile;
mod sessions;
mod team;
mod tools;
mod webhooks;
mod when;

use std::process::ExitCode;

use latchkey_protocol::api::TokenList;
use reqwest::Method;

use crate::args::{AuditFileCommand, Cli, Command, DEFAULT_PROFILE, Global};
use crate::client::ApiClient;
use crate::error::CliError;
use crate::output::{note, out};
use crate::profile::{Profile, Profiles};

fn main() -> ExitCode {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = args::parse();
    let json = cli.global.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            note!("latchkey: cannot start: {e}");
            return ExitCode::from(latchkey_protocol::error_code::exit::FAILURE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json {
                output::json(&e.to_json());
            } else {
                // The message and reason may come from the browser: made safe.
                let message = output::lines(&e.message());
                match e
                    .data()
                    .and_then(|d| d.get("reason"))
                    .and_then(|r| r.as_str())
                {
                    Some(reason) => {
                        note!(
                            "latchkey: {} ({}): {message}",
                            e.code(),
                            output::cell(reason)
                        )
                    }
                    None => note!("latchkey: {}: {message}", e.code()),
                }
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// URL and token from flags/variables, else the named profile.
fn resolve(global: &Global) -> Result<Profile, CliError> {
    let mut profiles = Profiles::load()?;
    let saved = profiles.profiles.remove(&global.profile);
    // A profile named on purpose that does not exist is a mistake, not "use the
    // environment instead".
    if saved.is_none() && global.profile != DEFAULT_PROFILE {
        let known: Vec<&str> = profiles.profiles.keys().map(String::as_str).collect();
        return Err(CliError::Config(format!(
            "profile {:?} does not exist{}",
            global.profile,
            if known.is_empty() {
                "; run `latchkey login --url URL --token TOKEN` to save one".to_string()
            } else {
                format!("; saved profiles: {}", known.join(", "))
            }
        )));
    }
    let url = global
        .url
        .clone()
        .or_else(|| saved.as_ref().map(|p| p.url.clone()))
        .ok_or_else(|| {
            CliError::Config(
                "no server URL: pass --url, set LATCHKEY_URL or run `latchkey login`".into(),
            )
        })?;
    let token = global
        .token
        .clone()
        .or_else(|| saved.as_ref().map(|p| p.token.clone()))
        .ok_or_else(|| {
            CliError::Config(
                "no token: pass --token, set LATCHKEY_TOKEN or run `latchkey login`".into(),
            )
        })?;
    Ok(Profile { url, token })
}

/// A client for the resolved profile.
fn connect(global: &Global) -> Result<ApiClient, CliError> {
    let profile = resolve(global)?;
    ApiClient::new(
        &profile.url,
        &profile.token,
        global.ca_cert.as_deref(),
        &global.profile,
    )
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let ca = cli.global.ca_cert.as_deref();
    match cli.command {
        Command::Login { url, token } => {
            let client = ApiClient::new(&url, &token, ca, &cli.global.profile)?;
            // Prove the pair works before saving it (an admin token lists tokens;
            // an agent token is refused there with permission_denied, which still
            // proves it authenticates).
            match client
                .call::<TokenList>(Method::GET, "/v1/admin/tokens", None::<&()>)
                .await
            {
                Ok(_) => {}
                Err(CliError::Api {
                    code: latchkey_protocol::ErrorCode::PermissionDenied,
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
            let mut profiles = Profiles::load()?;
            profiles.profiles.insert(
                cli.global.profile.clone(),
                Profile {
                    url: url.clone(),
                    token,
                },
            );
            let path = profiles.save()?;
            if cli.global.json {
                output::json(
                    &serde_json::json!({"profile": cli.global.profile, "url": url, "saved_to": path}),
                );
            } else {
                out!(
                    "logged in to {url} as profile {:?} (saved in {})",
                    cli.global.profile,
                    path.display()
                );
            }
            Ok(())
        }
        Command::Admin(cmd) => admin::run(&connect(&cli.global)?, cmd, cli.global.json).await,
        Command::Me(cmd) => members::run_me(&connect(&cli.global)?, cmd, cli.global.json).await,
        Command::Token(cmd) => delegations::run(&connect(&cli.global)?, cmd, cli.global.json).await,
        Command::Browsers => sessions::browsers(&connect(&cli.global)?, cli.global.json).await,
        Command::Tools => catalogue::list(cli.global.json),
        Command::Audit(AuditFileCommand::VerifyFile { file, keys }) => {
            audit::verify_file(&file, &keys, cli.global.json)
        }
        Command::Session(cmd) => {
            sessions::session(&connect(&cli.global)?, cmd, cli.global.json).await
        }
        Command::Tool(cmd) => {
            let client = connect(&cli.global)?;
            let session = cli.global.session.as_deref();
            tools::tool(
                &client,
                session,
                cli.global.timeout_ms,
                cmd,
                cli.global.json,
            )
            .await
        }
    }
}
