//! Prometheus metrics (the `metrics` facade with the Prometheus exporter), served on a
//! separate listener (`--metrics-listen`, loopback by default). Recording is a few
//! atomic operations and never blocks; rendering happens only when scraped.
//!
//! Labels are bounded: methods outside the protocol's catalogue are counted as `other`,
//! error codes come from the closed `ErrorCode` set.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

pub const DEVICES_CONNECTED: &str = "latchkey_devices_connected";
pub const AGENT_SOCKETS_OPEN: &str = "latchkey_agent_sockets_open";
pub const SESSIONS_OPEN: &str = "latchkey_sessions_open";
pub const CALLS: &str = "latchkey_calls_total";
pub const CALL_DURATION: &str = "latchkey_call_duration_seconds";
pub const FRAMES: &str = "latchkey_frames_total";
pub const BYTES: &str = "latchkey_bytes_total";
pub const AUTHORIZE: &str = "latchkey_authorize_total";
pub const REFUSALS: &str = "latchkey_refusals_total";
pub const REVOCATIONS: &str = "latchkey_revocations_total";
pub const STORE_ERRORS: &str = "latchkey_store_errors_total";
pub const DEVICE_DISCONNECTS: &str = "latchkey_device_disconnects_total";
pub const BUILD_INFO: &str = "latchkey_build_info";
pub const SPANS_DROPPED: &str = "latchkey_spans_dropped_total";
pub const FRAMES_DROPPED: &str = "latchkey_frames_dropped_total";
pub const OUTBOX_FRAMES: &str = "latchkey_outbox_frames";
pub const REVOKE_CLOSE: &str = "latchkey_revoke_close_seconds";
pub const STORE_QUERY: &str = "latchkey_store_query_seconds";
pub const TOKEN_READ_BATCH: &str = "latchkey_token_read_batch_size";
pub const SETUP_EVICTIONS: &str = "latchkey_setup_evictions_total";
pub const TASK_PANICS: &str = "latchkey_task_panics_total";
pub const SETUP_TIMEOUTS: &str = "latchkey_setup_timeouts_total";
pub const SETUP_DROPPED: &str = "latchkey_setup_dropped_total";
pub const CLUSTER_CONNECTED: &str = "latchkey_cluster_connected";
pub const CLUSTER_NOTICES_SENT: &str = "latchkey_cluster_notices_sent_total";
pub const CLUSTER_NOTICES_RECEIVED: &str = "latchkey_cluster_notices_received_total";
pub const CLUSTER_NOTICES_DROPPED: &str = "latchkey_cluster_notices_dropped_total";
pub const MCP_REQUESTS: &str = "latchkey_mcp_requests_total";

/// Buckets for fast operations (store queries, revoke → close), in seconds.
const FAST_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Buckets for the upgrades sharing one grant read: 1 up to `store::TOKEN_BATCH`.
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Buckets for call latency, in seconds: 1 ms … 10 min.
const CALL_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the process-wide recorder once; later calls return the same handle.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(CALL_DURATION.to_string()), CALL_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Full(REVOKE_CLOSE.to_string()), FAST_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Full(STORE_QUERY.to_string()), FAST_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Full(TOKEN_READ_BATCH.to_string()), BATCH_BUCKETS)
                .ok()?
                .install_recorder();
            match recorder {
                Ok(handle) => {
                    describe();
                    spawn_upkeep(handle.clone());
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
            }
        })
        .clone()
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Histogram samples pile up in the recorder until folded into buckets; a render
/// does that, but a server nobody scrapes would grow without bound (measured:
/// 8 bytes per call). A small thread folds them every few seconds instead.
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics upkeep thread not started; scrape /metrics to bound memory");
    }
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        BUILD_INFO,
        "Always 1; the version label says which build runs."
    );
    describe_gauge!(
        DEVICES_CONNECTED,
        "Devices with a handshaken connection on this node."
    );
    describe_gauge!(AGENT_SOCKETS_OPEN, "Open agent WebSockets.");
    describe_histogram!(
        TOKEN_READ_BATCH,
        "Device upgrades answered by one grant read (they arrived while the read before was under way)."
    );
    describe_gauge!(SESSIONS_OPEN, "Open agent sessions (Agent Windows).");
    describe_counter!(
        CALLS,
        "Agent tool calls by method and outcome (ok or the error code)."
    );
    describe_histogram!(
        CALL_DURATION,
        Unit::Seconds,
        "Gateway-side duration of agent tool calls."
    );
    describe_counter!(
        FRAMES,
        "WebSocket frames by direction (in/out) and peer (device/agent)."
    );
    describe_counter!(
        BYTES,
        Unit::Bytes,
        "WebSocket payload bytes by direction and peer."
    );
    describe_counter!(
        AUTHORIZE,
        "POST /extension/authorize by action and outcome."
    );
    describe_counter!(
        REFUSALS,
        "Refused requests by reason (rate_limited, capacity_reached, session_busy, ...)."
    );
    describe_counter!(REVOCATIONS, "Devices revoked.");
    describe_counter!(
        TASK_PANICS,
        "Panics caught inside one connection's task (device, agent socket, HTTP), by task. Each is a bug; the other connections carry on."
    );
    describe_counter!(
        SETUP_EVICTIONS,
        "Connections dropped in TLS/HTTP setup because newer ones arrived at the cap."
    );
    describe_counter!(
        SETUP_TIMEOUTS,
        "Connections dropped because TLS or the first request's headers took too long."
    );
    describe_counter!(
        SETUP_DROPPED,
        "Connections closed at accept because too many were waiting for a place in setup, from their address (peer_waiting_full) or in all (waiting_full)."
    );
    describe_counter!(
        STORE_ERRORS,
        "Store failures by kind (unavailable, internal)."
    );
    describe_counter!(DEVICE_DISCONNECTS, "Device connections ended, by reason.");
    describe_gauge!(
        CLUSTER_CONNECTED,
        "Cluster mode: 1 while this replica is connected to NATS, else 0."
    );
    describe_counter!(
        CLUSTER_NOTICES_SENT,
        "Cluster notices queued for the other replicas."
    );
    describe_counter!(
        CLUSTER_NOTICES_RECEIVED,
        "Cluster notices received from other replicas, by kind."
    );
    describe_counter!(
        CLUSTER_NOTICES_DROPPED,
        "Cluster notices dropped because NATS was unreachable and the queue full."
    );
    describe_counter!(
        MCP_REQUESTS,
        "Authenticated requests to /mcp, by who answered: `direct` (a tool call answered by latchkey) or `sdk` (the MCP SDK)."
    );
    describe_counter!(
        SPANS_DROPPED,
        "Trace spans the OTLP exporter could not deliver."
    );
}

