//! Tool commands: every tool call of a session, each turned into one request of
//! the agent API.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use latchkey_protocol::agent::{CallRequest, CallResult};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::args::{TabCommand, ToolCommand};
use crate::client::ApiClient;
use crate::error::CliError;
use crate::ids::{IdKind, resolve};
use crate::output::{cell, lines, note, out};

fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    crate::output::json(value);
    Ok(())
}

/// `e12` / `@e12` is an element ref; anything else a CSS selector.
fn target(t: &str) -> (&'static str, Value) {
    let bare = t.strip_prefix('@').unwrap_or(t);
    let is_ref =
        bare.len() > 1 && bare.starts_with('e') && bare[1..].bytes().all(|b| b.is_ascii_digit());
    if is_ref {
        ("ref", json!(bare))
    } else {
        ("selector", json!(t))
    }
}

fn with_target(mut params: Map<String, Value>, t: &str) -> Map<String, Value> {
    let (key, value) = target(t);
    params.insert(key.into(), value);
    params
}

fn obj(pairs: &[(&str, Option<Value>)]) -> Map<String, Value> {
    pairs
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.to_string(), v)))
        .collect()
}

/// The method and params a tool command stands for.
fn request(cmd: &ToolCommand) -> Result<(String, Map<String, Value>), CliError> {
    let tab = |t: &Option<i64>| t.map(|t| json!(t));
    let s = |v: &Option<String>| v.as_ref().map(|v| json!(v));
    Ok(match cmd {
        ToolCommand::Tab(t) => match t {
            TabCommand::List { scope } => ("tool.tab_list".into(), obj(&[("scope", s(scope))])),
            TabCommand::Create { url, background } => (
                "tool.tab_create".into(),
                obj(&[
                    ("url", s(url)),
                    ("active", background.then_some(json!(false))),
                ]),
            ),
            TabCommand::Close { id } => {
                ("tool.tab_close".into(), obj(&[("tab_id", Some(json!(id)))]))
            }
            TabCommand::Select { id } => (
                "tool.tab_select".into(),
                obj(&[("tab_id", Some(json!(id)))]),
            ),
            TabCommand::Borrow { id } => (
                "tool.tab_borrow".into(),
                obj(&[("tab_id", Some(json!(id)))]),
            ),
            TabCommand::Return { id } => (
                "tool.tab_return".into(),
                obj(&[("tab_id", Some(json!(id)))]),
            ),
        },
        ToolCommand::Navigate {
            url,
            wait_until,
            tab: t,
        } => (
            "tool.navigate".into(),
            obj(&[
                ("url", Some(json!(url))),
                ("wait_until", s(wait_until)),
                ("tab_id", tab(t)),
            ]),
        ),
        ToolCommand::Back { tab: t } => ("tool.navigate_back".into(), obj(&[("tab_id", tab(t))])),
        ToolCommand::Forward { tab: t } => {
            ("tool.navigate_forward".into(), obj(&[("tab_id", tab(t))]))
        }
        ToolCommand::Reload { hard, tab: t } => (
            "tool.reload".into(),
            obj(&[("hard", hard.then_some(json!(true))), ("tab_id", tab(t))]),
        ),
        ToolCommand::Snapshot { max_tokens, tab: t } => (
            "tool.snapshot".into(),
            obj(&[
                ("max_tokens", max_tokens.map(|m| json!(m))),
                ("tab_id", tab(t)),
            ]),
        ),
        ToolCommand::Html {
            target: t,
            max_bytes,
            tab: tb,
        } => {
            let reference = t.as_deref().map(|t| element_ref("html", t)).transpose()?;
            (
                "tool.get_html".into(),
                obj(&[
                    ("ref", reference),
                    ("max_bytes", max_bytes.map(|m| json!(m))),
                    ("tab_id", tab(tb)),
                ]),
            )
        }
        ToolCommand::Click { target: t } => ("tool.click".into(), with_target(Map::new(), t)),
        ToolCommand::Hover { target: t } => ("tool.hover".into(), with_target(Map::new(), t)),
        ToolCommand::Fill { target: t, value } => (
            "tool.fill".into(),
            with_target(obj(&[("value", Some(json!(value)))]), t),
        ),
        ToolCommand::Press { key, target: t } => {
            let params = obj(&[("key", Some(json!(key)))]);
            (
                "tool.press".into(),
                match t {
                    Some(t) => with_target(params, t),
                    None => params,
                },
            )
        }
        ToolCommand::Select { target: t, values } => (
            "tool.select".into(),
            with_target(obj(&[("values", Some(json!(values)))]), t),
        ),
        ToolCommand::Screenshot { target: t, .. } => (
            "tool.screenshot".into(),
            obj(&[(
                "ref",
                t.as_deref()
                    .map(|t| element_ref("screenshot", t))
                    .transpose()?,
            )]),
        ),
        ToolCommand::Evaluate { expression } => (
            "tool.evaluate".into(),
            obj(&[("expression", Some(json!(expression)))]),
        ),
        ToolCommand::WaitForNavigation { wait_until } => (
            "tool.wait_for_navigation".into(),
            obj(&[("wait_until", s(wait_until))]),
        ),
        ToolCommand::RequestHelp { reason, title } => (
            "tool.request_help".into(),
            obj(&[("prompt", Some(json!(reason))), ("title", s(title))]),
        ),
        ToolCommand::Call { method, params } => {
            let value: Value = serde_json::from_str(params)
                .map_err(|e| CliError::Config(format!("--params is not JSON: {e}")))?;
            let Value::Object(map) = value else {
                return Err(CliError::Config("--params must be a JSON object".into()));
            };
            (method.clone(), map)
        }
    })
}

