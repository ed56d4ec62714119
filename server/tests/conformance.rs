//! RFC 6455 conformance: the Autobahn TestSuite's cases, run by kosoku (PyPI), against
//! an echo endpoint served by the real listener stack (accept loop, setup limits,
//! hyper, the server's WebSocket settings and close-code mapping). The outcome of every
//! case is diffed against `tests/conformance/expected.json`; no case may be FAILED.
//! `LATCHKEY_BLESS=1` rewrites the expected file.
//!
//! kosoku is installed into `target/kosoku-venv` on first use (pinned version), or
//! taken from `LATCHKEY_KOSOKU` when that names the executable.

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use latchkey_testkit::echo::{ECHO_PATH, conformance_echo};
use latchkey_testkit::{Backend, TestServer};
use serde_json::Value;

const KOSOKU_VERSION: &str = "0.1.0";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The kosoku executable, installing it into a venv under target/ if needed.
fn kosoku() -> PathBuf {
    if let Some(path) = std::env::var_os("LATCHKEY_KOSOKU") {
        return PathBuf::from(path);
    }
    let venv = workspace_root().join("target/kosoku-venv");
    let exe = venv.join("bin/kosoku");
    let installed = Command::new(venv.join("bin/pip"))
        .args(["show", "kosoku"])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .contains(&format!("Version: {KOSOKU_VERSION}"))
        });
    if !installed {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(status.success(), "could not create {}", venv.display());
        let status = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("kosoku=={KOSOKU_VERSION}"))
            .status()
            .expect("pip install kosoku");
        assert!(
            status.success(),
            "pip install kosoku=={KOSOKU_VERSION} failed"
        );
    }
    exe
}

/// case id → behavior, from kosoku's `index.json`.
fn outcomes(report_dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(report_dir.join("index.json")).expect("index.json");
    let index: Value = serde_json::from_str(&text).expect("index json");
    let agents = index.as_object().expect("agents");
    assert_eq!(agents.len(), 1, "one server under test");
    let (_, cases) = agents.iter().next().expect("agent");
    cases
        .as_object()
        .expect("cases")
        .iter()
        .map(|(id, case)| {
            let behavior = case["behavior"].as_str().unwrap_or("?");
            let close = case["behaviorClose"].as_str().unwrap_or("?");
            (id.clone(), format!("{behavior}/{close}"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autobahn_cases_against_the_real_listener_stack() {
    let server = TestServer::builder(Backend::Sqlite)
        .routes(conformance_echo())
        .start()
        .await
        .expect("server");
    let reports = tempfile::tempdir().expect("tempdir");
    let kosoku = kosoku();
    let url = format!("ws://{}{ECHO_PATH}", server.addr());
    let out_dir = reports.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(kosoku)
            .args(["--parallelism", "4", "--outdir"])
            .arg(&out_dir)
            .arg(&url)
            .output()
            .expect("run kosoku")
    })
    .await
    .expect("kosoku task");
    let got = outcomes(reports.path());
    assert!(
        got.len() > 400,
        "only {} cases ran:\n{}",
        got.len(),
        String::from_utf8_lossy(&run.stdout)
    );
    let failed: Vec<_> = got.iter().filter(|(_, o)| o.contains("FAILED")).collect();
    let expected_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/expected.json");
    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        std::fs::create_dir_all(expected_path.parent().expect("dir")).expect("mkdir");
        let text = serde_json::to_string_pretty(&got).expect("json");
        std::fs::write(&expected_path, text + "\n").expect("write expected");
    }
    assert!(failed.is_empty(), "FAILED cases: {failed:?}");
    let expected: BTreeMap<String, String> = serde_json::from_str(
        &std::fs::read_to_string(&expected_path)
            .expect("expected results (bless with LATCHKEY_BLESS=1)"),
    )
    .expect("expected json");
    let changed: Vec<_> = expected
        .iter()
        .filter(|(id, want)| got.get(*id) != Some(want))
        .map(|(id, want)| format!("{id}: expected {want}, got {:?}", got.get(id)))
        .collect();
    assert!(
        changed.is_empty(),
        "outcomes changed:\n{}",
        changed.join("\n")
    );
    assert_eq!(got.len(), expected.len(), "the set of cases changed");
    server.stop().await;
}