/// A bounded label for `method`: a method of the tool catalogue by its name,
/// anything else `other`.
pub fn method_label(method: &str) -> &'static str {
    latchkey_protocol::tools::tool_named(method).map_or("other", |t| t.method)
}

/// Record one finished agent call. `tenant` is given only when the operator turned
/// the tenant label on (`metrics_tenant_label`): one series per tenant and method.
pub fn call_finished(method: &str, outcome: &'static str, elapsed: Duration, tenant: Option<&str>) {
    let method = method_label(method);
    match tenant {
        None => {
            metrics::counter!(CALLS, "method" => method, "outcome" => outcome).increment(1);
            metrics::histogram!(CALL_DURATION, "method" => method).record(elapsed.as_secs_f64());
        }
        Some(t) => {
            let t = t.to_string();
            metrics::counter!(CALLS, "method" => method, "outcome" => outcome, "tenant" => t.clone()).increment(1);
            metrics::histogram!(CALL_DURATION, "method" => method, "tenant" => t)
                .record(elapsed.as_secs_f64());
        }
    }
}

/// Count one frame dropped without processing, by reason.
pub fn frame_dropped(reason: &'static str) {
    metrics::counter!(FRAMES_DROPPED, "reason" => reason).increment(1);
}

/// Count one refusal.
/// Count and log a panic caught in `task`; the payload's message if it has one.
pub fn task_panicked(task: &'static str, payload: &(dyn std::any::Any + Send)) {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic payload".to_string());
    metrics::counter!(TASK_PANICS, "task" => task).increment(1);
    tracing::error!(task, panic = %message, "panic caught; this connection ends, the others carry on");
}

/// An authenticated `/mcp` request, by who answered it (docs/mcp.md, "How a call
/// is served").
pub fn mcp_request(path: &'static str) {
    metrics::counter!(MCP_REQUESTS, "path" => path).increment(1);
}

pub fn refused(reason: &'static str) {
    metrics::counter!(REFUSALS, "reason" => reason).increment(1);
}

/// The frame and byte counters of one (direction, peer) pair.
struct FrameCounters {
    frames: metrics::Counter,
    bytes: metrics::Counter,
}

/// Handles looked up once: every relayed call counts four frames, and a registry
/// lookup per count was a measurable share of a call's CPU (docs/benchmarks.md).
/// Taken on first use, which is after [`install`] in a running server.
static FRAME_COUNTERS: OnceLock<[FrameCounters; 4]> = OnceLock::new();

fn frame_counters(direction: &'static str, peer: &'static str) -> &'static FrameCounters {
    let all = FRAME_COUNTERS.get_or_init(|| {
        [
            ("in", "device"),
            ("out", "device"),
            ("in", "agent"),
            ("out", "agent"),
        ]
        .map(|(direction, peer)| FrameCounters {
            frames: metrics::counter!(FRAMES, "direction" => direction, "peer" => peer),
            bytes: metrics::counter!(BYTES, "direction" => direction, "peer" => peer),
        })
    });
    let index = match (direction, peer) {
        ("in", "device") => 0,
        ("out", "device") => 1,
        ("in", _) => 2,
        _ => 3,
    };
    &all[index]
}

/// Count one frame in or out of a device or agent socket.
pub fn frame(direction: &'static str, peer: &'static str, bytes: usize) {
    let c = frame_counters(direction, peer);
    c.frames.increment(1);
    c.bytes.increment(bytes as u64);
}

async fn render(State(handle): State<PrometheusHandle>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
}

/// Serve `GET /metrics` on `addr` until `shutdown`; returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    handle: PrometheusHandle,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    #[expect(
        clippy::disallowed_methods,
        reason = "the metrics listener is the operator's own, not the public API"
    )]
    let app = Router::new()
        .route("/metrics", get(render))
        .with_state(handle);
    tokio::spawn(async move {
        let server = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(e) = server.await {
            tracing::warn!(error = %e, "metrics listener failed");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_are_bounded() {
        assert_eq!(super::method_label("tool.click"), "tool.click");
        assert_eq!(
            super::method_label("tool.anything-an-attacker-sends"),
            "other"
        );
    }
}
