//! Simulated extensions: each pairs through the real endpoints (testkit's
//! `FakeExtension`), connects from a 127.x.y.z address of its own so that ten
//! thousand connections never run out of ports, answers tool calls with a result of
//! configurable size after a configurable delay, heartbeats on command, and on
//! command drops its socket and dials again (a reconnect storm).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use futures_util::stream::{self, StreamExt, TryStreamExt};
use latchkey_protocol::Frame;
use latchkey_testkit::{ExtensionSocket, FakeExtension};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

use crate::target::Latchkeyd;

/// How a simulated device answers.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Bytes of `result.data` in every tool answer.
    pub result_bytes: usize,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Offer the auth subprotocol and complete the `system.handshake` after
    /// connecting (latchkeyd; not the relay).
    pub handshake: bool,
}

/// What the generator tells every device at once.
#[derive(Debug, Clone, Default)]
struct Control {
    /// Bumped to make every device drop its socket and dial again.
    generation: u64,
    /// Each device waits a random time up to this before dialling again.
    jitter: Duration,
    /// Send `system.heartbeat` this often (None: quiet).
    heartbeat: Option<Duration>,
    stop: bool,
}

/// Something a device reports to the generator.
#[derive(Debug)]
pub enum Report {
    /// Device `device` connected (and handshaken) at this instant, in this
    /// generation of [`Fleet::reconnect_all`].
    Online {
        device: usize,
        generation: u64,
        at: Instant,
    },
    /// The upgrade was refused with this status (and `Retry-After`, if any).
    Refused {
        status: u16,
        retry_after: Option<u64>,
    },
    /// Anything else that went wrong with an attempt.
    Failed(String),
}

/// The address device `i` dials from: 127.1.0.10 upwards, 200 per /24.
pub fn source_addr(i: usize) -> std::net::IpAddr {
    let third = u8::try_from(i / 200 % 250).unwrap_or(0);
    let fourth = u8::try_from(i % 200 + 10).unwrap_or(10);
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 1, third, fourth))
}

/// Attempts per (re)connection before a device gives up.
const MAX_ATTEMPTS: u32 = 40;

/// Devices of one fleet dialling at once (TCP, TLS, upgrade and handshake). Ten
/// thousand real devices are ten thousand machines, each sending its ClientHello
/// the moment its connection is up; ten thousand dials from this one process,
/// sharing two cores with the server, left sockets the kernel had connected
/// silent for over a second while the generator worked through the rest, and a
/// server cannot tell such a socket from a silent flood (load-tests/notes.md). The
/// gate keeps the generator's own dials prompt; the server still has far more
/// connections waiting than it takes into setup at once (64).
pub const DIALS_IN_FLIGHT: usize = 512;

pub struct Fleet {
    control: watch::Sender<Control>,
    online: Arc<AtomicUsize>,
    heartbeats: Arc<AtomicU64>,
    reports: mpsc::UnboundedReceiver<Report>,
    tasks: JoinSet<()>,
    pub size: usize,
}

/// Attempts at pairing one extension: the store answers 503 + `Retry-After` when
/// its writer is busy, and the generator then waits and tries again, as an admin
/// and an extension would.
const PAIR_ATTEMPTS: u32 = 20;

/// Pairing retries so far (reported once on stderr, then only counted).
static PAIR_RETRIES: AtomicU64 = AtomicU64::new(0);

/// Pairings retried after a refusal since the process started.
pub fn pair_retries() -> u64 {
    PAIR_RETRIES.load(Ordering::Relaxed)
}

