//! Added latency of one relayed call at low load: one call at a time, 200-byte
//! params echoed back, agent → gateway → device → back, over loopback. Measured on
//! latchkeyd's agent socket and HTTP API, and on the bare relay with the same
//! scripted device and the same client, in one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::Frame;
use latchkey_testkit::extension::ExtensionSocket;
use latchkey_testkit::{Action, Backend, FakeBrowser, TestServer};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::stats::{Summary, ms, summarize};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct LatencyReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub calls: usize,
    pub payload_bytes: usize,
    pub relay: Summary,
    pub agent_socket: Summary,
    pub http: Summary,
    pub socket_p50_ratio: f64,
    pub socket_p99_ratio: f64,
}

/// Echo every `tool.echo` request immediately.
fn echo() -> latchkey_testkit::Script {
    Arc::new(|r| (r.method == "tool.echo").then(|| Action::Reply(json!({ "echo": r.params }))))
}

fn pad() -> String {
    "x".repeat(150)
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One request/answer round trip on an envelope socket.
async fn round_trip(ws: &mut Ws, id: &str, frame: &Value) -> anyhow::Result<()> {
    ws.send(Message::text(frame.to_string())).await?;
    loop {
        let msg = ws.next().await.context("socket ended")??;
        if let Message::Text(t) = msg {
            match Frame::parse(t.as_str())? {
                Frame::Success(s) if s.id == id => return Ok(()),
                Frame::Error(e) if e.id == id => bail!("call failed: {:?}", e.error),
                _ => continue,
            }
        }
    }
}

async fn time_socket(
    ws: &mut Ws,
    calls: usize,
    warmup: usize,
    session: Option<&str>,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls + warmup {
        let id = format!("c{i}");
        let mut params = json!({ "pad": pad() });
        if let Some(s) = session {
            params["session_id"] = json!(s);
        }
        let frame = json!({ "id": id, "method": "tool.echo", "params": params });
        let start = Instant::now();
        round_trip(ws, &id, &frame).await?;
        if i >= warmup {
            samples.push(start.elapsed());
        }
    }
    Ok(samples)
}

/// Rounds the calls are split into; the paths alternate round by round so that
/// drift in the machine's speed hits all of them alike.
const ROUNDS: usize = 10;

pub async fn run(calls: usize) -> anyhow::Result<LatencyReport> {
    let per_round = (calls / ROUNDS).max(1);
    let warmup = per_round / 5 + 20;
    // Bare relay.
    let (device_addr, agent_addr) = crate::relay::start(None).await?;
    let (device_ws, _) = tokio_tungstenite::connect_async(format!("ws://{device_addr}")).await?;
    let _relay_browser = FakeBrowser::serve(
        ExtensionSocket {
            ws: device_ws,
            protocol: None,
        },
        echo(),
    );
    let (mut relay_agent, _) =
        tokio_tungstenite::connect_async(format!("ws://{agent_addr}")).await?;

    // latchkeyd.
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| crate::target::unthrottled(l, 1))
        .without_log_capture()
        .start()
        .await?;
    let agent = server.new_agent().await?;
    let (_device, _browser) = server.new_browser(echo()).await?;
    let session = agent.start(None).await?;
    let mut req = format!("ws://{}/v1/agent", server.addr()).into_client_request()?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {}", agent.token).parse()?);
    let (mut agent_ws, _) = tokio_tungstenite::connect_async(req).await?;

    let (mut relay, mut socket, mut http) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        relay.extend(time_socket(&mut relay_agent, per_round, warmup, None).await?);
        socket.extend(time_socket(&mut agent_ws, per_round, warmup, Some(&session.id)).await?);
        for i in 0..per_round + warmup {
            let start = Instant::now();
            let r = agent
                .call(&session.id, "tool.echo", json!({ "pad": pad() }))
                .await?;
            if !r.is_ok() {
                bail!("HTTP call failed: {:?}", r.body);
            }
            if i >= warmup {
                http.push(start.elapsed());
            }
        }
    }
    server.stop().await;

    let (relay, agent_socket, http) = (summarize(relay), summarize(socket), summarize(http));
    Ok(LatencyReport {
        scenario: "latency".to_string(),
        machine: Some(crate::procfs::machine()),
        calls: per_round * ROUNDS,
        payload_bytes: 200,
        socket_p50_ratio: agent_socket.p50_us as f64 / relay.p50_us.max(1) as f64,
        socket_p99_ratio: agent_socket.p99_us as f64 / relay.p99_us.max(1) as f64,
        relay,
        agent_socket,
        http,
    })
}

pub fn print(r: &LatencyReport) {
    println!(
        "path                p50       p99       p999      (one call at a time, {} calls, ~200 B)",
        r.calls
    );
    for (name, s) in [
        ("bare relay", &r.relay),
        ("latchkeyd agent WS", &r.agent_socket),
        ("latchkeyd HTTP", &r.http),
    ] {
        println!(
            "{name:<19} {:<9} {:<9} {}",
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.p999_us)
        );
    }
    println!(
        "agent WS / relay: p50 {:.2}x, p99 {:.2}x",
        r.socket_p50_ratio, r.socket_p99_ratio
    );
}
