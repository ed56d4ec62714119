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

use crate::agents::{CallKind, call_frame};
use crate::stats::{RoundSpread, Summary, ms, summarize};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct LatencyReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub calls: usize,
    pub payload_bytes: usize,
    /// What each call asks for; `navigate` under a policy with `--policy`.
    #[serde(default)]
    pub calls_kind: CallKind,
    pub relay: Summary,
    pub agent_socket: Summary,
    pub http: Summary,
    /// Under `--policy`: the same calls on the agent socket to a browser without
    /// one, in the same rounds (`agent_socket` is the policed browser's).
    #[serde(default)]
    pub unpoliced: Option<Summary>,
    /// Under `--delegation`: the HTTP calls made with a delegation token.
    #[serde(default)]
    pub http_delegated: Option<Summary>,
    pub socket_p50_ratio: f64,
    pub socket_p99_ratio: f64,
    /// Agent socket / relay, p50 and p99 of each round (the goal's figures are their
    /// medians); absent in runs from before the rounds.
    #[serde(default)]
    pub rounds_p50: Option<RoundSpread>,
    #[serde(default)]
    pub rounds_p99: Option<RoundSpread>,
}

/// Echo every `tool.echo` request immediately.
pub(crate) fn echo() -> latchkey_testkit::Script {
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
    kind: CallKind,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(calls);
    for i in 0..calls + warmup {
        let id = format!("c{i}");
        let frame: Value = serde_json::from_str(&call_frame(&id, session, &pad(), kind))?;
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

pub async fn run(calls: usize, policy: bool, delegation: bool) -> anyhow::Result<LatencyReport> {
    // Under a policy every call is a navigation it checks, on both servers alike.
    let kind = if policy {
        CallKind::Navigate
    } else {
        CallKind::Echo
    };
    let (method, extra) = match kind {
        CallKind::Echo => ("tool.echo", json!({})),
        CallKind::Navigate => ("tool.navigate", json!({ "url": crate::policed::URL })),
    };
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
    let (device, _browser) = server.new_browser(echo()).await?;
    let session = agent.start(Some(&device)).await?;
    // Under `--policy`, the same navigations also go to a second browser without
    // one, so the policy's own cost is measured against latchkeyd itself too.
    let mut unpoliced_session = None;
    let mut _second = None;
    if policy {
        let path = format!("/v1/admin/devices/{device}/policy");
        crate::policed::apply(&server.admin(), &path).await?;
        let (other, browser) = server.new_browser(echo()).await?;
        unpoliced_session = Some(agent.start(Some(&other)).await?.id);
        _second = Some(browser);
    }
    // Under `--delegation`, the HTTP calls are also made with a delegation token
    // for the same session, in the same rounds: what verifying one costs a call.
    let delegated = if delegation {
        let body = json!({ "ttl_secs": 3600, "session_id": session.id });
        let r = agent
            .request(
                latchkey_testkit::reqwest::Method::POST,
                "/v1/delegations",
                Some(&body),
            )
            .await?;
        if r.status != 201 {
            bail!("minting a delegation: {:?}", r.body);
        }
        let jwt = r.body["token"].as_str().context("no token")?.to_string();
        Some(server.agent(&jwt))
    } else {
        None
    };
    let mut req = format!("ws://{}/v1/agent", server.addr()).into_client_request()?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {}", agent.token).parse()?);
    let (mut agent_ws, _) = tokio_tungstenite::connect_async(req).await?;

    let (mut relay, mut socket, mut http) = (Vec::new(), Vec::new(), Vec::new());
    let mut unpoliced = Vec::new();
    let mut http_delegated = Vec::new();
    let (mut rounds_p50, mut rounds_p99) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let on_relay = time_socket(&mut relay_agent, per_round, warmup, None, kind).await?;
        let on_socket =
            time_socket(&mut agent_ws, per_round, warmup, Some(&session.id), kind).await?;
        let (r, l) = (summarize(on_relay.clone()), summarize(on_socket.clone()));
        rounds_p50.push(l.p50_us as f64 / r.p50_us.max(1) as f64);
        rounds_p99.push(l.p99_us as f64 / r.p99_us.max(1) as f64);
        relay.extend(on_relay);
        socket.extend(on_socket);
        if let Some(other) = &unpoliced_session {
            unpoliced
                .extend(time_socket(&mut agent_ws, per_round, warmup, Some(other), kind).await?);
        }
        for i in 0..per_round + warmup {
            let mut params = extra.clone();
            params["pad"] = json!(pad());
            let start = Instant::now();
            let r = agent.call(&session.id, method, params).await?;
            if !r.is_ok() {
                bail!("HTTP call failed: {:?}", r.body);
            }
            if i >= warmup {
                http.push(start.elapsed());
            }
        }
        if let Some(sub) = &delegated {
            for i in 0..per_round + warmup {
                let mut params = extra.clone();
                params["pad"] = json!(pad());
                let start = Instant::now();
                let r = sub.call(&session.id, method, params).await?;
                if !r.is_ok() {
                    bail!("delegated HTTP call failed: {:?}", r.body);
                }
                if i >= warmup {
                    http_delegated.push(start.elapsed());
                }
            }
        }
    }
    server.stop().await;

    let (relay, agent_socket, http) = (summarize(relay), summarize(socket), summarize(http));
    let unpoliced = policy.then(|| summarize(unpoliced));
    let http_delegated = delegation.then(|| summarize(http_delegated));
    Ok(LatencyReport {
        scenario: match (policy, delegation) {
            (true, _) => "latency-policy",
            (false, true) => "latency-delegation",
            (false, false) => "latency",
        }
        .to_string(),
        calls_kind: kind,
        machine: Some(crate::procfs::machine()),
        calls: per_round * ROUNDS,
        payload_bytes: 200,
        socket_p50_ratio: agent_socket.p50_us as f64 / relay.p50_us.max(1) as f64,
        socket_p99_ratio: agent_socket.p99_us as f64 / relay.p99_us.max(1) as f64,
        rounds_p50: RoundSpread::of(rounds_p50),
        rounds_p99: RoundSpread::of(rounds_p99),
        relay,
        agent_socket,
        http,
        unpoliced,
        http_delegated,
    })
}

pub fn print(r: &LatencyReport) {
    println!(
        "path                p50       p99       p999      (one call at a time, {} calls, ~200 B, {:?})",
        r.calls, r.calls_kind
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
    if let Some(d) = &r.http_delegated {
        println!(
            "{:<19} {:<9} {:<9} {}",
            "  … delegation",
            ms(d.p50_us),
            ms(d.p99_us),
            ms(d.p999_us)
        );
    }
    if let Some(u) = &r.unpoliced {
        println!(
            "{:<19} {:<9} {:<9} {}",
            "  … no policy",
            ms(u.p50_us),
            ms(u.p99_us),
            ms(u.p999_us)
        );
    }
    println!(
        "agent WS / relay: p50 {:.2}x, p99 {:.2}x",
        r.socket_p50_ratio, r.socket_p99_ratio
    );
    if let (Some(p50), Some(p99)) = (&r.rounds_p50, &r.rounds_p99) {
        println!(
            "median of {} rounds: p50 {:.2}x ({:.2}-{:.2}), p99 {:.2}x ({:.2}-{:.2})",
            p50.rounds, p50.median, p50.min, p50.max, p99.median, p99.min, p99.max
        );
    }
}
