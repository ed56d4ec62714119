//! Revoke → Close latency with N live devices: each sample is timed from the admin's
//! `DELETE /v1/admin/devices/{id}` being sent to the device receiving Close 4001,
//! and, apart, to the admin's answer (which waits for the committed revocation).
//! Beside it, the same for API tokens: as many agent sockets as samples, each on a
//! token of its own, each token revoked one at a time and timed from its
//! `DELETE /v1/admin/tokens/{id}` to its socket receiving Close 4006.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::future::try_join_all;
use latchkey_protocol::CloseCode;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, TestServer};

use crate::stats::{ms, percentile};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct RevokeReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub backend: String,
    pub devices: usize,
    pub samples: usize,
    pub p50_us: u128,
    pub p90_us: u128,
    pub p99_us: u128,
    pub max_us: u128,
    pub setup_secs: f64,
    /// From the same send to the admin's answer: the revocation committed. (Runs
    /// from before it was measured apart have none.)
    #[serde(default)]
    pub answered_p50_us: Option<u128>,
    #[serde(default)]
    pub answered_p99_us: Option<u128>,
    /// Token revoke → agent socket Close, over as many samples (runs from before it
    /// was measured have none).
    #[serde(default)]
    pub token_p50_us: Option<u128>,
    #[serde(default)]
    pub token_p99_us: Option<u128>,
    #[serde(default)]
    pub token_max_us: Option<u128>,
}

/// `devices` devices paired with `server` and online on it, with their ids,
/// paired and connected in batches so setup does not become its own storm.
pub async fn online_devices(
    server: &TestServer,
    devices: usize,
) -> anyhow::Result<Vec<(String, latchkey_testkit::ExtensionSocket)>> {
    let mut out = Vec::with_capacity(devices);
    for chunk in (0..devices).collect::<Vec<_>>().chunks(50) {
        let batch = try_join_all(chunk.iter().map(|_| async {
            let mut ext = server.new_extension().await?;
            let grant = ext.pair().await?;
            let socket = ext.connect_online().await?;
            anyhow::Ok((grant.device_id, socket))
        }))
        .await?;
        out.extend(batch);
    }
    Ok(out)
}

pub async fn revoke(
    devices: usize,
    samples: usize,
    postgres: bool,
) -> anyhow::Result<RevokeReport> {
    if samples > devices {
        bail!("samples must not exceed devices");
    }
    let backend = if postgres {
        Backend::postgres()
            .await
            .context("PostgreSQL not reachable")?
    } else {
        Backend::Sqlite
    };
    let backend_name = backend.name();
    let server = TestServer::builder(backend)
        .limits(|l| crate::target::unthrottled(l, devices))
        .without_log_capture()
        .start()
        .await?;
    let setup = Instant::now();
    let (ids, mut sockets): (Vec<String>, Vec<_>) =
        online_devices(&server, devices).await?.into_iter().unzip();
    let setup_secs = setup.elapsed().as_secs_f64();
    let admin = server.admin();
    let mut latencies = Vec::with_capacity(samples);
    let mut answers = Vec::with_capacity(samples);
    for (id, socket) in ids.iter().zip(sockets.iter_mut()).take(samples) {
        let start = Instant::now();
        // Each end timed as it happens: the close and the answer need not come in
        // either order.
        let answered = async {
            let r = admin.revoke(id).await;
            (r, start.elapsed())
        };
        let closed = async {
            let r = socket.ended(Duration::from_secs(10)).await;
            (r, start.elapsed())
        };
        let ((revoked, answer), (ended, close)) = tokio::join!(answered, closed);
        revoked?;
        let ended = ended?;
        if ended != Ended::Closed(CloseCode::Revoked.code()) {
            bail!("device {id} ended with {ended:?}, not revoked");
        }
        latencies.push(close);
        answers.push(answer);
    }
    latencies.sort();
    answers.sort();
    let mut tokens = token_samples(&server, samples).await?;
    tokens.sort();
    server.stop().await;
    Ok(RevokeReport {
        scenario: "revoke".to_string(),
        machine: Some(crate::procfs::machine()),
        backend: backend_name.to_string(),
        devices,
        samples,
        p50_us: percentile(&latencies, 0.50).as_micros(),
        p90_us: percentile(&latencies, 0.90).as_micros(),
        p99_us: percentile(&latencies, 0.99).as_micros(),
        max_us: latencies.last().copied().unwrap_or_default().as_micros(),
        setup_secs,
        answered_p50_us: Some(percentile(&answers, 0.50).as_micros()),
        answered_p99_us: Some(percentile(&answers, 0.99).as_micros()),
        token_p50_us: Some(percentile(&tokens, 0.50).as_micros()),
        token_p99_us: Some(percentile(&tokens, 0.99).as_micros()),
        token_max_us: tokens.last().map(Duration::as_micros),
    })
}

/// `samples` agent sockets on tokens of their own, each token revoked in turn: the
/// time from its DELETE being sent to its socket receiving Close 4006.
async fn token_samples(server: &TestServer, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let admin = server.admin();
    let mut open = Vec::with_capacity(samples);
    for n in 0..samples {
        let token = admin
            .create_token(&format!("revoke-{n}"), latchkey_protocol::api::Role::Agent)
            .await?;
        let socket = latchkey_testkit::AgentSocket::open(server, &token.token).await?;
        open.push((token.view.id, socket));
    }
    let mut latencies = Vec::with_capacity(samples);
    for (id, socket) in &mut open {
        let start = Instant::now();
        let answered = async { admin.revoke_token(id).await };
        let closed = async {
            let r = socket.ended(Duration::from_secs(10)).await;
            (r, start.elapsed())
        };
        let (revoked, (ended, close)) = tokio::join!(answered, closed);
        let (status, _) = revoked?;
        if status != 200 {
            bail!("token {id}: revoke answered {status}");
        }
        let (ended, _) = ended?;
        if ended != Ended::Closed(CloseCode::TokenRevoked.code()) {
            bail!("token {id}: socket ended with {ended:?}, not token revoked");
        }
        latencies.push(close);
    }
    Ok(latencies)
}

pub fn print(report: &RevokeReport) {
    println!("scenario  backend   devices  samples  p50       p90       p99       max");
    let cells = [
        report.scenario.clone(),
        report.backend.clone(),
        report.devices.to_string(),
        report.samples.to_string(),
        ms(report.p50_us),
        ms(report.p90_us),
        ms(report.p99_us),
        ms(report.max_us),
    ];
    let widths = [9, 9, 8, 8, 9, 9, 9, 0];
    let line: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(c, w)| format!("{c:<w$}"))
        .collect();
    println!("{}", line.join(" ").trim_end());
    if let (Some(p50), Some(p99), Some(max)) = (
        report.token_p50_us,
        report.token_p99_us,
        report.token_max_us,
    ) {
        println!(
            "(API token revoke → agent socket Close: p50 {}, p99 {}, max {})",
            ms(p50),
            ms(p99),
            ms(max)
        );
    }
    if let (Some(p50), Some(p99)) = (report.answered_p50_us, report.answered_p99_us) {
        println!(
            "(the admin's answer, revocation committed: p50 {}, p99 {})",
            ms(p50),
            ms(p99)
        );
    }
    println!(
        "(setup: {:.1}s to pair and connect {} devices)",
        report.setup_secs, report.devices
    );
}
