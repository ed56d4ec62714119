//! A rolling restart of a cluster under load (docs/cluster.md, "Rolling
//! restarts"): three real `latchkeyd` processes on one PostgreSQL database and a
//! `nats-server` of the test's own, behind the shipped nginx files. Browsers
//! reconnect through nginx whenever their socket closes, as the extension does;
//! agents call them at a steady pace through nginx. Each replica in turn gets
//! SIGTERM, drains, and is started again on its port. Then: no call failed
//! except with a retryable code, every browser came back, every renewal holds,
//! and every session start and answered call the agents saw has its audit row,
//! in a chain that verifies.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_protocol::agent::StartSessionRequest;
use latchkey_testkit::extension::{Ended, new_token};
use latchkey_testkit::{
    AdminClient, Backend, Daemon, FakeAgent, FakeBrowser, FakeExtension, NatsServer, Nginx,
    ScratchDatabase, wait_until,
};
use serde_json::json;
use tokio::process::Command;
use tokio::sync::watch;

const REPLICAS: usize = 3;
const DEVICES: usize = 12;
const AGENTS: usize = 2;
/// Each agent's pace: two agents stay under the shipped nginx's 50 requests a
/// second per address on `/v1/` (its `limit_req`), as both call from 127.0.1.0.
const PACE: Duration = Duration::from_millis(50);
const DEADLINE: Duration = Duration::from_secs(30);
/// Codes an agent retries on (docs/error-codes.md): the node drains, the call
/// cannot travel now, the browser's socket moved mid-call, the session ended
/// with its replica (on another replica its id is unknown: `not_found`).
const RETRYABLE: [&str; 8] = [
    "server_shutting_down",
    "gateway_unavailable",
    "browser_disconnected",
    "session_ended",
    "not_found",
    "no_browser_connected",
    "capacity_reached",
    "store_unavailable",
];

/// One replica: a real process, restarted on the same port.
struct Replica {
    daemon: Option<Daemon>,
    dir: tempfile::TempDir,
    listen: String,
    name: String,
}

struct Cluster {
    db: ScratchDatabase,
    nats_url: String,
    public_url: String,
}

impl Cluster {
    fn command(&self, replica_dir: &Path, listen: &str, name: &str) -> Command {
        let exe = Path::new(env!("CARGO_BIN_EXE_latchkeyd"));
        let mut command = Daemon::serve_command_on(
            exe,
            replica_dir,
            "authorize_per_minute = 60000\nupgrades_per_minute = 60000\n\
             renewals_per_minute_per_device = 600\ndrain_timeout_ms = 5000",
            listen,
        )
        .expect("command");
        command
            .env("LATCHKEY_DATABASE_URL", &self.db.url)
            .env("LATCHKEY_CLUSTER", &self.nats_url)
            .env("LATCHKEY_NODE_ID", name)
            .env("LATCHKEY_PUBLIC_URL", &self.public_url)
            .env("LATCHKEY_TRUSTED_PROXY", "127.0.0.1/32")
            .env("LATCHKEY_LOG", "warn");
        command
    }

    async fn start(&self, replica: &mut Replica) {
        let command = self.command(replica.dir.path(), &replica.listen, &replica.name);
        let daemon = Daemon::spawn(command, std::process::Stdio::inherit())
            .await
            .expect("replica started");
        replica.listen = daemon.addr.clone();
        let base = daemon.http_base();
        replica.daemon = Some(daemon);
        let http = latchkey_testkit::http_client();
        let ready = wait_until(DEADLINE, || async {
            match http.get(format!("{base}/readyz")).send().await {
                Ok(r) => r.text().await.is_ok_and(|t| t == "ready"),
                Err(_) => false,
            }
        })
        .await;
        assert!(ready, "{} hears the other replicas", replica.name);
    }
}

