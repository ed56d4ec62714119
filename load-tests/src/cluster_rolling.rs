//! Device reconnect time in a rolling restart (docs/cluster.md, "Rolling
//! restarts"): three replicas on one PostgreSQL database and a `nats-server` of
//! the run's own, the devices spread round robin over them. Each replica in turn
//! drains (its sockets close with 1012) and starts again; the devices it held
//! reconnect at once, split over the replicas that are up, as the extension does
//! through a load balancer but without the extension's 1 s backoff, so what is
//! timed is the gateway's part: per device, from its Close to its handshake
//! answered on another replica; per restart, from the drain's start to the last
//! of its devices back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::future::try_join_all;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::{ExtensionSocket, FakeBrowser, FakeExtension, TestServer, wait_until};
use tokio::sync::watch;

use crate::cluster_revoke::{ready, replicas};
use crate::stats::{ms, percentile};

const REPLICAS: usize = 3;
/// Close 1012, service restart: what a draining replica in cluster mode sends.
const SERVICE_RESTART: u16 = 1012;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ClusterRollingReport {
    pub scenario: String,
    #[serde(default)]
    pub machine: Option<crate::procfs::Machine>,
    pub devices: usize,
    pub restarts: Vec<Restart>,
    /// Close → online again, every device moved in every restart.
    pub away_p50_us: u128,
    pub away_p99_us: u128,
    pub away_max_us: u128,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Restart {
    /// Devices whose socket the replica held when its drain began.
    pub moved: usize,
    /// From the drain's start to the last of them online elsewhere.
    pub all_back_ms: u128,
}

type Dial = (String, Option<Arc<rustls::ClientConfig>>);

/// What the device tasks share with the run.
struct Shared {
    /// Each replica's extension URL and TLS, `None` while it restarts (a load
    /// balancer has taken it out).
    dials: RwLock<Vec<Option<Dial>>>,
    reconnects: AtomicUsize,
    away: Mutex<Vec<Duration>>,
    last_back: Mutex<Option<Instant>>,
}

fn dial(server: &TestServer) -> Dial {
    (
        format!("{}/extension", server.public_base()),
        server.client_tls(),
    )
}

/// One device: served until its socket closes with 1012, then reconnected to
/// the next replica that is up, until the run stops.
async fn keep_online(
    mut ext: FakeExtension,
    n: usize,
    mut holder: usize,
    mut socket: ExtensionSocket,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    loop {
        let mut browser = FakeBrowser::serve_default(socket);
        let ended = tokio::select! {
            ended = browser.ended(Duration::from_secs(3600)) => ended?,
            _ = stop.changed() => return Ok(()),
        };
        if ended != Ended::Closed(SERVICE_RESTART) {
            bail!("a device's socket ended {ended:?}, not with 1012");
        }
        let closed = Instant::now();
        let mut tries = 0;
        socket = loop {
            // The devices of one replica split over the others, as a load
            // balancer spreads them.
            holder = (holder + 1 + (n + tries) % (REPLICAS - 1)) % REPLICAS;
            let target = shared.dials.read().expect("dials")[holder].clone();
            if let Some((url, tls)) = target {
                ext.via(&url, tls);
                if let Ok(s) = ext.connect_online().await {
                    break s;
                }
            }
            tries += 1;
            if tries > 100 * REPLICAS {
                bail!("a device found no replica to reconnect to");
            }
            if tries % REPLICAS == 0 {
                // Every replica refused: back off a little, as a client does.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let now = Instant::now();
        shared.away.lock().expect("away").push(now - closed);
        *shared.last_back.lock().expect("last") = Some(now);
        shared.reconnects.fetch_add(1, Ordering::SeqCst);
    }
}

pub async fn run(devices: usize) -> anyhow::Result<ClusterRollingReport> {
    let (nats, mut servers) = replicas(REPLICAS, devices).await?;
    let shared = Arc::new(Shared {
        dials: RwLock::new(servers.iter().map(|s| Some(dial(s))).collect()),
        reconnects: AtomicUsize::new(0),
        away: Mutex::new(Vec::new()),
        last_back: Mutex::new(None),
    });
    let (stop, stopped) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in (0..devices).collect::<Vec<_>>().chunks(50) {
        let batch = try_join_all(chunk.iter().map(|&n| {
            let first = &servers[0];
            let (url, tls) = dial(&servers[n % REPLICAS]);
            async move {
                let mut ext = first.new_extension().await?;
                ext.pair().await?;
                ext.via(&url, tls);
                let socket = ext.connect_online().await?;
                anyhow::Ok((n, ext, socket))
            }
        }))
        .await?;
        for (n, ext, socket) in batch {
            tasks.spawn(keep_online(
                ext,
                n,
                n % REPLICAS,
                socket,
                shared.clone(),
                stopped.clone(),
            ));
        }
    }

    let mut restarts = Vec::with_capacity(REPLICAS);
    for (i, server) in servers.iter_mut().enumerate() {
        let moved = server.state().registry.len();
        let before = shared.reconnects.load(Ordering::SeqCst);
        shared.dials.write().expect("dials")[i] = None;
        let start = Instant::now();
        // Drains (every socket closed with 1012), then listens again.
        server.restart().await?;
        let back = wait_until(Duration::from_secs(60), || async {
            shared.reconnects.load(Ordering::SeqCst) >= before + moved
        })
        .await;
        if !back {
            bail!("the devices of replica {i} were not all back within 60 s");
        }
        let last = shared
            .last_back
            .lock()
            .expect("last")
            .context("no device came back")?;
        restarts.push(Restart {
            moved,
            all_back_ms: last.saturating_duration_since(start).as_millis(),
        });
        if !ready(server).await {
            bail!("replica {i} did not hear the others after its restart");
        }
        shared.dials.write().expect("dials")[i] = Some(dial(server));
    }
    stop.send(true).context("stop")?;
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    // The first replica owns the database: it stops last.
    while let Some(server) = servers.pop() {
        server.stop().await;
    }
    drop(nats);

    let mut away = std::mem::take(&mut *shared.away.lock().expect("away"));
    away.sort();
    Ok(ClusterRollingReport {
        scenario: "cluster-rolling".to_string(),
        machine: Some(crate::procfs::machine()),
        devices,
        restarts,
        away_p50_us: percentile(&away, 0.50).as_micros(),
        away_p99_us: percentile(&away, 0.99).as_micros(),
        away_max_us: away.last().copied().unwrap_or_default().as_micros(),
    })
}

pub fn print(r: &ClusterRollingReport) {
    println!(
        "{:<16} {:<8} {:<8} {:<12} away p50 / p99 / max",
        "scenario", "devices", "moved", "all back"
    );
    for restart in &r.restarts {
        println!(
            "{:<16} {:<8} {:<8} {:<12}",
            r.scenario,
            r.devices,
            restart.moved,
            format!("{} ms", restart.all_back_ms)
        );
    }
    println!(
        "{:<16} {:<8} {:<8} {:<12} {} / {} / {}",
        r.scenario,
        r.devices,
        "all",
        "",
        ms(r.away_p50_us),
        ms(r.away_p99_us),
        ms(r.away_max_us)
    );
}