/// `--target` of a command whose method narrows to an element ref only
/// (`screenshot`, `html`): the protocol has no selector there, and a browser
/// would answer one with the whole page, so a selector is refused here.
fn element_ref(command: &str, t: &str) -> Result<Value, CliError> {
    match target(t) {
        ("ref", r) => Ok(r),
        _ => Err(CliError::Config(format!(
            "{command} --target takes an element ref such as e12 (from `latchkey snapshot`), not {:?}: the protocol has no selector for it",
            cell(t)
        ))),
    }
}

pub async fn tool(
    client: &ApiClient,
    session: Option<&str>,
    timeout_ms: Option<u64>,
    cmd: ToolCommand,
    json: bool,
) -> Result<(), CliError> {
    let session = session.ok_or_else(|| {
        CliError::Config("this command needs --session ID (or LATCHKEY_SESSION); start one with `latchkey session start`".into())
    })?;
    let session = &resolve(client, IdKind::Session, session).await?;
    let (method, params) = request(&cmd)?;
    crate::catalogue::check(&method, &params)?;
    let limit = http_limit(&method, &params, timeout_ms);
    let body = CallRequest {
        method,
        params: Some(Value::Object(params)),
        timeout_ms,
    };
    let path = format!("/v1/sessions/{}/calls", segment(session));
    let CallResult { result } = client
        .call_within(Method::POST, &path, Some(&body), Some(limit))
        .await?;
    crate::catalogue::warn_on_mismatch(&body.method, &result);
    if let ToolCommand::Screenshot { out, .. } = &cmd {
        save_png(&result, out)?;
        if json {
            let mut summary = result.clone();
            if let Some(m) = summary.as_object_mut() {
                m.remove("image_base64");
                m.insert("saved_to".into(), json!(out));
            }
            return print_json(&summary);
        }
        out!(
            "saved {} ({}x{})",
            out.display(),
            cell(&result["width"].to_string()),
            cell(&result["height"].to_string())
        );
        return Ok(());
    }
    if json {
        return print_json(&result);
    }
    let text = |field: &str| result.get(field).and_then(Value::as_str);
    match (&cmd, text("text"), text("html")) {
        (ToolCommand::Snapshot { .. }, Some(text), _) => out!("{}", lines(text)),
        (ToolCommand::Html { .. }, _, Some(html)) => {
            out!("{}", lines(html));
            if result.get("truncated").and_then(Value::as_bool) == Some(true) {
                note!(
                    "latchkey: the HTML was cut at the limit ({} bytes in all); --max-bytes sets it",
                    cell(&result["byte_size"].to_string())
                );
            }
        }
        _ => print_json(&result)?,
    }
    Ok(())
}

/// How long to wait for the answer to a tool call: the gateway's deadline for it
/// (the protocol's one rule, [`latchkey_protocol::tools::deadline_ms`]), plus a
/// margin for the gateway's own answer.
fn http_limit(method: &str, params: &Map<String, Value>, timeout_ms: Option<u64>) -> Duration {
    let own = params.get("timeout_ms").and_then(Value::as_u64);
    let deadline = latchkey_protocol::tools::deadline_ms(method, timeout_ms, own);
    Duration::from_millis(deadline.saturating_add(HTTP_MARGIN_MS))
}

