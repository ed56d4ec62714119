//! Full TLS handshakes per second (no session resumption, ECDSA P-256 certificates
//! from rcgen): `concurrency` clients each connect, complete the handshake and hang
//! up, over and over, from rotating 127.2.x.y addresses so TIME_WAIT never runs out
//! of ports. Against latchkeyd's listener and the bare relay's, with each server's
//! CPU time, so the rate can be given per server core.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::client::Resumption;
use rustls_pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::procfs::{Machine, ProcSample, machine};
use crate::target::{Latchkeyd, Relay, ServerOptions};

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub target: String,
    pub handshakes: u64,
    pub failures: u64,
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
    pub ratio_per_core: f64,
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
    let before = sample()?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (connector, counter, failures, negotiated) = (
                connector.clone(),
                counter.clone(),
                failures.clone(),
                negotiated.clone(),
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
                        _ => {
                            failures.fetch_add(1, Ordering::Relaxed);
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
        handshakes,
        failures: failures.load(Ordering::Relaxed),
        per_sec: handshakes as f64 / elapsed,
        server_cpu_secs: cpu,
        per_server_core: handshakes as f64 / cpu.max(0.01),
        key_exchange,
        cipher_suite,
    })
}

pub async fn run(concurrency: usize, seconds: f64) -> anyhow::Result<HandshakeReport> {
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
    // Warm-up, then the measured runs back to back.
    let warm = (seconds / 10.0).min(1.0);
    measure(
        "relay",
        relay.device_addr,
        relay_tls.clone(),
        relay.sampler(),
        concurrency,
        warm,
    )
    .await?;
    measure(
        "latchkeyd",
        server.addr,
        server_tls.clone(),
        server.sampler(),
        concurrency,
        warm,
    )
    .await?;
    let relay_point = measure(
        "relay",
        relay.device_addr,
        relay_tls,
        relay.sampler(),
        concurrency,
        seconds,
    )
    .await?;
    let server_point = measure(
        "latchkeyd",
        server.addr,
        server_tls,
        server.sampler(),
        concurrency,
        seconds,
    )
    .await?;
    server.stop().await;
    relay.stop().await;
    Ok(HandshakeReport {
        scenario: "handshake".to_string(),
        machine: machine(),
        concurrency,
        seconds,
        ratio_per_core: server_point.per_server_core / relay_point.per_server_core.max(1.0),
        points: vec![relay_point, server_point],
    })
}

pub fn print(r: &HandshakeReport) {
    println!(
        "handshake: full TLS handshakes, {} clients, {:.0}s",
        r.concurrency, r.seconds
    );
    println!("target      handshakes  per s     server CPU s  per core-s  failures  negotiated");
    for p in &r.points {
        println!(
            "{:<11} {:<11} {:<9.0} {:<13.2} {:<11.0} {:<9} {} {}",
            p.target,
            p.handshakes,
            p.per_sec,
            p.server_cpu_secs,
            p.per_server_core,
            p.failures,
            p.cipher_suite,
            p.key_exchange
        );
    }
    println!(
        "latchkeyd / relay per server core: {:.2}x",
        r.ratio_per_core
    );
}