/// Pair `n` extensions with latchkeyd, `concurrency` at a time.
pub async fn pair(
    server: &Latchkeyd,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<FakeExtension>> {
    stream::iter(0..n)
        .map(|i| async move {
            let mut attempt = 1;
            let mut ext = loop {
                match server.paired_extension().await {
                    Ok(ext) => break ext,
                    Err(e) if attempt < PAIR_ATTEMPTS => {
                        attempt += 1;
                        if PAIR_RETRIES.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("pairing retried ({e:#}); further retries not shown");
                        }
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    Err(e) => return Err(e.context(format!("pairing device {i}"))),
                }
            };
            ext.local_addr = Some(source_addr(i));
            anyhow::Ok(ext)
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await
}

impl Fleet {
    /// Start one task per extension; each dials at once. Wait with [`Fleet::wait_online`].
    pub fn launch(extensions: Vec<FakeExtension>, behaviour: Behaviour) -> Fleet {
        let (control, control_rx) = watch::channel(Control::default());
        let (report_tx, reports) = mpsc::unbounded_channel();
        let online = Arc::new(AtomicUsize::new(0));
        let heartbeats = Arc::new(AtomicU64::new(0));
        let behaviour = Arc::new(behaviour);
        let payload: Arc<str> = "x".repeat(behaviour.result_bytes).into();
        let size = extensions.len();
        let mut tasks = JoinSet::new();
        let dials = Arc::new(Semaphore::new(DIALS_IN_FLIGHT));
        for (index, ext) in extensions.into_iter().enumerate() {
            let device = Device {
                index,
                ext,
                behaviour: behaviour.clone(),
                payload: payload.clone(),
                control: control_rx.clone(),
                reports: report_tx.clone(),
                online: online.clone(),
                heartbeats: heartbeats.clone(),
                dials: dials.clone(),
            };
            tasks.spawn(device.run());
        }
        Fleet {
            control,
            online,
            heartbeats,
            reports,
            tasks,
            size,
        }
    }

    pub fn online(&self) -> usize {
        self.online.load(Ordering::Relaxed)
    }

    pub fn heartbeats_sent(&self) -> u64 {
        self.heartbeats.load(Ordering::Relaxed)
    }

    /// Wait until `count` devices are online; every report meanwhile is returned.
    /// Fails if the deadline passes first.
    pub async fn wait_online(
        &mut self,
        count: usize,
        deadline: Duration,
    ) -> anyhow::Result<Vec<Report>> {
        let mut seen = Vec::new();
        let until = tokio::time::Instant::now() + deadline;
        while self.online() < count {
            match tokio::time::timeout_at(until, self.reports.recv()).await {
                Ok(Some(r)) => seen.push(r),
                Ok(None) => anyhow::bail!("every device task has ended"),
                Err(_) => anyhow::bail!(
                    "only {} of {count} devices online after {deadline:?}; last reports: {:?}",
                    self.online(),
                    seen.iter().rev().take(3).collect::<Vec<_>>()
                ),
            }
        }
        while let Ok(r) = self.reports.try_recv() {
            seen.push(r);
        }
        Ok(seen)
    }

    /// Drop the reports received so far.
    pub fn clear_reports(&mut self) {
        while self.reports.try_recv().is_ok() {}
    }

    /// Wait until every device has reported online in the current generation;
    /// every report meanwhile is returned. Fails if the deadline passes first.
    pub async fn all_back(&mut self, deadline: Duration) -> anyhow::Result<Vec<Report>> {
        let generation = self.control.borrow().generation;
        let mut back = vec![false; self.size];
        let mut missing = self.size;
        let mut seen = Vec::new();
        let until = tokio::time::Instant::now() + deadline;
        while missing > 0 {
            match tokio::time::timeout_at(until, self.reports.recv()).await {
                Ok(Some(r)) => {
                    if let Report::Online {
                        device,
                        generation: g,
                        ..
                    } = &r
                        && *g == generation
                        && let Some(slot) = back.get_mut(*device)
                        && !*slot
                    {
                        *slot = true;
                        missing -= 1;
                    }
                    seen.push(r);
                }
                Ok(None) => anyhow::bail!("every device task has ended"),
                Err(_) => {
                    let first = back.iter().position(|b| !b);
                    let last = seen
                        .iter()
                        .rev()
                        .find(|r| !matches!(r, Report::Online { .. }));
                    anyhow::bail!(
                        "{missing} of {} devices not back after {deadline:?} (first: #{first:?}; last problem: {last:?})",
                        self.size
                    )
                }
            }
        }
        Ok(seen)
    }

    /// Heartbeat every `every` from now on (None: stop).
    pub fn set_heartbeat(&self, every: Option<Duration>) {
        self.control.send_modify(|c| c.heartbeat = every);
    }

    /// Every device drops its socket at once and dials again after up to `jitter`.
    pub fn reconnect_all(&self, jitter: Duration) {
        self.control.send_modify(|c| {
            c.generation += 1;
            c.jitter = jitter;
        });
    }

    /// Stop every device and wait for their tasks.
    pub async fn stop(mut self) {
        self.control.send_modify(|c| c.stop = true);
        while self.tasks.join_next().await.is_some() {}
    }
}

struct Device {
    index: usize,
    ext: FakeExtension,
    behaviour: Arc<Behaviour>,
    payload: Arc<str>,
    control: watch::Receiver<Control>,
    reports: mpsc::UnboundedSender<Report>,
    online: Arc<AtomicUsize>,
    heartbeats: Arc<AtomicU64>,
    /// Held from the dial until the device is online or the attempt failed.
    dials: Arc<Semaphore>,
}

/// Why a served socket stopped being served.
enum Next {
    Reconnect(Duration),
    Lost,
    Stop,
}

impl Device {
    async fn run(mut self) {
        loop {
            let Some(socket) = self.connect().await else {
                return;
            };
            self.online.fetch_add(1, Ordering::Relaxed);
            let generation = self.control.borrow_and_update().generation;
            let _ = self.reports.send(Report::Online {
                device: self.index,
                generation,
                at: Instant::now(),
            });
            let next = self.serve(socket, generation).await;
            self.online.fetch_sub(1, Ordering::Relaxed);
            match next {
                Next::Stop => return,
                Next::Lost => tokio::time::sleep(Duration::from_millis(200)).await,
                Next::Reconnect(jitter) => {
                    if !jitter.is_zero() {
                        let wait = rand::random_range(0..jitter.as_millis().max(1) as u64);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                }
            }
        }
    }

    /// Dial until online, honouring `Retry-After`; None after MAX_ATTEMPTS or on stop.
    async fn connect(&mut self) -> Option<ExtensionSocket> {
        for attempt in 0..MAX_ATTEMPTS {
            if self.control.borrow().stop {
                return None;
            }
            let backoff = Duration::from_millis(100 << attempt.min(5));
            let Ok(permit) = self.dials.clone().acquire_owned().await else {
                return None;
            };
            let mut dialling = Some(permit);
            // The relay speaks no subprotocol; latchkeyd gets the real extension's offer.
            let attempt = if self.behaviour.handshake {
                self.ext.connect().await
            } else {
                let origin = self.ext.origin.clone();
                self.ext
                    .connect_with(&[("origin", origin.as_str())], None)
                    .await
            };
            match attempt {
                Ok(Ok(mut socket)) => {
                    if !self.behaviour.handshake {
                        return Some(socket);
                    }
                    match socket.handshake().await {
                        Ok(_) => return Some(socket),
                        Err(e) => {
                            let _ = self.reports.send(Report::Failed(format!("handshake: {e}")));
                        }
                    }
                }
                Ok(Err(answer)) => {
                    dialling = None;
                    let retry_after = answer
                        .headers
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    let _ = self.reports.send(Report::Refused {
                        status: answer.status,
                        retry_after,
                    });
                    if let Some(secs) = retry_after {
                        tokio::time::sleep(Duration::from_secs(secs.min(30))).await;
                        continue;
                    }
                }
                Err(e) => {
                    let _ = self.reports.send(Report::Failed(format!("connect: {e:#}")));
                }
            }
            drop(dialling);
            tokio::time::sleep(backoff).await;
        }
        None
    }

    async fn serve(&mut self, socket: ExtensionSocket, generation: u64) -> Next {
        let (mut sink, mut stream) = socket.ws.split();
        let (delayed_tx, mut delayed) = mpsc::unbounded_channel::<String>();
        let mut heartbeat_every = self.control.borrow().heartbeat;
        let mut heartbeat =
            tokio::time::interval(heartbeat_every.unwrap_or(Duration::from_secs(3600)));
        heartbeat.reset();
        loop {
            tokio::select! {
                changed = self.control.changed() => {
                    if changed.is_err() {
                        return Next::Stop;
                    }
                    let c = self.control.borrow_and_update().clone();
                    if c.stop {
                        return Next::Stop;
                    }
                    if c.generation != generation {
                        return Next::Reconnect(c.jitter);
                    }
                    if c.heartbeat != heartbeat_every {
                        heartbeat_every = c.heartbeat;
                        heartbeat = tokio::time::interval(heartbeat_every.unwrap_or(Duration::from_secs(3600)));
                        // Spread the fleet's heartbeats over the interval.
                        let offset = rand::random_range(0..heartbeat.period().as_millis().max(1) as u64);
                        heartbeat.reset_after(Duration::from_millis(offset));
                    }
                }
                _ = heartbeat.tick(), if heartbeat_every.is_some() => {
                    if sink.send(Message::text(r#"{"event":"system.heartbeat","payload":{}}"#)).await.is_err() {
                        return Next::Lost;
                    }
                    self.heartbeats.fetch_add(1, Ordering::Relaxed);
                }
                Some(text) = delayed.recv() => {
                    if sink.send(Message::text(text)).await.is_err() {
                        return Next::Lost;
                    }
                }
                msg = stream.next() => {
                    let text = match msg {
                        Some(Ok(Message::Text(t))) => t,
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Next::Lost,
                        Some(Ok(_)) => continue,
                    };
                    let Some(answer) = self.answer(text.as_str()) else {
                        continue;
                    };
                    if self.behaviour.delay.is_zero() {
                        if sink.send(Message::text(answer)).await.is_err() {
                            return Next::Lost;
                        }
                    } else {
                        let tx = delayed_tx.clone();
                        let delay = self.behaviour.delay;
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            let _ = tx.send(answer);
                        });
                    }
                }
            }
        }
    }

    /// The answer to one request frame, as the extension would give it.
    fn answer(&self, text: &str) -> Option<String> {
        let Ok(Frame::Request(request)) = Frame::parse(text) else {
            return None;
        };
        let id = serde_json::to_string(&request.id).ok()?;
        let result = match request.method.as_str() {
            "tool.session_start" => {
                format!(
                    r#"{{"agent_window_id":{}}}"#,
                    rand::random_range(1..1_000_000)
                )
            }
            "tool.session_stop" => "{}".to_string(),
            "cancel" => r#"{"cancelled":false}"#.to_string(),
            _ => format!(r#"{{"data":"{}"}}"#, self.payload),
        };
        Some(format!(r#"{{"id":{id},"result":{result}}}"#))
    }
}
