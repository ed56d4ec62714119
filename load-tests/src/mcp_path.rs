//! The MCP path against the agent WebSocket, on one latchkeyd in its own process
//! (docs/mcp.md): the same small call (a navigation with ~200 B of params, which
//! the catalogue judges on both paths) made through `/mcp` and through the agent
//! socket. `/mcp` is called by two clients: a plain HTTP client as lean as the
//! socket's ([`PlainMcp`]), whose figures the goal takes since they compare the
//! paths rather than the client libraries, and the official Rust SDK's client,
//! which is what many agents run. One call at a time for latency, in alternating
//! rounds; then `concurrency` calls in flight for throughput per server core, from
//! the server's CPU time in /proc.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use latchkey_testkit::{Connections, McpClient, Revision};
use serde_json::{Value, json};

use crate::agents::{self, CallKind, LoopResult};
use crate::mcp_plain::PlainMcp;
use crate::procfs::{Machine, machine};
use crate::stats::{RoundSpread, Summary, ms, summarize};
use crate::target::{Latchkeyd, ServerOptions};
use crate::throughput::Point;

/// Devices the calls are spread over, as in the throughput scenario.
const DEVICES: usize = 8;
/// Latency rounds; the two paths alternate round by round.
const ROUNDS: usize = 10;
/// Rounds of the socket's and the plain client's throughput, taking turns.
const THROUGHPUT_ROUNDS: usize = 4;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct McpReport {
    pub scenario: String,
    pub machine: Machine,
    pub seconds: f64,
    /// One call at a time on the agent socket.
    pub socket: Summary,
    /// One call at a time through `/mcp`, by the SDK's client.
    pub mcp: Summary,
    /// One call at a time through `/mcp`, by the plain client; absent in runs
    /// from before it was measured.
    #[serde(default)]
    pub plain: Option<Summary>,
    /// One call at a time on the HTTP API (`POST /v1/sessions/{id}/calls`), for
    /// what a request per call costs without MCP.
    pub http: Summary,
    /// MCP (SDK client) / agent socket over all calls of the latency rounds.
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    /// MCP (SDK client) / agent socket, p50 and p99 of each latency round;
    /// absent in runs from before the rounds were kept.
    #[serde(default)]
    pub rounds_p50: Option<RoundSpread>,
    #[serde(default)]
    pub rounds_p99: Option<RoundSpread>,
    /// MCP (plain client) / agent socket, p50 and p99 of each latency round:
    /// the goal's figure is the p50s' median.
    #[serde(default)]
    pub plain_rounds_p50: Option<RoundSpread>,
    #[serde(default)]
    pub plain_rounds_p99: Option<RoundSpread>,
    pub points: Vec<Point>,
    /// MCP (SDK client) / agent socket, calls per server core, at `concurrency`.
    pub ratio_per_core: f64,
    /// MCP (plain client) / agent socket, calls per server core: the goal's.
    #[serde(default)]
    pub plain_ratio_per_core: Option<f64>,
    /// The same, each round's: the goal takes their median.
    #[serde(default)]
    pub plain_rounds_per_core: Option<RoundSpread>,
}

impl McpReport {
    /// Failed calls at the points with many in flight (a failed call one at a time
    /// already failed the run): a rate with failures in it is not a rate served.
    pub fn errors(&self) -> u64 {
        self.points.iter().map(|p| p.errors).sum()
    }
}

fn arguments() -> Value {
    json!({ "url": crate::policed::URL, "pad": "x".repeat(150) })
}

/// Run `call` on every caller, one call at a time each, for `duration`. A call
/// answers `Some(text)` when it failed.
async fn call_loops<T>(
    callers: &[T],
    duration: Duration,
    call: impl AsyncFn(&T) -> anyhow::Result<Option<String>>,
) -> anyhow::Result<LoopResult> {
    let start = Instant::now();
    let end = start + duration;
    let call = &call;
    let runs = callers.iter().map(|caller| async move {
        let mut r = LoopResult::default();
        while Instant::now() < end {
            let sent = Instant::now();
            let failed = call(caller).await?;
            r.latencies.push(sent.elapsed());
            r.calls += 1;
            if let Some(text) = failed {
                r.errors += 1;
                r.first_error.get_or_insert(text);
            }
        }
        anyhow::Ok(r)
    });
    agents::total(runs, start).await
}

