//! Full TLS handshakes per second (no session resumption, ECDSA P-256 certificates
//! from rcgen): `concurrency` clients each connect, complete the handshake and hang
//! up, over and over, from rotating 127.2.x.y addresses so TIME_WAIT never runs out
//! of ports. Against latchkeyd's listener and the bare relay's, with each server's
//! CPU time, so the rate can be given per server core. In alternating rounds, so
//! drift in the machine's speed hits both alike; the goal is judged on the median
//! of the per-round ratios.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::client::Resumption;
use rustls_pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::procfs::{Machine, ProcSample, machine};
use crate::stats::RoundSpread;
use crate::target::{Latchkeyd, Relay, ServerOptions};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub target: String,
    /// The round, from 1; 0 in runs from before rounds.
    #[serde(default)]
    pub round: usize,
    pub handshakes: u64,
    pub failures: u64,
    /// What the first failed handshake met (an error, or the 10 s limit).
    #[serde(default)]
    pub first_failure: Option<String>,
    pub per_sec: f64,
    pub server_cpu_secs: f64,
    pub per_server_core: f64,
    pub key_exchange: String,
    pub cipher_suite: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct HandshakeReport {
    pub scenario: String,
    pub machine: Machine,
    pub concurrency: usize,
    pub seconds: f64,
    pub points: Vec<Point>,
    /// Every round's handshakes over every round's server CPU, latchkeyd's
    /// against the relay's.
    pub ratio_per_core: f64,
    /// The per-round ratios per server core; absent in runs from before rounds.
    #[serde(default)]
    pub rounds_per_core: Option<RoundSpread>,
}

fn source(i: u64) -> IpAddr {
    let n = i % 50_000;
    IpAddr::V4(Ipv4Addr::new(
        127,
        2,
        u8::try_from(n / 250).unwrap_or(0),
        u8::try_from(n % 250 + 1).unwrap_or(1),
    ))
}

async fn one(
    connector: &TlsConnector,
    target: SocketAddr,
    from: IpAddr,
) -> anyhow::Result<(String, String)> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let tcp = socket.connect(target).await?;
    let name = ServerName::try_from("localhost")?;
    let tls = connector.connect(name, tcp).await?;
    let (_, conn) = tls.get_ref();
    let kx = conn
        .negotiated_key_exchange_group()
        .map(|g| format!("{:?}", g.name()))
        .unwrap_or_default();
    let suite = conn
        .negotiated_cipher_suite()
        .map(|s| format!("{:?}", s.suite()))
        .unwrap_or_default();
    Ok((kx, suite))
}

