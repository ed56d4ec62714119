//! The `latchkeyd` operator commands: `check-config`, `migrate`, `tenant create|list`,
//! and the precedence of flags over variables over the TOML file.

#![allow(clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

fn latchkeyd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkeyd"));
    cmd.env_clear().args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run latchkeyd")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn check_config_reports_every_problem_and_masks_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("latchkey.toml");
    std::fs::write(
        &file,
        "listen = \"0.0.0.0:8443\"\npublic_url = \"ws://gw.example.com\"\n\
         database_url = \"postgres://app:hunter2@db.example.com/latchkey\"\n\
         allowed_extension_ids = [\"not-an-id\"]\n[limits]\nauthorize_per_minute = 0\n",
    )
    .expect("write");
    let out = latchkeyd(
        &["--config", file.to_str().expect("path"), "check-config"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        !stdout.contains("hunter2") && !stderr.contains("hunter2"),
        "password printed"
    );
    assert!(stdout.contains("****"));
    assert!(stderr.contains("4 problem(s)"), "{stderr}");
    for needle in [
        "plain (non-TLS)",
        "wss://",
        "not 32 characters",
        "authorize_per_minute",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in {stderr}");
    }

    // Unknown keys in the file are an error, not silently ignored.
    std::fs::write(&file, "listn = \"127.0.0.1:1\"\n").expect("write");
    let out = latchkeyd(
        &["--config", file.to_str().expect("path"), "check-config"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("listn"), "{}", text(&out.stderr));
}

#[test]
fn flags_beat_variables_beat_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("latchkey.toml");
    let data = dir.path().join("data");
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:1111\"\nservice_name = \"From file\"\n",
    )
    .expect("write");
    let data_s = data.to_str().expect("path");
    let env = [
        ("LATCHKEY_LISTEN", "127.0.0.1:2222"),
        ("LATCHKEY_DATA_DIR", data_s),
    ];
    let out = latchkeyd(
        &["--config", file.to_str().expect("path"), "check-config"],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("listen = \"127.0.0.1:2222\""), "{stdout}");
    assert!(stdout.contains("service_name = \"From file\""));
    let out = latchkeyd(
        &[
            "--config",
            file.to_str().expect("path"),
            "--listen",
            "127.0.0.1:3333",
            "check-config",
        ],
        &env,
    );
    assert!(text(&out.stdout).contains("listen = \"127.0.0.1:3333\""));
}

#[test]
fn migrate_and_tenants_on_the_same_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("path");
    let out = latchkeyd(&["--data-dir", data, "migrate"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("migrations applied (sqlite)"));

    let out = latchkeyd(&["--data-dir", data, "tenant", "create", "acme"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("tenant acme created"));
    let token_line = stdout
        .lines()
        .find(|l| l.contains("lk_"))
        .expect("token line");
    assert!(token_line.contains("shown once"));

    let again = latchkeyd(&["--data-dir", data, "tenant", "create", "acme"], &[]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("already exists"));
    let bad = latchkeyd(&["--data-dir", data, "tenant", "create", "Not Valid!"], &[]);
    assert_eq!(bad.status.code(), Some(1));

    let list = latchkeyd(&["--data-dir", data, "tenant", "list"], &[]);
    assert!(
        text(&list.stdout).contains("\tacme\t"),
        "{}",
        text(&list.stdout)
    );
}

/// `serve` on ephemeral ports with this data directory.
fn serve_args(data_dir: &str) -> [&str; 7] {
    [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--data-dir",
        data_dir,
    ]
}

#[test]
fn an_unreadable_store_refuses_to_start_and_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let file = data.join("latchkey.sqlite3");
    // Not a database: a torn copy, a wrong file, bytes from elsewhere.
    std::fs::write(&file, vec![0x5a; 8192]).expect("garbage");
    let data_s = data.to_str().expect("path");
    let out = latchkeyd(&serve_args(data_s), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(file.to_str().expect("path")) && stderr.contains("not a database"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&file).expect("file"),
        vec![0x5a; 8192],
        "the file is left as it was"
    );

    // A data directory that is a file.
    let not_a_dir = dir.path().join("plain-file");
    std::fs::write(&not_a_dir, "x").expect("file");
    let out = latchkeyd(&serve_args(not_a_dir.to_str().expect("path")), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(not_a_dir.to_str().expect("path")),
        "{}",
        text(&out.stderr)
    );
}