/// `tool.navigate` on the HTTP API in every session.
async fn http_loop(
    agent: &latchkey_testkit::FakeAgent,
    sessions: &[String],
    duration: Duration,
) -> anyhow::Result<LoopResult> {
    call_loops(sessions, duration, async |session| {
        let answer = agent.call(session, "tool.navigate", arguments()).await?;
        Ok((!answer.is_ok()).then(|| answer.body.to_string()))
    })
    .await
}

/// `browser_navigate` through `/mcp` on every client.
async fn mcp_loop(clients: &[McpClient], duration: Duration) -> anyhow::Result<LoopResult> {
    call_loops(clients, duration, async |client| {
        let answer = client.call("browser_navigate", arguments()).await?;
        Ok((answer.is_error == Some(true)).then(|| latchkey_testkit::mcp::text(&answer)))
    })
    .await
}

/// `browser_navigate` through `/mcp` by the plain client on every caller.
async fn plain_loop(clients: &[PlainMcp], duration: Duration) -> anyhow::Result<LoopResult> {
    let args = arguments();
    call_loops(clients, duration, async |client| {
        client.call("browser_navigate", &args).await
    })
    .await
}

/// A measured point; `target` names the path.
fn point(path: &str, concurrency: usize, r: LoopResult, cpu: f64) -> Point {
    Point {
        target: path.to_string(),
        concurrency,
        calls: r.calls,
        errors: r.errors,
        first_error: r.first_error,
        calls_per_sec: r.calls as f64 / r.elapsed.as_secs_f64().max(f64::EPSILON),
        server_cpu_secs: cpu,
        calls_per_server_core: r.calls as f64 / cpu.max(0.01),
        latency: summarize(r.latencies),
    }
}

