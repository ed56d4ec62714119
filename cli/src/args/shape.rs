//! The command line as it is shown, adjusted where derive cannot say it
//! (docs/cli.md, "Help"):
//! - a flag that an environment variable already sets is left out of an error's
//!   usage line (`LATCHKEY_TOKEN=… latchkey login` shows `--url <URL>` only): clap
//!   lists every flag it was given, from a variable too, so a command line that
//!   fails is parsed again with those flags hidden and not required, for the
//!   error only (help still shows them);
//! - the agent's flags (`--session`, `--timeout-ms`) are global so that every tool
//!   command takes them, but are hidden from every command that does not.

use clap::error::ErrorKind;
use clap::{Arg, Command, CommandFactory, FromArgMatches};

use super::Cli;

/// Global flags that only tool commands use.
const AGENT_ONLY: [&str; 2] = ["session", "timeout_ms"];

/// Top-level commands whose subcommands are not tool commands.
const NOT_TOOLS: [&str; 6] = ["login", "admin", "me", "token", "browsers", "tools"];

/// The command line, parsed; on a mistake, the error (usage line as above) and exit.
pub fn parse() -> Cli {
    let is_set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let matches = match command_with(is_set, false).try_get_matches() {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => match command_with(is_set, true).try_get_matches() {
            Err(shown) => shown.exit(),
            // Hiding flags cannot make a command line right; if it ever did, the
            // first error stands.
            Ok(_) => e.exit(),
        },
    };
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// [`Cli`]'s command, built and adjusted: `is_set` tells which variables are set;
/// with `for_error`, the flags they set are hidden and not required.
pub fn command_with(is_set: impl Fn(&str) -> bool + Copy, for_error: bool) -> Command {
    let mut cmd = Cli::command();
    // Building propagates the global flags into every subcommand, where they can
    // then be hidden.
    cmd.build();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let not_tool = NOT_TOOLS.contains(&name.as_str()) || name == "session";
        cmd = cmd.mut_subcommand(&name, |sub| adjust(sub, not_tool, is_set, for_error));
    }
    relax(cmd, is_set, for_error)
}

/// Hide the agent's flags here and below when `not_tool`; for an error, the
/// env-set flags throughout.
fn adjust(
    mut cmd: Command,
    not_tool: bool,
    is_set: impl Fn(&str) -> bool + Copy,
    for_error: bool,
) -> Command {
    if not_tool {
        cmd = cmd.mut_args(|a| {
            if AGENT_ONLY.contains(&a.get_id().as_str()) {
                a.hide(true)
            } else {
                a
            }
        });
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(&name, |sub| adjust(sub, not_tool, is_set, for_error));
    }
    relax(cmd, is_set, for_error)
}

/// For an error: a flag its variable sets is satisfied already, and not shown.
fn relax(cmd: Command, is_set: impl Fn(&str) -> bool + Copy, for_error: bool) -> Command {
    if !for_error {
        return cmd;
    }
    cmd.mut_args(|a| {
        if env_set(&a, is_set) {
            a.required(false).hide(true)
        } else {
            a
        }
    })
}

fn env_set(a: &Arg, is_set: impl Fn(&str) -> bool) -> bool {
    a.get_env().and_then(|e| e.to_str()).is_some_and(is_set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn help(cmd: &mut Command, path: &[&str]) -> String {
        let mut sub = cmd;
        for name in path {
            sub = sub.find_subcommand_mut(name).expect("a subcommand");
        }
        sub.render_long_help().to_string()
    }

    #[test]
    fn agent_flags_show_only_where_they_apply() {
        let mut cmd = command_with(|_| false, false);
        for path in [
            &["admin", "devices"][..],
            &["admin", "tokens", "create"],
            &["me", "devices"],
            &["login"],
            &["session", "start"],
            &["browsers"],
        ] {
            let text = help(&mut cmd, path);
            assert!(
                !text.contains("--session") && !text.contains("--timeout-ms"),
                "{path:?}: {text}"
            );
            assert!(text.contains("--url"), "{path:?}");
        }
        for path in [&["navigate"][..], &["tab", "list"], &["snapshot"]] {
            let text = help(&mut cmd, path);
            assert!(
                text.contains("--session") && text.contains("--timeout-ms"),
                "{path:?}: {text}"
            );
        }
    }

    /// Every subcommand says what it does and every flag and argument what it is.
    #[test]
    fn everything_has_help() {
        fn walk(cmd: &Command, path: &str, missing: &mut Vec<String>) {
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let here = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() {
                    missing.push(format!("{here}: no about"));
                }
                for arg in sub.get_arguments() {
                    let id = arg.get_id().as_str();
                    if arg.get_help().is_none() && !arg.is_hide_set() && id != "help" {
                        missing.push(format!("{here}: {id}"));
                    }
                }
                walk(sub, &here, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&command_with(|_| false, false), "latchkey", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
    }

    /// An argument of a command that shares a global flag's id takes the global's
    /// value (a positional `url` became the server URL): every argument has an
    /// id of its own, but `login`'s `--url` and `--token`, which are the globals.
    #[test]
    fn no_argument_takes_a_global_flags_id() {
        fn walk(cmd: &Command, globals: &[String], path: &str, clashes: &mut Vec<String>) {
            for sub in cmd.get_subcommands() {
                let here = format!("{path} {}", sub.get_name());
                for arg in sub.get_arguments().filter(|a| !a.is_global_set()) {
                    let id = arg.get_id().as_str();
                    if globals.iter().any(|g| g == id) && here != "latchkey login" {
                        clashes.push(format!("{here}: {id}"));
                    }
                }
                walk(sub, globals, &here, clashes);
            }
        }
        let mut cmd = command_with(|_| false, false);
        cmd.build();
        let globals: Vec<String> = cmd
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string())
            .collect();
        assert!(globals.iter().any(|g| g == "url"), "{globals:?}");
        let mut clashes = Vec::new();
        walk(&cmd, &globals, "latchkey", &mut clashes);
        assert!(clashes.is_empty(), "{}", clashes.join("\n"));
    }

    #[test]
    fn a_flag_set_by_its_variable_is_not_asked_for() {
        let err = command_with(|v| v == "LATCHKEY_TOKEN", true)
            .try_get_matches_from(["latchkey", "login"])
            .expect_err("--url is missing");
        let text = err.render().to_string();
        assert!(text.contains("--url <URL>"), "{text}");
        assert!(!text.contains("--token"), "{text}");
        let err = command_with(|_| false, true)
            .try_get_matches_from(["latchkey", "login"])
            .expect_err("both are missing");
        assert!(err.render().to_string().contains("--token <TOKEN>"));
    }
}
