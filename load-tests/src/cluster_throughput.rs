//! What more replicas do for calls per second on this machine (docs/cluster.md):
//! the same closed loop (P agent sockets, each with a session on one of D
//! scripted browsers that echo, one call at a time per socket) against one
//! replica in cluster mode, then against three replicas of one PostgreSQL
//! database and a `nats-server` of the run's own, with the browsers and the
//! agent sockets spread round robin over the replicas, so that most calls
//! cross replicas as they would behind a load balancer. One run, one machine:
//! the figure is the ratio of the two.

use std::time::{Duration, Instant};

use anyhow::bail;
use latchkey_protocol::Frame;
use latchkey_testkit::{AgentSocket, FakeAgent, FakeBrowser, TestServer};
use serde_json::json;

use crate::cluster_revoke::replicas;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClusterThroughputReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub browsers: usize,
    pub agent_sockets: usize,
    pub seconds: f64,
    pub one_replica_calls_per_sec: f64,
    pub three_replicas_calls_per_sec: f64,
    /// Three replicas' calls per second over one's.
    pub ratio: f64,
}

/// Calls per second of `sockets` (each with its session) for `seconds`.
async fn closed_loop(sockets: Vec<(AgentSocket, String)>, seconds: f64) -> anyhow::Result<f64> {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let runs = sockets
        .into_iter()
        .enumerate()
        .map(|(n, (mut socket, session))| async move {
            let mut calls = 0u64;
            while Instant::now() < end {
                let id = format!("s{n}c{calls}");
                let params = json!({ "session_id": session, "pad": "x".repeat(150) });
                match socket.call(&id, "tool.echo", params).await? {
                    Frame::Success(_) => calls += 1,
                    other => bail!("call failed: {other:?}"),
                }
            }
            anyhow::Ok(calls)
        });
    let calls: u64 = futures_util::future::try_join_all(runs)
        .await?
        .into_iter()
        .sum();
    Ok(calls as f64 / start.elapsed().as_secs_f64())
}

/// `browsers` browsers spread over `servers` and `sockets` agent sockets
/// spread over them too, each with a session on browser `n % browsers`.
async fn spread(
    servers: &[&TestServer],
    browsers: usize,
    sockets: usize,
) -> anyhow::Result<(Vec<FakeBrowser>, Vec<(AgentSocket, String)>)> {
    let echo = crate::latency::echo();
    let mut held = Vec::new();
    let mut ids = Vec::new();
    for n in 0..browsers {
        let (id, browser) = servers[n % servers.len()].new_browser(echo.clone()).await?;
        ids.push(id);
        held.push(browser);
    }
    let first = servers[0];
    let token = first.new_agent().await?.token;
    // Every replica sees every browser before the sessions start.
    for server in servers {
        let agent = FakeAgent::new(server.http.clone(), server.http_base(), token.clone());
        let all = latchkey_testkit::wait_until(Duration::from_secs(10), || async {
            agent.browsers().await.is_ok_and(|l| {
                ids.iter()
                    .all(|id| l.browsers.iter().any(|b| &b.id == id && b.online))
            })
        })
        .await;
        if !all {
            bail!("a replica does not see every browser");
        }
    }
    let mut out = Vec::with_capacity(sockets);
    for n in 0..sockets {
        let server = servers[n % servers.len()];
        let agent = FakeAgent::new(server.http.clone(), server.http_base(), token.clone());
        let session = agent.start(Some(&ids[n % browsers])).await?.id;
        out.push((AgentSocket::open(server, &token).await?, session));
    }
    Ok((held, out))
}

pub async fn run(seconds: f64) -> anyhow::Result<ClusterThroughputReport> {
    const BROWSERS: usize = 6;
    const SOCKETS: usize = 12;
    let (nats, servers) = replicas(3, BROWSERS).await?;
    let [a, b, c]: [TestServer; 3] = servers
        .try_into()
        .map_err(|_| anyhow::anyhow!("three replicas"))?;
    let (held, sockets) = spread(&[&a], BROWSERS, SOCKETS).await?;
    let one = closed_loop(sockets, seconds).await?;
    drop(held);
    let (held, sockets) = spread(&[&a, &b, &c], BROWSERS, SOCKETS).await?;
    let three = closed_loop(sockets, seconds).await?;
    drop(held);
    for s in [c, b, a] {
        s.stop().await;
    }
    drop(nats);
    Ok(ClusterThroughputReport {
        scenario: "cluster-throughput".to_string(),
        machine: Some(crate::procfs::machine()),
        browsers: BROWSERS,
        agent_sockets: SOCKETS,
        seconds,
        one_replica_calls_per_sec: one,
        three_replicas_calls_per_sec: three,
        ratio: three / one.max(f64::EPSILON),
    })
}

pub fn print(r: &ClusterThroughputReport) {
    println!(
        "{:<19} {} browsers, {} agent sockets: one replica {:.0} calls/s, three {:.0} calls/s, ratio {:.2}",
        r.scenario,
        r.browsers,
        r.agent_sockets,
        r.one_replica_calls_per_sec,
        r.three_replicas_calls_per_sec,
        r.ratio
    );
}