/// SIGTERM, as an orchestrator sends it, and the exit status.
async fn terminate(replica: &mut Replica) {
    let mut daemon = replica.daemon.take().expect("running");
    let pid = daemon.child.id().expect("pid");
    let signalled = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .expect("kill");
    assert!(signalled.success());
    let status = tokio::time::timeout(DEADLINE, daemon.child.wait())
        .await
        .expect("drained in time")
        .expect("exit status");
    assert!(status.success(), "{} exited {status}", replica.name);
}

/// What the browsers saw.
#[derive(Default)]
struct Browsers {
    online: usize,
    /// Handshakes answered, over the whole run.
    connections: usize,
    /// How each socket ended, by code (`dropped` without a Close).
    closes: BTreeMap<String, usize>,
    /// Longest time from a close to the same device online again.
    longest_away: Duration,
    renewals: usize,
}

/// Keeps one device online through nginx: reconnects whenever its socket ends
/// (at once, then after a short back-off while the upgrade is refused), and
/// renews its grant once after the first move, so the reconnects that follow
/// show the renewal held.
async fn keep_online(
    mut ext: FakeExtension,
    mut stop: watch::Receiver<bool>,
    seen: Arc<Mutex<Browsers>>,
) {
    let mut away_since: Option<Instant> = None;
    let mut renewed = false;
    while !*stop.borrow() {
        let mut attempts = 0;
        let socket = loop {
            match ext.connect_online().await {
                Ok(s) => break s,
                Err(e) => {
                    attempts += 1;
                    assert!(attempts < 200, "device never came back: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        {
            let mut seen = seen.lock().unwrap();
            seen.online += 1;
            seen.connections += 1;
            if let Some(since) = away_since.take() {
                seen.longest_away = seen.longest_away.max(since.elapsed());
            }
        }
        let mut browser = FakeBrowser::serve_default(socket);
        let ended = tokio::select! {
            ended = browser.ended(Duration::from_secs(600)) => ended.expect("socket task"),
            _ = stop.changed() => return,
        };
        away_since = Some(Instant::now());
        {
            let mut seen = seen.lock().unwrap();
            seen.online -= 1;
            let code = match ended {
                Ended::Closed(c) => c.to_string(),
                Ended::Dropped => "dropped".to_string(),
            };
            *seen.closes.entry(code).or_default() += 1;
        }
        if !renewed {
            renew(&mut ext).await;
            renewed = true;
            seen.lock().unwrap().renewals += 1;
        }
    }
}

/// One renewal, retried with the same next token while the answer is lost or
/// the store busy (a retry of a renewal already made is answered as such).
async fn renew(ext: &mut FakeExtension) {
    let next = new_token();
    let mut last = String::new();
    for _ in 0..100 {
        match ext.renew_to(&next).await {
            Ok(a) if a.status == 200 => return,
            Ok(a) if matches!(a.status, 429 | 502 | 503) => {
                last = format!("HTTP {} {}", a.status, a.body)
            }
            Ok(a) => panic!("renewal refused: HTTP {} {}", a.status, a.body),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("renewal never answered: {last}");
}

/// What the agents saw.
#[derive(Default)]
struct Calls {
    ok: usize,
    retried: BTreeMap<String, usize>,
    failed: Vec<String>,
    /// Sessions whose start was answered 201.
    started: Vec<String>,
}

/// Starts a session on one of `devices` when it has none, and calls it at a
/// steady pace; a retryable answer drops the session (a new one is started on
/// the next tick), anything else but success is a failure.
async fn drive(
    agent: FakeAgent,
    devices: Vec<String>,
    stop: watch::Receiver<bool>,
    calls: Arc<Mutex<Calls>>,
) {
    let mut tick = tokio::time::interval(PACE);
    let mut session: Option<String> = None;
    let mut next_device = 0;
    while !*stop.borrow() {
        tick.tick().await;
        let outcome = match &session {
            None => {
                let request = StartSessionRequest {
                    browser_id: Some(devices[next_device % devices.len()].clone()),
                    wait_for_browser_ms: Some(10_000),
                    ..Default::default()
                };
                next_device += 1;
                match agent.start_raw(&request).await {
                    Ok(o) if o.status == 201 => {
                        let id = o.body["id"].as_str().expect("session id").to_string();
                        calls.lock().unwrap().started.push(id.clone());
                        session = Some(id);
                        continue;
                    }
                    other => other,
                }
            }
            Some(id) => agent.call(id, "tool.snapshot", json!({})).await,
        };
        let mut calls = calls.lock().unwrap();
        match outcome {
            Ok(o) if o.is_ok() => calls.ok += 1,
            Ok(o) if RETRYABLE.contains(&o.code()) => {
                *calls.retried.entry(o.code().to_string()).or_default() += 1;
                session = None;
            }
            Ok(o) => calls.failed.push(format!("HTTP {} {}", o.status, o.body)),
            Err(e) => calls.failed.push(format!("transport: {e:#}")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_loses_nothing() {
    let Some(binary) = Nginx::binary() else {
        assert!(std::env::var_os("CI").is_none(), "nginx is required in CI");
        return;
    };
    let Some(Backend::Postgres { admin_url }) = Backend::postgres().await else {
        return;
    };
    let Some(nats_binary) = NatsServer::required_binary() else {
        return;
    };
    let nats = NatsServer::start(nats_binary).await.expect("nats-server");
    let port = latchkey_testkit::nginx::free_port().expect("port");
    let cluster = Cluster {
        db: ScratchDatabase::create(&admin_url).await.expect("database"),
        nats_url: nats.url(),
        public_url: format!("wss://localhost:{port}"),
    };
    let mut replicas: Vec<Replica> = (0..REPLICAS)
        .map(|i| Replica {
            daemon: None,
            dir: tempfile::tempdir().expect("tempdir"),
            listen: "127.0.0.1:0".to_string(),
            name: format!("replica-{i}"),
        })
        .collect();
    for replica in &mut replicas {
        cluster.start(replica).await;
    }
    let (nginx, certs) = Nginx::start_in_front(
        &binary,
        replicas.iter().map(|r| r.listen.clone()).collect(),
        port,
    )
    .await
    .expect("nginx");
    let tls = certs.client_config().expect("tls");
    // Each browser from an address of its own (127.0.1.N), as browsers are in
    // different homes: the shipped nginx allows one address 60 pairings and
    // renewals a minute.
    let client_from = |n: u8| {
        latchkey_testkit::http_builder()
            .tls_certs_only([latchkey_testkit::reqwest::Certificate::from_pem(
                certs.ca_pem.as_bytes(),
            )
            .expect("ca")])
            .local_address(std::net::IpAddr::from([127, 0, 1, n]))
            .build()
            .expect("client")
    };
    let http = client_from(0);
    let first = replicas[0].daemon.as_ref().expect("first");
    let admin = AdminClient::new(
        http.clone(),
        format!("https://localhost:{port}"),
        first.bootstrap_token.clone().expect("admin token"),
    );

    // Browsers, paired and kept online through nginx.
    let (stop, stopped) = watch::channel(false);
    let browsers = Arc::new(Mutex::new(Browsers::default()));
    let mut ids = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 1..=DEVICES {
        let pairing = admin.create_pairing(None, None).await.expect("pairing");
        let from = client_from(u8::try_from(n).expect("few devices"));
        let mut ext =
            FakeExtension::from_link(&pairing.link, from, Some(tls.clone())).expect("link");
        ids.push(ext.pair().await.expect("pair").device_id);
        tasks.spawn(keep_online(ext, stopped.clone(), browsers.clone()));
    }
    let all_online = || async { browsers.lock().unwrap().online == DEVICES };
    assert!(
        wait_until(DEADLINE, all_online).await,
        "every browser online"
    );

    // Agents, each with its own half of the browsers.
    let calls = Arc::new(Mutex::new(Calls::default()));
    for a in 0..AGENTS {
        let token = admin
            .create_token(&format!("agent-{a}"), latchkey_protocol::api::Role::Agent)
            .await
            .expect("token")
            .token;
        let agent = FakeAgent::new(http.clone(), format!("https://localhost:{port}"), token);
        let mine = ids.iter().skip(a).step_by(AGENTS).cloned().collect();
        tasks.spawn(drive(agent, mine, stopped.clone(), calls.clone()));
    }
    let answered = || calls.lock().unwrap().ok;
    let warmed = wait_until(DEADLINE, || async { answered() >= 20 }).await;
    assert!(warmed, "calls answered before the restart");

    // The rolling restart: one replica at a time, back on its port.
    for replica in &mut replicas {
        terminate(replica).await;
        cluster.start(replica).await;
        if !wait_until(DEADLINE, all_online).await {
            panic!(
                "every browser back after {}; nginx's error log:\n{}",
                replica.name,
                nginx.error_log()
            );
        }
        let before = answered();
        assert!(
            wait_until(DEADLINE, || async { answered() >= before + 20 }).await,
            "calls answered after {} came back",
            replica.name
        );
    }
    stop.send(true).expect("stop");
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    // Every replica drains, so every audit row it owes is written.
    for replica in &mut replicas {
        terminate(replica).await;
    }

    let calls = std::mem::take(&mut *calls.lock().unwrap());
    let browsers = std::mem::take(&mut *browsers.lock().unwrap());
    eprintln!(
        "rolling restart: {} calls answered, retried {:?}, {} sessions; browser closes {:?}, \
         longest away {:?}, {} renewals",
        calls.ok,
        calls.retried,
        calls.started.len(),
        browsers.closes,
        browsers.longest_away,
        browsers.renewals
    );
    assert!(calls.failed.is_empty(), "failed calls: {:?}", calls.failed);
    // Every browser's socket was on some replica, and every close a restart.
    assert!(
        browsers.closes.keys().all(|c| c == "1012"),
        "{:?}",
        browsers.closes
    );
    assert!(browsers.closes.get("1012").is_some_and(|n| *n >= DEVICES));
    assert_eq!(browsers.renewals, DEVICES, "every device renewed once");

    // Nothing lost: the rows behind what the agents and browsers were told.
    let pool = sqlx::PgPool::connect(&cluster.db.url).await.expect("pool");
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            let (n,): (i64,) = sqlx::query_as(sql).fetch_one(&pool).await.expect(sql);
            usize::try_from(n).expect("count")
        }
    };
    let call_rows =
        count("SELECT count(*) FROM audit_event WHERE action = 'session.call' AND outcome = 'ok'")
            .await;
    assert!(
        call_rows >= calls.ok,
        "{call_rows} call rows for {} answered calls",
        calls.ok
    );
    // A handshake is answered only after its connect row's commit returned.
    let connect_rows =
        count("SELECT count(*) FROM audit_event WHERE action = 'device.connect'").await;
    assert!(
        connect_rows >= browsers.connections,
        "{connect_rows} connect rows for {} handshakes",
        browsers.connections
    );
    let renew_rows = count("SELECT count(*) FROM audit_event WHERE action = 'device.renew'").await;
    assert_eq!(renew_rows, DEVICES, "one row per renewal");
    let started: Vec<(String,)> =
        sqlx::query_as("SELECT target FROM audit_event WHERE action = 'session.start'")
            .fetch_all(&pool)
            .await
            .expect("session rows");
    let started: std::collections::HashSet<String> = started.into_iter().map(|(t,)| t).collect();
    for id in &calls.started {
        assert!(
            started.contains(&format!("session:{id}")),
            "no start row for {id}"
        );
    }
    pool.close().await;
    let verified = std::process::Command::new(env!("CARGO_BIN_EXE_latchkeyd"))
        .args(["--database-url", &cluster.db.url, "audit", "verify"])
        .output()
        .expect("audit verify");
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
    nginx.stop().await;
    cluster.db.drop_database().await;
}
