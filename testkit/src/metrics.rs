//! The server's Prometheus exposition, scraped from its real `/metrics` listener.

use std::collections::HashMap;

use anyhow::{Context, ensure};

/// Every sample on `http://{addr}/metrics`, keyed by `name{labels}` as the exporter
/// writes it. A series appears once its first value is recorded.
pub async fn scrape(
    http: &reqwest::Client,
    addr: impl std::fmt::Display,
) -> anyhow::Result<HashMap<String, f64>> {
    let resp = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .context("scrape /metrics")?;
    ensure!(
        resp.status().is_success(),
        "/metrics answered {}",
        resp.status()
    );
    Ok(parse(&resp.text().await?))
}

/// `name{labels} value` lines into a map; comments and blank lines are skipped.
pub fn parse(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}
