//! Simulated agents on envelope sockets (latchkeyd's `/v1/agent` or the bare
//! relay's agent port): closed-loop (a fixed number of calls in flight per socket)
//! and open-loop (calls sent at a fixed rate whatever the answers do, so that a
//! stalled server cannot slow the generator down and hide its own queueing).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{SinkExt, StreamExt};
use latchkey_protocol::Frame;
use serde_json::json;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The longest the generator waits for any one answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(10);

/// One agent socket and the sessions its calls name (empty on the relay). A
/// session runs one command at a time (a second is refused `session_busy`), so
/// call `k` in flight on a socket names session `k` of its list.
pub struct AgentSocket {
    pub ws: Ws,
    pub sessions: Vec<String>,
}

impl AgentSocket {
    fn session(&self, slot: usize) -> Option<&str> {
        if self.sessions.is_empty() {
            None
        } else {
            self.sessions
                .get(slot % self.sessions.len())
                .map(String::as_str)
        }
    }
}

/// Open an envelope socket; `bearer` for latchkeyd.
pub async fn connect(
    url: &str,
    bearer: Option<&str>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> anyhow::Result<Ws> {
    let mut req = url.into_client_request()?;
    if let Some(token) = bearer {
        req.headers_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
    }
    let config = WebSocketConfig::default().max_message_size(Some(64 << 20));
    let (ws, _) = tokio_tungstenite::connect_async_tls_with_config(
        req,
        Some(config),
        true,
        tls.map(Connector::Rustls),
    )
    .await
    .with_context(|| format!("agent socket {url}"))?;
    Ok(ws)
}

/// What one loop measured.
#[derive(Debug, Default)]
pub struct LoopResult {
    pub calls: u64,
    pub errors: u64,
    /// The first error answer, verbatim.
    pub first_error: Option<String>,
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
}

impl LoopResult {
    fn merge(&mut self, other: LoopResult) {
        self.calls += other.calls;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.latencies.extend(other.latencies);
    }

    /// Add a later run of the same loop: its calls and its time.
    pub fn then(&mut self, other: LoopResult) {
        self.elapsed += other.elapsed;
        self.merge(other);
    }

    pub fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Run every loop (a socket's, a client's) and add their results up.
pub async fn total(
    runs: impl IntoIterator<Item = impl std::future::Future<Output = anyhow::Result<LoopResult>>>,
    start: Instant,
) -> anyhow::Result<LoopResult> {
    let mut total = LoopResult::default();
    for r in futures_util::future::try_join_all(runs).await? {
        total.merge(r);
    }
    total.elapsed = start.elapsed();
    Ok(total)
}

/// What every call of a run asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// `tool.echo`: a method the catalogue does not know, so no params rules and
    /// no policy apply. The plain relay path.
    #[default]
    Echo,
    /// `tool.navigate` to [`crate::policed::URL`]: the catalogue's params rules
    /// and, with a policy set, its capability and site checks, on every call.
    Navigate,
}

/// One call of `kind` with `pad` bytes of padding in its params.
pub fn call_frame(id: &str, session: Option<&str>, pad: &str, kind: CallKind) -> String {
    let mut params = json!({ "pad": pad });
    let method = match kind {
        CallKind::Echo => "tool.echo",
        CallKind::Navigate => {
            params["url"] = json!(crate::policed::URL);
            "tool.navigate"
        }
    };
    if let Some(s) = session {
        params["session_id"] = json!(s);
    }
    json!({ "id": id, "method": method, "params": params }).to_string()
}

/// The id an answer frame is for, and whether it succeeded.
fn answer_of(text: &str) -> Option<(String, bool)> {
    match Frame::parse(text).ok()? {
        Frame::Success(s) => Some((s.id, true)),
        Frame::Error(e) => Some((e.id, false)),
        _ => None,
    }
}

impl LoopResult {
    fn record(&mut self, latency: Duration, ok: bool, text: &str) {
        self.latencies.push(latency);
        self.calls += 1;
        if !ok {
            self.errors += 1;
            if self.first_error.is_none() {
                self.first_error = Some(text.chars().take(300).collect());
            }
        }
    }
}

/// Keep `in_flight` calls outstanding on every socket for `duration`, then let the
/// last ones land.
pub async fn closed_loop(
    sockets: &mut [AgentSocket],
    in_flight: usize,
    duration: Duration,
    pad_bytes: usize,
    kind: CallKind,
) -> anyhow::Result<LoopResult> {
    let pad: Arc<str> = "x".repeat(pad_bytes).into();
    let start = Instant::now();
    let end = start + duration;
    let runs = sockets.iter_mut().enumerate().map(|(n, socket)| {
        let pad = pad.clone();
        async move {
            let mut result = LoopResult::default();
            // id → (slot, sent at)
            let mut pending: HashMap<String, (usize, Instant)> = HashMap::new();
            let mut next_id = 0u64;
            let frame_for = |slot: usize,
                             next_id: &mut u64,
                             pending: &mut HashMap<String, (usize, Instant)>,
                             socket: &AgentSocket| {
                *next_id += 1;
                let id = format!("s{n}c{next_id}");
                let frame = call_frame(&id, socket.session(slot), &pad, kind);
                pending.insert(id, (slot, Instant::now()));
                frame
            };
            for slot in 0..in_flight {
                let frame = frame_for(slot, &mut next_id, &mut pending, socket);
                socket.ws.send(Message::text(frame)).await?;
            }
            while !pending.is_empty() {
                let msg = tokio::time::timeout(ANSWER_DEADLINE, socket.ws.next())
                    .await
                    .context("no answer within the deadline")?
                    .context("agent socket ended")??;
                let Message::Text(text) = msg else { continue };
                let Some((id, ok)) = answer_of(text.as_str()) else {
                    continue;
                };
                let Some((slot, sent)) = pending.remove(&id) else {
                    continue;
                };
                result.record(sent.elapsed(), ok, text.as_str());
                if Instant::now() < end {
                    let frame = frame_for(slot, &mut next_id, &mut pending, socket);
                    socket.ws.send(Message::text(frame)).await?;
                }
            }
            anyhow::Ok(result)
        }
    });
    total(runs, start).await
}

/// Send `rate` calls per second in all, spread evenly over the sockets, for
/// `duration`, without waiting for answers.
pub async fn open_loop(
    sockets: Vec<AgentSocket>,
    rate: u64,
    duration: Duration,
    pad_bytes: usize,
    kind: CallKind,
) -> anyhow::Result<LoopResult> {
    let pad: Arc<str> = "x".repeat(pad_bytes).into();
    let per_socket = (rate as f64 / sockets.len().max(1) as f64).max(0.001);
    let period = Duration::from_secs_f64(1.0 / per_socket);
    let count = (duration.as_secs_f64() * per_socket).ceil() as u64;
    let start = Instant::now();
    let runs = sockets.into_iter().enumerate().map(|(n, socket)| {
        let pad = pad.clone();
        async move {
            // Open loop sends without waiting, so each call needs a session of its
            // own free: the sessions are used in turn and must outnumber the calls
            // in flight.
            let sessions = socket.sessions.clone();
            let (mut sink, mut stream) = socket.ws.split();
            let scheduled: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
            let writer = {
                let scheduled = scheduled.clone();
                async move {
                    let first = tokio::time::Instant::now();
                    for i in 0..count {
                        tokio::time::sleep_until(first + period.mul_f64(i as f64)).await;
                        let id = format!("o{n}c{i}");
                        let session = (!sessions.is_empty())
                            .then(|| sessions.get(i as usize % sessions.len()))
                            .flatten();
                        let frame = call_frame(&id, session.map(String::as_str), &pad, kind);
                        // Timed from the send itself (the timer wakes up to a
                        // millisecond late); the writer never waits for answers, so
                        // a slow server still shows up as latency.
                        scheduled
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(id, Instant::now());
                        sink.send(Message::text(frame)).await?;
                    }
                    anyhow::Ok(())
                }
            };
            let reader = async {
                let mut result = LoopResult::default();
                while result.calls < count {
                    let msg = tokio::time::timeout(ANSWER_DEADLINE, stream.next())
                        .await
                        .context("no answer within the deadline")?
                        .context("agent socket ended")??;
                    let Message::Text(text) = msg else { continue };
                    let Some((id, ok)) = answer_of(text.as_str()) else {
                        continue;
                    };
                    let Some(at) = scheduled
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&id)
                    else {
                        continue;
                    };
                    result.record(at.elapsed(), ok, text.as_str());
                }
                anyhow::Ok(result)
            };
            let ((), result) = tokio::try_join!(writer, reader)?;
            anyhow::Ok(result)
        }
    });
    total(runs, start).await
}
