//! Running the `latchkey` binary from tests.

#![allow(dead_code, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::Value;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", self.stdout))
    }
}

/// Run `latchkey` with `args` (blocking work off the runtime).
pub async fn latchkey(config_dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_clear()
        .env("LATCHKEY_CONFIG_DIR", config_dir)
        .args(args)
        .timeout(Duration::from_secs(60));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = tokio::task::spawn_blocking(move || cmd.output().expect("run latchkey"))
        .await
        .expect("join");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
