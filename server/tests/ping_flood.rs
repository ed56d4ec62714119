//! A peer that sends Pings and never reads the Pongs (docs/security.md, "Memory a
//! peer can make the gateway hold"): what the gateway queues for it by itself is
//! bounded, and the stall timeout closes it. An outside review sent 400,000 Pings of
//! 125 bytes on an agent socket without reading: the gateway grew by 42 MB and the
//! socket was still open 12 s later despite the 10 s stall timeout. Measured on the
//! real binary, for an agent socket and a device socket.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latchkey_protocol::methods::AUTH_SUBPROTOCOL_PREFIX;
use latchkey_testkit::extension::{TEST_EXTENSION_ORIGIN, handshake_params};
use latchkey_testkit::{Daemon, FakeExtension, raw_ws};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const PINGS: usize = 400_000;
/// The stall timeout of the daemon under test.
const STALL_MS: u64 = 2_000;
/// How long the flood may go on before the test gives up on the gateway.
const DEADLINE: Duration = Duration::from_secs(30);

async fn daemon(dir: &Path) -> Daemon {
    let mut command = Daemon::serve_command(
        Path::new(env!("CARGO_BIN_EXE_latchkeyd")),
        dir,
        &format!("write_stall_timeout_ms = {STALL_MS}"),
    )
    .expect("command");
    command.env("LATCHKEY_LOG", "warn");
    Daemon::spawn(command, std::process::Stdio::null())
        .await
        .expect("latchkeyd")
}

/// Flood `stream` with Pings, never reading. Returns whether the gateway ended the
/// connection (a write failed) before the deadline, and the daemon's highest RSS
/// growth over `baseline_kib` seen meanwhile.
async fn flood(mut stream: TcpStream, daemon: &Daemon, baseline_kib: u64) -> (bool, u64) {
    let peak = Arc::new(AtomicU64::new(baseline_kib));
    let pid = daemon.child.id().expect("pid");
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                if let Some(rss) = rss_kib(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let batch: Vec<u8> = (0..1_000)
        .flat_map(|_| raw_ws::ping(&[0x5a; 125]))
        .collect();
    let closed = tokio::time::timeout(DEADLINE, async {
        for _ in 0..PINGS / 1_000 {
            if stream.write_all(&batch).await.is_err() {
                return true;
            }
        }
        // Every Ping went out: the gateway must still end the connection, the
        // next write fails once it has.
        loop {
            if stream.write_all(&batch).await.is_err() {
                return true;
            }
        }
    })
    .await
    .unwrap_or(false);
    sampler.abort();
    (
        closed,
        peak.load(Ordering::Relaxed).saturating_sub(baseline_kib),
    )
}

/// Flood `stream` from here on, and check that the gateway closed it and stayed
/// within its bound meanwhile.
async fn flooded(what: &str, stream: TcpStream, daemon: &Daemon) {
    let baseline = daemon.rss_kib_and_fds().expect("rss").0;
    let (closed, growth) = flood(stream, daemon, baseline).await;
    eprintln!("{what}: closed {closed}, RSS grew by at most {growth} KiB");
    assert!(
        closed,
        "{what}: still open {} s into the flood",
        DEADLINE.as_secs()
    );
    assert!(
        growth < GROWTH_LIMIT_KIB,
        "{what}: the gateway grew by {growth} KiB"
    );
}

fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the gateway may grow by for one peer that reads nothing: far below the
/// 42 MB the review saw, and below the write buffer's own cap (16 MiB + 64 KiB),
/// so it is the read side stopping that bounds it.
const GROWTH_LIMIT_KIB: u64 = 12 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_socket_flooding_pings_is_closed_and_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(dir.path()).await;
    let token = daemon.bootstrap_token.clone().expect("admin token");
    let auth = format!("Bearer {token}");
    // Warm up the paths the flood takes, then take the baseline.
    drop(
        raw_ws::upgrade(&daemon.addr, "/v1/agent", &[("Authorization", &auth)])
            .await
            .expect("upgrade"),
    );
    let stream = raw_ws::upgrade(&daemon.addr, "/v1/agent", &[("Authorization", &auth)])
        .await
        .expect("upgrade");
    flooded("agent socket", stream, &daemon).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_socket_flooding_pings_is_closed_and_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(dir.path()).await;
    let http = latchkey_testkit::http_client();
    let pairing = daemon
        .admin(&http)
        .expect("admin")
        .create_pairing(None, None)
        .await
        .expect("pairing");
    let mut ext = FakeExtension::from_link(&pairing.link, http, None).expect("extension");
    ext.pair().await.expect("pair");
    let protocol = format!(
        "{AUTH_SUBPROTOCOL_PREFIX}{}",
        ext.token.clone().expect("token")
    );
    let headers = [
        ("Origin", TEST_EXTENSION_ORIGIN),
        ("Sec-WebSocket-Protocol", protocol.as_str()),
    ];
    let mut stream = raw_ws::upgrade(&daemon.addr, "/extension", &headers)
        .await
        .expect("upgrade");
    let handshake = serde_json::json!({
        "id": "hs-1",
        "method": "system.handshake",
        "params": handshake_params(),
    });
    stream
        .write_all(&raw_ws::text(&handshake.to_string()))
        .await
        .expect("handshake");
    flooded("device socket", stream, &daemon).await;
}