/// Time beyond a call's deadline for the gateway's answer to arrive.
const HTTP_MARGIN_MS: u64 = 15_000;

fn save_png(result: &Value, out: &Path) -> Result<(), CliError> {
    let data = result
        .get("image_base64")
        .and_then(Value::as_str)
        .ok_or_else(|| CliError::Connection("the screenshot result has no image".into()))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| CliError::Connection(format!("the screenshot is not base64: {e}")))?;
    std::fs::write(out, bytes)
        .map_err(|e| CliError::Config(format!("cannot write {}: {e}", out.display())))
}

/// Ids go into the URL path; anything but id characters is percent-encoded away.
pub fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_selectors() {
        assert_eq!(target("e12"), ("ref", json!("e12")));
        assert_eq!(target("@e3"), ("ref", json!("e3")));
        assert_eq!(target("#login"), ("selector", json!("#login")));
        assert_eq!(target("email"), ("selector", json!("email")));
        assert_eq!(target("e"), ("selector", json!("e")));
    }

    #[test]
    fn a_call_waits_as_long_as_its_deadline() {
        let none = Map::new();
        let secs = |d: Duration| d.as_secs();
        assert_eq!(secs(http_limit("tool.click", &none, None)), 45);
        assert_eq!(secs(http_limit("tool.request_help", &none, None)), 320);
        let own = obj(&[("timeout_ms", Some(json!(120_000)))]);
        assert_eq!(secs(http_limit("tool.request_help", &own, None)), 140);
        assert_eq!(secs(http_limit("tool.click", &own, Some(600_000))), 615);
    }

    /// Every tool subcommand stands for a method of the catalogue, with params the
    /// catalogue accepts; a new subcommand without an example here fails.
    #[test]
    fn every_tool_command_is_a_catalogue_method_with_params_it_accepts() {
        use clap::{Parser, Subcommand};

        use crate::args::{Cli, Command};

        let examples: &[&[&str]] = &[
            &["tab", "list", "--scope", "agent"],
            &["tab", "create", "https://example.com/", "--background"],
            &["tab", "close", "4"],
            &["tab", "select", "4"],
            &["tab", "borrow", "4"],
            &["tab", "return", "4"],
            &[
                "navigate",
                "https://example.com/",
                "--wait-until",
                "networkidle",
                "--tab",
                "4",
            ],
            &["back", "--tab", "4"],
            &["forward"],
            &["reload", "--hard"],
            &["snapshot", "--max-tokens", "500"],
            &["click", "@e3"],
            &["fill", "#q", "text"],
            &["press", "Ctrl+A", "--target", "e2"],
            &["select", "e4", "a", "b"],
            &["hover", "e5"],
            &["screenshot", "--out", "x.png", "--target", "e6"],
            &[
                "html",
                "--target",
                "e7",
                "--max-bytes",
                "4096",
                "--tab",
                "4",
            ],
            &["evaluate", "1 + 2"],
            &["wait-for-navigation", "--wait-until", "commit"],
            &[
                "request-help",
                "--reason",
                "solve the CAPTCHA",
                "--title",
                "Help",
            ],
            &["call", "tool.console", "--params", "{\"limit\": 5}"],
        ];
        let mut covered = std::collections::BTreeSet::new();
        for args in examples {
            let cli = Cli::try_parse_from(std::iter::once(&"latchkey").chain(args.iter()))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let Command::Tool(cmd) = cli.command else {
                panic!("{args:?} is not a tool command");
            };
            let (method, params) = request(&cmd).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
            let tool = latchkey_protocol::tools::tool_named(&method)
                .unwrap_or_else(|| panic!("{args:?}: {method} is not in the catalogue"));
            assert_eq!(tool.validate(&params), Ok(()), "{args:?}");
            covered.insert(args[0].to_string());
            if args[0] == "tab" {
                covered.insert(format!("tab {}", args[1]));
            }
        }
        let tree = ToolCommand::augment_subcommands(clap::Command::new("latchkey"));
        for sub in tree.get_subcommands() {
            let name = sub.get_name().to_string();
            assert!(covered.contains(&name), "no example of `latchkey {name}`");
            for leaf in sub.get_subcommands() {
                let path = format!("{name} {}", leaf.get_name());
                assert!(covered.contains(&path), "no example of `latchkey {path}`");
            }
        }
    }
}
