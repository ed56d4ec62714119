//! Connections in setup: 1,000 that never send a ClientHello and 1,000 that
//! dribble their headers are all closed by the setup timeout while a real client is
//! served; at the cap of connections in setup, a burst of real clients waits its
//! turn, and connections that stay silent are pushed out by newer ones so a new
//! client still gets in; one address holding 3,000 connections cannot keep a
//! client from another address waiting (docs/security.md, "Limits").

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use latchkey_testkit::hostile::dribble_headers;
use latchkey_testkit::{Backend, TestServer, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOLD: usize = 1_000;
const DEADLINE: Duration = Duration::from_secs(30);

/// Open `n` connections that send nothing; each task counts itself closed when the
/// server ends the connection.
async fn stallers(
    addr: std::net::SocketAddr,
    n: usize,
    closed: Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let closed = closed.clone();
        tasks.push(tokio::spawn(async move {
            let mut buf = [0u8; 64];
            // Whatever arrives (a TLS alert, an HTTP 408), the end is EOF or a reset.
            while let Ok(Ok(n)) = tokio::time::timeout(DEADLINE, stream.read(&mut buf)).await {
                if n == 0 {
                    break;
                }
            }
            closed.fetch_add(1, Ordering::Relaxed);
        }));
    }
    tasks
}

/// `/healthz` on a new connection each time (a kept-alive one could be closed by
/// the server's idle timeout just as it is reused: this asks whether a new client
/// gets in).
async fn healthz(server: &TestServer) -> u16 {
    server
        .http
        .get(format!("{}/healthz", server.http_base()))
        .header("connection", "close")
        .send()
        .await
        .expect("healthz")
        .status()
        .as_u16()
}

/// A real client is served while the `HOLD` hostile connections are held; all of
/// them are then closed by the server, and it is healthy after.
async fn served_while_all_close(
    server: TestServer,
    closed: &AtomicUsize,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    what: &str,
) {
    assert_eq!(
        healthz(&server).await,
        200,
        "a real client is served meanwhile"
    );
    assert!(
        wait_until(DEADLINE, || async {
            closed.load(Ordering::Relaxed) == HOLD
        })
        .await,
        "only {} of {HOLD} {what} connections were closed",
        closed.load(Ordering::Relaxed)
    );
    for t in tasks {
        t.await.expect("hostile connection task");
    }
    assert_eq!(healthz(&server).await, 200, "healthy after");
    server.stop().await;
}