pub async fn run(concurrency: usize, seconds: f64) -> anyhow::Result<McpReport> {
    let concurrency = concurrency.max(1);
    let server = Latchkeyd::start(&ServerOptions {
        tls: false,
        devices: DEVICES,
        calls_in_flight_per_device: 64,
        behind_proxy: None,
    })
    .await?;
    let sample = server.sampler();
    let mut pairs =
        crate::pairs::on_latchkeyd(&server, DEVICES, concurrency.div_ceil(DEVICES), 0).await?;

    // One MCP client per call in flight, each with its own session key, so each
    // has its own session; spread over the devices as the sockets' sessions are.
    // Each keeps its connection between calls, as the TypeScript and Python
    // SDKs' clients do (load-tests/notes.md, "MCP").
    let agent = server.new_agent().await?;
    let url = format!("{}/mcp", server.http_base);
    let mut clients = Vec::with_capacity(concurrency);
    let mut plain = Vec::with_capacity(concurrency);
    for i in 0..concurrency {
        let key = format!("load-{i}");
        plain.push(PlainMcp::new(&url, &agent.token, &key)?);
        clients.push(
            McpClient::connect(
                &url,
                &agent.token,
                Revision::Stateless,
                Some(&key),
                Connections::Kept,
            )
            .await?,
        );
    }
    let listed = clients[0].call("browser_list", json!({})).await?;
    let devices: Vec<String> = listed
        .structured_content
        .as_ref()
        .and_then(|v| v["browsers"].as_array().cloned())
        .context("browser_list answered no list")?
        .iter()
        .filter_map(|b| b["id"].as_str().map(str::to_string))
        .collect();
    if devices.len() != DEVICES {
        bail!("{} browsers listed, {DEVICES} paired", devices.len());
    }
    for (i, client) in clients.iter().enumerate() {
        let picked = client
            .call(
                "browser_select",
                json!({ "browser_id": devices[i % DEVICES] }),
            )
            .await?;
        if picked.is_error == Some(true) {
            bail!("browser_select: {}", latchkey_testkit::mcp::text(&picked));
        }
    }

    // Latency: one call at a time, alternating rounds.
    let http_session = agent.start(Some(&devices[0])).await?.id;
    let round = Duration::from_secs_f64(seconds / ROUNDS as f64);
    let (mut socket, mut mcp) = (LoopResult::default(), LoopResult::default());
    let mut plain_calls = LoopResult::default();
    let (mut rounds_plain_p50, mut rounds_plain_p99) = (Vec::new(), Vec::new());
    let mut http = Vec::new();
    let (mut rounds_p50, mut rounds_p99) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let on_socket =
            agents::closed_loop(&mut pairs.agents[..1], 1, round, 150, CallKind::Navigate).await?;
        let on_mcp = mcp_loop(&clients[..1], round).await?;
        let on_plain = plain_loop(&plain[..1], round).await?;
        let (s, m) = (
            summarize(on_socket.latencies.clone()),
            summarize(on_mcp.latencies.clone()),
        );
        let plain_round = summarize(on_plain.latencies.clone());
        rounds_plain_p50.push(plain_round.p50_us as f64 / s.p50_us.max(1) as f64);
        rounds_plain_p99.push(plain_round.p99_us as f64 / s.p99_us.max(1) as f64);
        plain_calls.then(on_plain);
        rounds_p50.push(m.p50_us as f64 / s.p50_us.max(1) as f64);
        rounds_p99.push(m.p99_us as f64 / s.p99_us.max(1) as f64);
        socket.then(on_socket);
        mcp.then(on_mcp);
        let end = Instant::now() + round;
        while Instant::now() < end {
            let sent = Instant::now();
            let r = agent
                .call(&http_session, "tool.navigate", arguments())
                .await?;
            if !r.is_ok() {
                bail!("HTTP call failed: {:?}", r.body);
            }
            http.push(sent.elapsed());
        }
    }
    if socket.errors + mcp.errors + plain_calls.errors > 0 {
        bail!(
            "calls failed: {:?} {:?} {:?}",
            socket.first_error,
            mcp.first_error,
            plain_calls.first_error
        );
    }
    let (socket, mcp, plain_calls, http) = (
        summarize(socket.latencies),
        summarize(mcp.latencies),
        summarize(plain_calls.latencies),
        summarize(http),
    );

    // Throughput: `concurrency` calls in flight on each path, warmed up first. The
    // socket and the plain client, whose ratio the goal takes, take turns in
    // rounds (the order alternating), so each round's ratio compares the two
    // seconds apart: the host's speed wanders more than that between two points
    // taken a minute apart. Their points pool the rounds.
    let in_flight = concurrency.div_ceil(DEVICES);
    let duration = Duration::from_secs_f64(seconds);
    let slice = duration / THROUGHPUT_ROUNDS as u32;
    let socket_loop = async |pairs: &mut crate::pairs::Pairs, span: Duration| {
        agents::closed_loop(&mut pairs.agents, in_flight, span, 150, CallKind::Navigate).await
    };
    socket_loop(&mut pairs, duration / 10).await?;
    mcp_loop(&clients, duration / 10).await?;
    plain_loop(&plain, duration / 10).await?;
    let (mut socket_pool, mut socket_cpu) = (LoopResult::default(), 0.0);
    let (mut plain_pool, mut plain_cpu) = (LoopResult::default(), 0.0);
    let mut rounds_per_core = Vec::with_capacity(THROUGHPUT_ROUNDS);
    for round in 0..THROUGHPUT_ROUNDS {
        let (mut socket_rate, mut plain_rate) = (0.0, 0.0);
        for socket_turn in [round % 2 == 0, round % 2 == 1] {
            let before = sample()?.cpu_secs;
            let r = if socket_turn {
                socket_loop(&mut pairs, slice).await?
            } else {
                plain_loop(&plain, slice).await?
            };
            let cpu = sample()?.cpu_secs - before;
            let rate = r.calls as f64 / cpu.max(0.001);
            if socket_turn {
                (socket_rate, socket_cpu) = (rate, socket_cpu + cpu);
                socket_pool.then(r);
            } else {
                (plain_rate, plain_cpu) = (rate, plain_cpu + cpu);
                plain_pool.then(r);
            }
        }
        rounds_per_core.push(plain_rate / socket_rate.max(1.0));
    }
    let socket_point = point("agent WS", DEVICES * in_flight, socket_pool, socket_cpu);
    let plain_point = point("MCP (plain)", concurrency, plain_pool, plain_cpu);
    let http_sessions: Vec<String> = {
        let mut opened = Vec::with_capacity(concurrency);
        for i in 0..concurrency {
            opened.push(agent.start(Some(&devices[i % DEVICES])).await?.id);
        }
        opened
    };
    http_loop(&agent, &http_sessions, duration / 10).await?;
    let before = sample()?.cpu_secs;
    let r = http_loop(&agent, &http_sessions, duration).await?;
    let http_point = point("HTTP API", concurrency, r, sample()?.cpu_secs - before);
    let before = sample()?.cpu_secs;
    let r = mcp_loop(&clients, duration).await?;
    let mcp_point = point("MCP (SDK)", concurrency, r, sample()?.cpu_secs - before);

    for client in clients {
        client.close().await?;
    }
    pairs.stop().await;
    server.stop().await;
    let ratio_per_core =
        mcp_point.calls_per_server_core / socket_point.calls_per_server_core.max(1.0);
    let plain_ratio_per_core =
        plain_point.calls_per_server_core / socket_point.calls_per_server_core.max(1.0);
    let points = vec![socket_point, http_point, mcp_point, plain_point];
    Ok(McpReport {
        scenario: "mcp".to_string(),
        machine: machine(),
        seconds,
        p50_ratio: mcp.p50_us as f64 / socket.p50_us.max(1) as f64,
        p99_ratio: mcp.p99_us as f64 / socket.p99_us.max(1) as f64,
        rounds_p50: RoundSpread::of(rounds_p50),
        rounds_p99: RoundSpread::of(rounds_p99),
        plain_rounds_p50: RoundSpread::of(rounds_plain_p50),
        plain_rounds_p99: RoundSpread::of(rounds_plain_p99),
        socket,
        mcp,
        plain: Some(plain_calls),
        http,
        ratio_per_core,
        plain_ratio_per_core: Some(plain_ratio_per_core),
        plain_rounds_per_core: RoundSpread::of(rounds_per_core),
        points,
    })
}

