//! The policy the `--policy` runs put on every browser (docs/policy.md): 20 allowed
//! site patterns, 5 blocked ones and a capability list, the size of a real team's,
//! so every call pays for the checks a real policy costs. The calls navigate to a
//! host matched by the last allowed pattern, after every blocked one was tried.

use serde_json::{Value, json};

/// Where every policed call navigates.
pub const URL: &str = "https://www.site-19.load.test/page";

/// The team policy of a `--policy` run.
pub fn policy() -> Value {
    let allow: Vec<String> = (0..20).map(|i| format!("*.site-{i}.load.test")).collect();
    let block: Vec<String> = (0..5).map(|i| format!("pay.site-{i}.load.test")).collect();
    json!({
        "allow_sites": allow,
        "block_sites": block,
        "capabilities": ["read", "input", "navigate"],
        "max_session_minutes": 600,
    })
}

/// Put [`policy`] at `path` (the team's, or one browser's).
pub async fn apply(admin: &latchkey_testkit::AdminClient, path: &str) -> anyhow::Result<()> {
    let (status, body) = admin
        .raw(latchkey_testkit::reqwest::Method::PUT, path, Some(policy()))
        .await?;
    anyhow::ensure!(status == 200, "setting the policy: {status} {body}");
    Ok(())
}