/// A server whose setup timeout (1 s) is the only thing that closes hostile
/// connections: the setup cap, in all and per address, is far above what the tests
/// hold.
async fn short_setup_server(tls: bool) -> TestServer {
    TestServer::builder(Backend::Sqlite)
        .tls(tls)
        .limits(|l| {
            l.setup_timeout_ms = 1_000;
            l.max_connections_in_setup = 4 * HOLD;
            l.max_connections_in_setup_per_peer = 4 * HOLD;
        })
        .start()
        .await
        .expect("server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_time_out_while_a_client_is_served() {
    let server = short_setup_server(true).await;
    let closed = Arc::new(AtomicUsize::new(0));
    let tasks = stallers(server.addr(), HOLD, closed.clone()).await;
    served_while_all_close(server, &closed, tasks, "silent").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dribbled_headers_time_out_while_a_client_is_served() {
    let server = short_setup_server(false).await;
    let closed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(HOLD);
    for _ in 0..HOLD {
        let task = dribble_headers(server.addr(), closed.clone(), DEADLINE).await;
        tasks.push(task.expect("dribbler"));
    }
    served_while_all_close(server, &closed, tasks, "dribbling").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_setup_cap_silent_connections_are_pushed_out() {
    let cap = 64;
    let hold = 300;
    let server = TestServer::builder(Backend::Sqlite)
        .tls(true)
        .limits(|l| {
            // Long enough that only eviction can close them during the test.
            l.setup_timeout_ms = 120_000;
            l.max_connections_in_setup = cap;
            // One address may hold every place here: the cap as a whole is tested.
            l.max_connections_in_setup_per_peer = cap;
        })
        .start()
        .await
        .expect("server");
    let closed = Arc::new(AtomicUsize::new(0));
    let tasks = stallers(server.addr(), hold, closed.clone()).await;
    assert!(
        wait_until(DEADLINE, || async {
            closed.load(Ordering::Relaxed) == hold - cap
        })
        .await,
        "{} of {hold} silent connections were dropped, expected all but the newest {cap}",
        closed.load(Ordering::Relaxed)
    );
    // A real client still gets in (it pushes out one more staller). The staller
    // learns of its close only when its task reads the end of stream, which can
    // come after the client's answer: wait for it.
    assert_eq!(healthz(&server).await, 200);
    assert!(
        wait_until(DEADLINE, || async {
            closed.load(Ordering::Relaxed) > hold - cap
        })
        .await,
        "the real client got in without pushing out a staller"
    );
    server.stop().await;
    for t in tasks {
        t.await.expect("staller task");
    }
    assert_eq!(closed.load(Ordering::Relaxed), hold);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_real_clients_waits_its_turn_at_the_cap() {
    let server = TestServer::builder(Backend::Sqlite)
        .limits(|l| l.max_connections_in_setup = 4)
        .start()
        .await
        .expect("server");
    // Each request on its own connection, all at once: far more than the cap.
    let requests: Vec<_> = (0..200)
        .map(|_| {
            let addr = server.addr();
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(addr).await?;
                stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await?;
                let mut answer = Vec::new();
                tokio::time::timeout(DEADLINE, stream.read_to_end(&mut answer))
                    .await
                    .map_err(std::io::Error::other)??;
                Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
            })
        })
        .collect();
    for r in requests {
        let answer = r.await.expect("task").expect("served");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    server.stop().await;
}

/// The outside review's flood: one address holds 3,000 silent TCP connections,
/// opening a new one a second after each of its connections ends. A client from
/// another address is served at once. Before places were shared per address, it
/// waited in the kernel's backlog behind the flood while the connections ahead were
/// pushed out 64 a second (15 to 22 s measured; the request's 10 s limit here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_keep_another_waiting() {
    const FLOOD: usize = 3_000;
    let server = TestServer::builder(Backend::Sqlite)
        .tls(true)
        .limits(|l| {
            // Only push-outs and drops free places while the flood holds.
            l.setup_timeout_ms = 120_000;
        })
        .start()
        .await
        .expect("server");
    let flooder: std::net::IpAddr = "127.0.0.20".parse().expect("ip");
    let stop = tokio_util::sync::CancellationToken::new();
    let opened = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let (addr, stop, opened) = (server.addr(), stop.clone(), opened.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let Ok(mut stream) = silent_from(flooder, addr).await else {
                    break;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                let mut buf = [0u8; 64];
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = async { while let Ok(n) = stream.read(&mut buf).await { if n == 0 { break } } } => {}
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }));
    }
    assert!(
        wait_until(DEADLINE, || async {
            opened.load(Ordering::Relaxed) >= FLOOD
        })
        .await,
        "the flood opened {} connections",
        opened.load(Ordering::Relaxed)
    );
    let client = latchkey_testkit::http_builder()
        .local_address(Some("127.0.0.21".parse().expect("ip")))
        .tls_certs_only([latchkey_testkit::reqwest::Certificate::from_pem(
            server.ca_pem().expect("a TLS server").as_bytes(),
        )
        .expect("ca")])
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let started = std::time::Instant::now();
    let status = client
        .get(format!("{}/healthz", server.http_base()))
        .header("connection", "close")
        .send()
        .await
        .expect("served while the flood holds its connections")
        .status();
    let waited = started.elapsed();
    assert_eq!(status.as_u16(), 200);
    eprintln!("served in {waited:?} with the flood holding its connections");
    let held = server.metrics().await.expect("metrics");
    let dropped = held
        .iter()
        .filter(|(k, _)| k.starts_with("latchkey_setup_dropped_total"))
        .map(|(_, v)| *v)
        .sum::<f64>();
    assert!(
        dropped > 0.0,
        "the flood beyond its address's share was dropped"
    );
    stop.cancel();
    for t in tasks {
        t.await.expect("flood task");
    }
    server.stop().await;
}

/// A TCP connection from `local` that sends nothing.
async fn silent_from(
    local: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::new(local, 0))?;
    socket.connect(to).await
}