pub fn print(r: &McpReport) {
    println!("MCP against the agent WebSocket: navigations, ~200 B params");
    println!("path         p50       p99       p999      (one call at a time)");
    let mut rows = vec![
        ("agent WS", &r.socket),
        ("HTTP API", &r.http),
        ("MCP (SDK)", &r.mcp),
    ];
    if let Some(plain) = &r.plain {
        rows.push(("MCP (plain)", plain));
    }
    for (name, s) in rows {
        println!(
            "{name:<12} {:<9} {:<9} {}",
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.p999_us)
        );
    }
    println!(
        "path         conc  calls/s    server CPU s  calls/core-s  p50       p99       errors"
    );
    for p in &r.points {
        println!(
            "{:<12} {:<5} {:<10.0} {:<13.2} {:<13.0} {:<9} {:<9} {}",
            p.target,
            p.concurrency,
            p.calls_per_sec,
            p.server_cpu_secs,
            p.calls_per_server_core,
            ms(p.latency.p50_us),
            ms(p.latency.p99_us),
            p.errors
        );
        if let Some(e) = &p.first_error {
            println!("first error on {}: {e}", p.target);
        }
    }
    let client = |name: &str, p50: Option<&RoundSpread>, p99: Option<&RoundSpread>, core: f64| {
        if let (Some(p50), Some(p99)) = (p50, p99) {
            println!(
                "MCP ({name}) / agent WS, median of {} rounds: p50 {:.2}x ({:.2}-{:.2}), \
                 p99 {:.2}x ({:.2}-{:.2}); {core:.2}x per server core",
                p50.rounds, p50.median, p50.min, p50.max, p99.median, p99.min, p99.max
            );
        }
    };
    println!(
        "MCP (SDK) / agent WS over all calls: p50 {:.2}x, p99 {:.2}x",
        r.p50_ratio, r.p99_ratio
    );
    client(
        "SDK",
        r.rounds_p50.as_ref(),
        r.rounds_p99.as_ref(),
        r.ratio_per_core,
    );
    if let Some(core) = r.plain_ratio_per_core {
        client(
            "plain",
            r.plain_rounds_p50.as_ref(),
            r.plain_rounds_p99.as_ref(),
            core,
        );
    }
    if let Some(s) = &r.plain_rounds_per_core {
        println!(
            "MCP (plain) / agent WS per server core, median of {} rounds: {:.2}x ({:.2}-{:.2})",
            s.rounds, s.median, s.min, s.max
        );
    }
}
