//! Revoke → Close across replicas (docs/cluster.md): two latchkeyd replicas on
//! one PostgreSQL database and a `nats-server` of the run's own, every device
//! online on replica A. Devices are revoked one at a time, alternately through
//! A's admin API (the same replica: a local close) and B's (the close travels
//! as a NATS notice), each timed from the DELETE being sent to the device
//! receiving Close 4001. The grant sweep is pushed out of the run, so every
//! close timed here came by push.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use latchkey_protocol::CloseCode;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{Backend, NatsServer, TestServer, wait_until};

use crate::stats::{ms, percentile};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClusterRevokeReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub devices: usize,
    /// Revoked through the replica that holds the socket.
    pub same_p50_us: u128,
    pub same_p99_us: u128,
    pub same_max_us: u128,
    /// Revoked through the other replica.
    pub cross_p50_us: u128,
    pub cross_p99_us: u128,
    pub cross_max_us: u128,
}

async fn replica(
    backend: &Backend,
    nats_url: &str,
    devices: usize,
    first: Option<&TestServer>,
) -> anyhow::Result<TestServer> {
    let url = nats_url.to_string();
    let mut builder = TestServer::builder(backend.clone())
        .limits(|l| {
            crate::target::unthrottled(l, devices);
            l.grant_recheck_ms = 3_600_000;
        })
        .config(move |c| c.cluster.nats_url = Some(url))
        .without_log_capture();
    if let Some(first) = first {
        builder = builder.replica_of(first);
    }
    builder.start().await
}

pub(crate) async fn ready(server: &TestServer) -> bool {
    wait_until(Duration::from_secs(10), || async {
        let answer = server
            .http
            .get(format!("{}/readyz", server.http_base()))
            .send()
            .await;
        match answer {
            Ok(r) => r.text().await.is_ok_and(|t| t == "ready"),
            Err(_) => false,
        }
    })
    .await
}

/// A `nats-server` of the run's own and `count` replicas in cluster mode on one
/// fresh PostgreSQL database (the first owns it: stop it last), each limited for
/// `devices` browsers and listening to the others.
pub(crate) async fn replicas(
    count: usize,
    devices: usize,
) -> anyhow::Result<(NatsServer, Vec<TestServer>)> {
    let backend = Backend::postgres()
        .await
        .context("PostgreSQL not reachable")?;
    let binary = NatsServer::binary().context("nats-server is not installed")?;
    let nats = NatsServer::start(binary).await?;
    let mut servers: Vec<TestServer> = Vec::with_capacity(count);
    for _ in 0..count {
        let server = replica(&backend, &nats.url(), devices, servers.first()).await?;
        servers.push(server);
    }
    for s in &servers {
        if !ready(s).await {
            bail!("a replica did not connect to NATS");
        }
    }
    Ok((nats, servers))
}

pub async fn run(devices: usize) -> anyhow::Result<ClusterRevokeReport> {
    let (nats, servers) = replicas(2, devices).await?;
    let [a, b]: [TestServer; 2] = servers
        .try_into()
        .map_err(|_| anyhow::anyhow!("two replicas"))?;
    let mut sockets = crate::revoke::online_devices(&a, devices).await?;
    let (through_a, through_b) = (a.admin(), b.admin());
    let (mut same, mut cross) = (Vec::new(), Vec::new());
    for (n, (id, socket)) in sockets.iter_mut().enumerate() {
        let (admin, into) = if n % 2 == 0 {
            (&through_a, &mut same)
        } else {
            (&through_b, &mut cross)
        };
        let start = Instant::now();
        let closed = async {
            let r = socket.ended(Duration::from_secs(10)).await;
            (r, start.elapsed())
        };
        let (revoked, (ended, close)) = tokio::join!(admin.revoke(id), closed);
        revoked?;
        if ended? != Ended::Closed(CloseCode::Revoked.code()) {
            bail!("device {id} did not close as revoked");
        }
        into.push(close);
    }
    same.sort();
    cross.sort();
    b.stop().await;
    a.stop().await;
    drop(nats);
    Ok(ClusterRevokeReport {
        scenario: "cluster-revoke".to_string(),
        machine: Some(crate::procfs::machine()),
        devices,
        same_p50_us: percentile(&same, 0.50).as_micros(),
        same_p99_us: percentile(&same, 0.99).as_micros(),
        same_max_us: same.last().copied().unwrap_or_default().as_micros(),
        cross_p50_us: percentile(&cross, 0.50).as_micros(),
        cross_p99_us: percentile(&cross, 0.99).as_micros(),
        cross_max_us: cross.last().copied().unwrap_or_default().as_micros(),
    })
}

pub fn print(r: &ClusterRevokeReport) {
    println!("scenario        devices  revoked through  p50       p99       max");
    for (what, p50, p99, max) in [
        ("same replica", r.same_p50_us, r.same_p99_us, r.same_max_us),
        (
            "other replica",
            r.cross_p50_us,
            r.cross_p99_us,
            r.cross_max_us,
        ),
    ] {
        println!(
            "{:<15} {:<8} {:<16} {:<9} {:<9} {}",
            r.scenario,
            r.devices,
            what,
            ms(p50),
            ms(p99),
            ms(max)
        );
    }
}
