//! `latchkey admin policy …` and `latchkey me policy …` (docs/policy.md): show a
//! layer's policy (and the effective one, with where each limit came from), or
//! replace it from flags or a JSON file. The server judges every value.

use std::io::Read;

use latchkey_protocol::api::PolicyView;
use latchkey_protocol::policy::{Capability, EffectivePolicy, Layer, Limit, Policy};
use reqwest::Method;
use serde_json::Value;

use crate::args::{AdminPolicyCommand, MePolicyCommand, PolicyArgs};
use crate::client::ApiClient;
use crate::error::CliError;
use crate::ids::{IdKind, resolve};
use crate::output::{cell, out};
use crate::tools::segment;

pub async fn run_admin(
    client: &ApiClient,
    cmd: AdminPolicyCommand,
    json: bool,
) -> Result<(), CliError> {
    let (AdminPolicyCommand::Show { device, .. } | AdminPolicyCommand::Set { device, .. }) = &cmd;
    let path = match device {
        Some(id) => format!(
            "/v1/admin/devices/{}/policy",
            segment(&resolve(client, IdKind::Device, id).await?)
        ),
        None => "/v1/admin/policy".to_string(),
    };
    match cmd {
        AdminPolicyCommand::Show { effective, .. } => show(client, &path, effective, json).await,
        AdminPolicyCommand::Set { policy, .. } => set(client, &path, policy, json).await,
    }
}

pub async fn run_me(client: &ApiClient, cmd: MePolicyCommand, json: bool) -> Result<(), CliError> {
    let (MePolicyCommand::Show { id, .. } | MePolicyCommand::Set { id, .. }) = &cmd;
    let path = format!(
        "/v1/me/devices/{}/policy",
        segment(&resolve(client, IdKind::MyDevice, id).await?)
    );
    match cmd {
        MePolicyCommand::Show { effective, .. } => show(client, &path, effective, json).await,
        MePolicyCommand::Set { policy, .. } => set(client, &path, policy, json).await,
    }
}

async fn show(client: &ApiClient, path: &str, effective: bool, json: bool) -> Result<(), CliError> {
    let path = if effective {
        format!("{path}?effective=true")
    } else {
        path.to_string()
    };
    let view: PolicyView = client.call(Method::GET, &path, None::<&Value>).await?;
    if json {
        crate::output::json(&view);
    } else {
        print_view(&view);
    }
    Ok(())
}

async fn set(
    client: &ApiClient,
    path: &str,
    mut args: PolicyArgs,
    json: bool,
) -> Result<(), CliError> {
    args.agents = crate::ids::resolve_all(client, IdKind::Token, args.agents.take()).await?;
    let body = body_of(args)?;
    let view: PolicyView = client.call(Method::PUT, path, Some(&body)).await?;
    if json {
        crate::output::json(&view);
    } else {
        print_view(&view);
        if let Some(n) = view.sessions_ended.filter(|n| *n > 0) {
            out!("{n} open session(s) it no longer admits were ended");
        }
    }
    Ok(())
}

/// The request body: the file's JSON as it is, or the flags as a policy.
fn body_of(args: PolicyArgs) -> Result<Value, CliError> {
    if let Some(file) = args.file {
        let mut text = String::new();
        let read = if file.as_os_str() == "-" {
            std::io::stdin().read_to_string(&mut text).map(|_| ())
        } else {
            std::fs::read_to_string(&file).map(|t| text = t)
        };
        read.map_err(|e| CliError::Config(format!("cannot read {}: {e}", file.display())))?;
        return serde_json::from_str(&text)
            .map_err(|e| CliError::Config(format!("{} is not JSON: {e}", file.display())));
    }
    let consent = args
        .consent
        .map(|c| serde_json::from_value(Value::String(c)))
        .transpose()
        .map_err(|e| CliError::Config(format!("--consent: {e}")))?;
    let policy = Policy {
        agents: args.agents,
        consent,
        allow_sites: args.allow_sites,
        block_sites: args.block_sites,
        schemes: args.schemes,
        capabilities: args.capabilities,
        max_session_minutes: args
            .max_session
            .map(|secs| u32::try_from(secs.div_ceil(60)).unwrap_or(u32::MAX)),
    };
    serde_json::to_value(policy).map_err(|e| CliError::Config(e.to_string()))
}

fn list(items: &[String]) -> String {
    items.iter().map(|i| cell(i)).collect::<Vec<_>>().join(", ")
}

fn classes(items: &[Capability]) -> String {
    items
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_view(view: &PolicyView) {
    match (&view.scope, &view.device_id) {
        (Layer::Device, Some(id)) => out!("policy of browser {}", cell(id)),
        _ => out!("policy of the team"),
    }
    let p = &view.policy;
    let row = |name: &str, value: Option<String>| {
        out!("  {name:<14} {}", value.unwrap_or_else(|| "-".to_string()));
    };
    row("agents", p.agents.as_deref().map(list));
    row("consent", p.consent.map(|c| c.as_str().to_string()));
    row("allow sites", p.allow_sites.as_deref().map(list));
    row("block sites", p.block_sites.as_deref().map(list));
    row("schemes", p.schemes.as_deref().map(list));
    row("capabilities", p.capabilities.as_deref().map(classes));
    row(
        "max session",
        p.max_session_minutes.map(|m| format!("{m} min")),
    );
    if let Some(e) = &view.effective {
        print_effective(e);
    }
}

/// Where a limit came from, in words.
fn from<T>(limit: &Limit<T>) -> String {
    if limit.from.is_empty() {
        return "default".to_string();
    }
    limit
        .from
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(" and ")
}

fn print_effective(e: &EffectivePolicy) {
    out!("effective (what sessions run under)");
    let agents = match &e.agents.value {
        None => "every agent of the team".to_string(),
        Some(ids) if ids.is_empty() => "none".to_string(),
        Some(ids) => list(ids),
    };
    out!("  {:<14} {agents}  [{}]", "agents", from(&e.agents));
    out!(
        "  {:<14} {}  [{}]",
        "consent",
        e.consent.value.as_str(),
        from(&e.consent)
    );
    if e.allow_sites.is_empty() {
        out!("  {:<14} any host not blocked  [default]", "allow sites");
    }
    for l in &e.allow_sites {
        out!(
            "  {:<14} one of {}  [{}]",
            "allow sites",
            list(&l.patterns),
            l.from.as_str()
        );
    }
    for b in &e.block_sites {
        out!(
            "  {:<14} {}  [{}]",
            "block sites",
            cell(&b.pattern),
            b.from.as_str()
        );
    }
    out!(
        "  {:<14} {}  [{}]",
        "schemes",
        list(&e.schemes.value),
        from(&e.schemes)
    );
    out!(
        "  {:<14} {}  [{}]",
        "capabilities",
        classes(&e.capabilities.value),
        from(&e.capabilities)
    );
    let max = e
        .max_session_minutes
        .value
        .map_or("none".to_string(), |m| format!("{m} min"));
    out!(
        "  {:<14} {max}  [{}]",
        "max session",
        from(&e.max_session_minutes)
    );
}
