//! Calls across replicas (docs/cluster.md, "Calls across replicas"): two
//! latchkeyd replicas on one PostgreSQL database and a `nats-server` of the
//! run's own, the browser's socket on replica A. One agent socket on A (the
//! call stays on the replica) and one on B (the call travels to A over NATS
//! and back), each with a session on the browser; one call at a time,
//! alternating between the two so both see the same machine, 200-byte params
//! echoed back. What a call across replicas adds is the difference of the
//! two, in one run.
//!
//! A third series calls A's session (browser and session both on A) through
//! B's agent socket: B sends the request to the session's replica
//! (docs/cluster.md, "Sessions by id on any replica"), the path an agent takes
//! when a load balancer does not keep it on one replica.
//!
//! Two more go through `/mcp` (docs/cluster.md, "MCP on any replica"): one MCP
//! caller whose session (opened by its first call, through A) is on A, its
//! calls sent to A and to B in turn. Through B, the caller's session is
//! asked whether it is still open and then called, both on A over NATS.

use std::time::{Duration, Instant};

use anyhow::bail;
use latchkey_protocol::Frame;
use latchkey_testkit::{AgentSocket, FakeBrowser, McpClient, Revision, TestServer};
use serde_json::json;

use crate::cluster_revoke::replicas;
use crate::stats::{Summary, ms, summarize};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClusterCallsReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub calls: usize,
    /// The agent on the replica that holds the browser's socket.
    pub same: Summary,
    /// The agent on the other replica.
    pub cross: Summary,
    /// `cross.p50 - same.p50`: what a call across replicas adds (goal ≤ 300 µs).
    pub added_p50_us: i128,
    pub added_p99_us: i128,
    /// A's session called through B: the request travels to the session's
    /// replica, which holds the browser too.
    #[serde(default)]
    pub routed: Option<Summary>,
    /// `routed.p50 - same.p50`.
    #[serde(default)]
    pub routed_added_p50_us: Option<i128>,
    /// An MCP caller's calls through A, its session and the browser on A.
    #[serde(default)]
    pub mcp_same: Option<Summary>,
    /// The same caller's calls through B.
    #[serde(default)]
    pub mcp_routed: Option<Summary>,
    /// `mcp_routed.p50 - mcp_same.p50`.
    #[serde(default)]
    pub mcp_routed_added_p50_us: Option<i128>,
}

/// One MCP call (`browser_tabs`, answered by the scripted browser).
async fn timed_mcp(client: &McpClient) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let answer = client.call("browser_tabs", json!({})).await?;
    let took = start.elapsed();
    if answer.is_error == Some(true) {
        bail!("MCP call failed: {}", latchkey_testkit::mcp::text(&answer));
    }
    Ok(took)
}

async fn timed(socket: &mut AgentSocket, id: &str, session: &str) -> anyhow::Result<Duration> {
    let params = json!({ "session_id": session, "pad": "x".repeat(150) });
    let start = Instant::now();
    let answer = socket.call(id, "tool.echo", params).await?;
    let took = start.elapsed();
    match answer {
        Frame::Success(_) => Ok(took),
        other => bail!("call failed: {other:?}"),
    }
}

pub async fn run(calls: usize) -> anyhow::Result<ClusterCallsReport> {
    let (nats, servers) = replicas(2, 1).await?;
    let [a, b]: [TestServer; 2] = servers
        .try_into()
        .map_err(|_| anyhow::anyhow!("two replicas"))?;
    let echo = crate::latency::echo();
    let (_device, _browser): (String, FakeBrowser) = a.new_browser(echo).await?;
    let token = a.new_agent().await?.token;
    let mut on_a = AgentSocket::open(&a, &token).await?;
    let mut on_b = AgentSocket::open(&b, &token).await?;
    // B learns where the browser is from A's notice.
    let agent_b = latchkey_testkit::FakeAgent::new(b.http.clone(), b.http_base(), token.clone());
    let seen = latchkey_testkit::wait_until(Duration::from_secs(10), || async {
        agent_b
            .browsers()
            .await
            .is_ok_and(|l| l.browsers.iter().any(|x| x.online))
    })
    .await;
    if !seen {
        bail!("B never saw the browser on A");
    }
    let session_b = on_b.start_session("start").await?;
    let session_a = on_a.start_session("start").await?;
    // Another token, so its MCP session is not one of the sockets' (the
    // per-token session cap counts them all).
    let mcp_token = a.new_agent().await?.token;
    let mcp_a = McpClient::to_server(&a, &mcp_token, Revision::Stateless).await?;
    let mcp_b = McpClient::to_server(&b, &mcp_token, Revision::Stateless).await?;
    timed_mcp(&mcp_a).await?;
    let warmup = calls / 10 + 1;
    let (mut same, mut cross) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    let mut routed = Vec::with_capacity(calls);
    let (mut mcp_same, mut mcp_routed) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for n in 0..calls + warmup {
        let id = format!("c{n}");
        let s = timed(&mut on_a, &id, &session_a).await?;
        let c = timed(&mut on_b, &id, &session_b).await?;
        let r = timed(&mut on_b, &format!("r{n}"), &session_a).await?;
        let on_a_mcp = timed_mcp(&mcp_a).await?;
        let on_b_mcp = timed_mcp(&mcp_b).await?;
        if n >= warmup {
            same.push(s);
            cross.push(c);
            routed.push(r);
            mcp_same.push(on_a_mcp);
            mcp_routed.push(on_b_mcp);
        }
    }
    drop((on_a, on_b, mcp_a, mcp_b));
    b.stop().await;
    a.stop().await;
    drop(nats);
    let (same, cross, routed) = (summarize(same), summarize(cross), summarize(routed));
    let (mcp_same, mcp_routed) = (summarize(mcp_same), summarize(mcp_routed));
    let diff = |x: u128, y: u128| {
        i128::try_from(x).unwrap_or(i128::MAX) - i128::try_from(y).unwrap_or(i128::MAX)
    };
    Ok(ClusterCallsReport {
        scenario: "cluster-calls".to_string(),
        machine: Some(crate::procfs::machine()),
        calls,
        added_p50_us: diff(cross.p50_us, same.p50_us),
        added_p99_us: diff(cross.p99_us, same.p99_us),
        routed_added_p50_us: Some(diff(routed.p50_us, same.p50_us)),
        routed: Some(routed),
        mcp_routed_added_p50_us: Some(diff(mcp_routed.p50_us, mcp_same.p50_us)),
        mcp_same: Some(mcp_same),
        mcp_routed: Some(mcp_routed),
        same,
        cross,
    })
}

pub fn print(r: &ClusterCallsReport) {
    println!("scenario        calls   agent on        p50       p99       p99.9");
    let mut rows = vec![("same replica", &r.same), ("other replica", &r.cross)];
    if let Some(routed) = &r.routed {
        rows.push(("session routed", routed));
    }
    if let (Some(same), Some(routed)) = (&r.mcp_same, &r.mcp_routed) {
        rows.push(("MCP on A", same));
        rows.push(("MCP on B", routed));
    }
    for (what, s) in rows {
        println!(
            "{:<15} {:<7} {:<15} {:<9} {:<9} {}",
            r.scenario,
            r.calls,
            what,
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.p999_us)
        );
    }
    println!(
        "added by crossing replicas: p50 {} µs, p99 {} µs",
        r.added_p50_us, r.added_p99_us
    );
    if let Some(added) = r.routed_added_p50_us {
        println!("added by routing to the session's replica: p50 {added} µs");
    }
    if let Some(added) = r.mcp_routed_added_p50_us {
        println!("added to an MCP call by another replica: p50 {added} µs");
    }
}