async fn measure(
    name: &str,
    target: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    sample: impl Fn() -> anyhow::Result<ProcSample>,
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<Point> {
    // A fresh config with resumption off: every handshake is a full one.
    let mut config = (*tls).clone();
    config.resumption = Resumption::disabled();
    let connector = TlsConnector::from(Arc::new(config));
    let counter = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let negotiated = Arc::new(std::sync::Mutex::new((String::new(), String::new())));
    let first_failure = Arc::new(std::sync::OnceLock::new());
    let before = sample()?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (connector, counter, failures, negotiated, first_failure) = (
                connector.clone(),
                counter.clone(),
                failures.clone(),
                negotiated.clone(),
                first_failure.clone(),
            );
            tokio::spawn(async move {
                while Instant::now() < end {
                    let n = counter.load(Ordering::Relaxed) + failures.load(Ordering::Relaxed);
                    match tokio::time::timeout(
                        Duration::from_secs(10),
                        one(&connector, target, source(n)),
                    )
                    .await
                    {
                        Ok(Ok(seen)) => {
                            counter.fetch_add(1, Ordering::Relaxed);
                            *negotiated.lock().unwrap_or_else(|p| p.into_inner()) = seen;
                        }
                        failed => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            first_failure.get_or_init(|| match failed {
                                Ok(Err(e)) => format!("{e:#}"),
                                _ => "no handshake within 10 s".to_string(),
                            });
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.context("handshake task")?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = sample()?.cpu_secs - before.cpu_secs;
    let handshakes = counter.load(Ordering::Relaxed);
    let (key_exchange, cipher_suite) = negotiated.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Point {
        target: name.to_string(),
        round: 0,
        handshakes,
        failures: failures.load(Ordering::Relaxed),
        first_failure: first_failure.get().cloned(),
        per_sec: handshakes as f64 / elapsed,
        server_cpu_secs: cpu,
        per_server_core: handshakes as f64 / cpu.max(0.01),
        key_exchange,
        cipher_suite,
    })
}

/// A warm-up of each, then `rounds` rounds of `seconds` on each server, the order
/// alternating from round to round.
pub async fn run(
    concurrency: usize,
    seconds: f64,
    rounds: usize,
) -> anyhow::Result<HandshakeReport> {
    let server = Latchkeyd::start(&ServerOptions {
        tls: true,
        devices: 0,
        calls_in_flight_per_device: 8,
        behind_proxy: None,
    })
    .await?;
    let relay = Relay::start(true).await?;
    let server_tls = server.client_tls.clone().context("TLS expected")?;
    let relay_tls = relay.client_tls.clone().context("TLS expected")?;
    let on = |relay_side: bool, secs: f64| {
        let (name, addr, tls, sampler): (_, _, _, Box<dyn Fn() -> anyhow::Result<ProcSample>>) =
            if relay_side {
                (
                    "relay",
                    relay.device_addr,
                    relay_tls.clone(),
                    Box::new(relay.sampler()),
                )
            } else {
                (
                    "latchkeyd",
                    server.addr,
                    server_tls.clone(),
                    Box::new(server.sampler()),
                )
            };
        measure(name, addr, tls, sampler, concurrency, secs)
    };
    let warm = (seconds / 10.0).min(1.0);
    on(true, warm).await?;
    on(false, warm).await?;
    let mut points = Vec::new();
    let mut round_ratios = Vec::new();
    for round in 1..=rounds.max(1) {
        let relay_first = round % 2 == 1;
        let mut pair = Vec::with_capacity(2);
        for relay_side in [relay_first, !relay_first] {
            let mut point = on(relay_side, seconds).await?;
            point.round = round;
            pair.push(point);
        }
        if let [a, b] = pair.as_slice() {
            let (l, x) = if a.target == "latchkeyd" {
                (a, b)
            } else {
                (b, a)
            };
            round_ratios.push(l.per_server_core / x.per_server_core.max(1.0));
        }
        points.extend(pair);
    }
    server.stop().await;
    relay.stop().await;
    let pooled = |target: &str| {
        let of = points.iter().filter(|p| p.target == target);
        let handshakes: u64 = of.clone().map(|p| p.handshakes).sum();
        let cpu: f64 = of.map(|p| p.server_cpu_secs).sum();
        handshakes as f64 / cpu.max(1e-9)
    };
    Ok(HandshakeReport {
        scenario: "handshake".to_string(),
        machine: machine(),
        concurrency,
        seconds,
        ratio_per_core: pooled("latchkeyd") / pooled("relay").max(1.0),
        rounds_per_core: RoundSpread::of(round_ratios),
        points,
    })
}

pub fn print(r: &HandshakeReport) {
    println!(
        "handshake: full TLS handshakes, {} clients, {}s a server a round",
        r.concurrency, r.seconds
    );
    println!(
        "target      round  handshakes  per s     server CPU s  per core-s  failures  negotiated"
    );
    for p in &r.points {
        println!(
            "{:<11} {:<6} {:<11} {:<9.0} {:<13.2} {:<11.0} {:<9} {} {}",
            p.target,
            p.round,
            p.handshakes,
            p.per_sec,
            p.server_cpu_secs,
            p.per_server_core,
            p.failures,
            p.cipher_suite,
            p.key_exchange
        );
        if let Some(e) = &p.first_failure {
            println!("first failure on {}: {e}", p.target);
        }
    }
    println!(
        "latchkeyd / relay per server core: {:.2}x over all rounds",
        r.ratio_per_core
    );
    if let Some(s) = &r.rounds_per_core {
        println!(
            "per round: median {:.2}x ({:.2}-{:.2}, {} rounds)",
            s.median, s.min, s.max, s.rounds
        );
    }
}
