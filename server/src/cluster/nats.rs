//! The NATS side of cluster mode: one connection per replica, a publisher task
//! that drains [`super::Peers`]' queue onto the notice subject, and a
//! subscriber task that applies what the other replicas publish.
//!
//! The connection is made in the background (`retry_on_initial_connect`) and
//! retried for ever: a replica whose NATS is away still starts and serves the
//! devices whose sockets it holds (docs/cluster.md, "When NATS is unreachable").
//! `no_echo` keeps a replica's own notices from coming back to it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use latchkey_protocol::cluster::{Envelope, MAX_NOTICE_BYTES, Notice};
use tokio::sync::mpsc;

use super::{ClusterConfig, Peers};
use crate::app::AppState;
use crate::telemetry::metrics::{CLUSTER_CONNECTED, CLUSTER_NOTICES_RECEIVED};

/// Why cluster mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster.nats_url is not usable: {0}")]
    Url(String),
    #[error("cluster.ca_file: {0}")]
    Ca(String),
    #[error("cannot reach NATS: {0}")]
    Connect(String),
}

/// How long a closing node keeps sending the notices still queued.
pub(super) const CLOSING_GRACE: Duration = Duration::from_secs(2);

/// What the tasks need, handed from [`connect`] to [`spawn`].
#[derive(Debug)]
pub struct Wiring {
    client: async_nats::Client,
    /// Notified each time the connection to NATS is (re)made.
    connected: Arc<tokio::sync::Notify>,
    /// Notified when another replica asks which devices are here.
    announce: Arc<tokio::sync::Notify>,
    outbox: mpsc::Receiver<Notice>,
    subject: Arc<str>,
    node_id: Arc<str>,
}

/// The node id: the configured one, else the host (a pod's name), with a
/// random suffix so a restarted replica is told apart from its predecessor.
fn node_id(config: &ClusterConfig) -> String {
    let base = config
        .node_id
        .clone()
        .or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.is_empty() && h.len() <= 48)
        })
        .unwrap_or_else(|| "latchkeyd".to_string());
    // A subject token: calls for this replica are addressed by it.
    latchkey_protocol::cluster::relay::subject_token(&format!(
        "{base}-{:08x}",
        rand::random::<u32>()
    ))
}

/// Credentials taken out of the NATS URL. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
enum Credentials {
    UserPassword(String, String),
    /// A user name without a password: NATS reads it as a token.
    Token(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(****)")
    }
}

/// The servers without credentials, and the credentials apart: the NATS client
/// prints server addresses in its logs, and a secret must never be logged.
fn split_credentials(url: &str) -> Result<(Vec<String>, Option<Credentials>), ClusterError> {
    let mut servers = Vec::new();
    let mut credentials = None;
    for server in url.split(',') {
        let mut u = url::Url::parse(server.trim()).map_err(|e| ClusterError::Url(e.to_string()))?;
        if !u.username().is_empty() {
            let user = url_decoded(u.username());
            credentials = Some(match u.password() {
                Some(pass) => Credentials::UserPassword(user, url_decoded(pass)),
                None => Credentials::Token(user),
            });
            let _ = u.set_username("");
            let _ = u.set_password(None);
        }
        servers.push(u.to_string());
    }
    Ok((servers, credentials))
}

/// A URL's user info is percent-encoded; NATS wants it as typed.
fn url_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// What the NATS client reports about its connection: logged, in the
/// `latchkey_cluster_connected` gauge, and each (re)connection wakes the
/// announcer.
async fn on_event(event: async_nats::Event, on_connect: Arc<tokio::sync::Notify>) {
    match event {
        async_nats::Event::Connected => {
            metrics::gauge!(CLUSTER_CONNECTED).set(1.0);
            on_connect.notify_one();
            tracing::info!("cluster: connected to NATS");
        }
        async_nats::Event::Disconnected => {
            metrics::gauge!(CLUSTER_CONNECTED).set(0.0);
            tracing::warn!(
                "cluster: NATS connection lost; revocations reach other replicas by their sweeps until it is back"
            );
        }
        other => tracing::info!(event = %other, "cluster: NATS event"),
    }
}

/// Start connecting (in the background) and return the handle the core tells
/// notices to, and what [`spawn`] needs. `None` on one node.
pub async fn connect(config: &ClusterConfig) -> Result<Option<(Peers, Wiring)>, ClusterError> {
    let Some(url) = &config.nats_url else {
        return Ok(None);
    };
    let node_id = node_id(config);
    let (servers, credentials) = split_credentials(url)?;
    let connected = Arc::new(tokio::sync::Notify::new());
    let on_connect = connected.clone();
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("latchkeyd {node_id}"))
        .no_echo()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        .ping_interval(Duration::from_secs(10))
        // Backoff 50 ms doubling to 2 s: a restarted NATS is found again fast.
        .reconnect_delay_callback(|attempts| {
            Duration::from_millis(50u64.saturating_mul(1 << attempts.min(6)).min(2_000))
        })
        .event_callback(move |event| on_event(event, on_connect.clone()));
    options = match credentials {
        Some(Credentials::UserPassword(user, pass)) => options.user_and_password(user, pass),
        Some(Credentials::Token(token)) => options.token(token),
        None => options,
    };
    if let Some(ca) = &config.ca_file {
        if !ca.is_file() {
            return Err(ClusterError::Ca(format!(
                "{} is not a readable file",
                ca.display()
            )));
        }
        options = options.add_root_certificates(ca.clone());
    }
    let addrs: Vec<async_nats::ServerAddr> = servers
        .iter()
        .map(|s| {
            s.parse()
                .map_err(|e: std::io::Error| ClusterError::Url(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    metrics::gauge!(CLUSTER_CONNECTED).set(0.0);
    let client = options
        .connect(addrs)
        .await
        .map_err(|e| ClusterError::Connect(e.to_string()))?;
    let (tx, rx) = mpsc::channel(super::peers::OUTBOX);
    tracing::info!(node = %node_id, subject = %config.subject, "cluster mode: telling other replicas over NATS");
    let announce = Arc::new(tokio::sync::Notify::new());
    let peers = Peers::new(
        node_id.clone(),
        tx,
        client.clone(),
        Arc::from(config.subject.as_str()),
        announce.clone(),
    );
    Ok(Some((
        peers,
        Wiring {
            client,
            connected,
            announce,
            outbox: rx,
            subject: Arc::from(config.subject.as_str()),
            node_id: Arc::from(node_id.as_str()),
        },
    )))
}

/// Run the publisher and the subscriber on the node's task tracker until the
/// node closes its sockets (notices still matter while it drains).
pub fn spawn(state: &AppState, wiring: Wiring) {
    let Wiring {
        client,
        connected,
        announce,
        outbox,
        subject,
        node_id,
    } = wiring;
    // Not on the node's task tracker: the publisher outlives the sockets, so
    // that what their ends tell (`device_disconnected`) still goes out; the
    // drain stops it last (`Peers::finish`).
    let finished = state.peers.finished();
    state.peers.set_publisher(tokio::spawn(publisher(
        client.clone(),
        outbox,
        subject.clone(),
        node_id,
        finished,
    )));
    state.tasks.spawn(super::relay::listen(
        client.clone(),
        subject.clone(),
        state.clone(),
    ));
    state.tasks.spawn(super::session_lists::listen(
        client.clone(),
        subject.clone(),
        state.clone(),
    ));
    state
        .tasks
        .spawn(subscriber(client, subject, state.clone()));
    state
        .tasks
        .spawn(announcer(connected, announce, state.clone()));
}

/// Each time the connection to NATS is made again, tell the other replicas
/// about every socket here once more, and ask them to do the same (`hello`):
/// a `device_connected` notice lost while NATS was away (a device that moved
/// between replicas meanwhile) still reaches them, the older of two sockets of
/// one device closes, and a replica that just joined learns where every device
/// is. Another replica's `hello` is answered by telling again, without asking.
async fn announcer(
    connected: Arc<tokio::sync::Notify>,
    announce: Arc<tokio::sync::Notify>,
    state: AppState,
) {
    let mut alive = tokio::time::interval(super::members::ALIVE_EVERY);
    alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The drain has begun: this replica no longer says it is up (`hello` and
    // `alive` would count it in again, cluster::members).
    let mut leaving = false;
    loop {
        tokio::select! {
            () = connected.notified() => {
                if !leaving {
                    state.peers.tell(Notice::Hello);
                }
            }
            () = announce.notified() => {}
            // Not an announcement: only a sign of life.
            _ = alive.tick(), if !leaving => {
                state.peers.tell(Notice::Alive);
                continue;
            }
            // The others stop waiting for this replica's answers to lists.
            () = state.shutdown.cancelled(), if !leaving => {
                leaving = true;
                state.peers.tell(Notice::Leaving);
                continue;
            }
            _ = state.closing.cancelled() => return,
        }
        let online = state.registry.online_since();
        tracing::debug!(
            devices = online.len(),
            "cluster: telling the other replicas which devices are here"
        );
        for (tenant_id, device_id, connected_at_ms, features) in online {
            state.peers.tell(Notice::DeviceConnected {
                tenant_id,
                device_id,
                connected_at_ms,
                features: features.names().into_iter().map(str::to_string).collect(),
            });
        }
    }
}

async fn publisher(
    client: async_nats::Client,
    mut outbox: mpsc::Receiver<Notice>,
    subject: Arc<str>,
    node_id: Arc<str>,
    finished: tokio_util::sync::CancellationToken,
) {
    let closing = finished;
    let publish = |notice: Notice| {
        let client = &client;
        let subject = subject.clone();
        let envelope = Envelope {
            node: node_id.to_string(),
            notice,
        };
        async move {
            let Ok(payload) = serde_json::to_vec(&envelope) else {
                return;
            };
            if let Err(e) = client.publish(subject.to_string(), payload.into()).await {
                tracing::warn!(error = %e, "cluster notice not published");
            }
        }
    };
    loop {
        let notice = tokio::select! {
            biased;
            n = outbox.recv() => n,
            _ = closing.cancelled() => None,
        };
        let Some(n) = notice else { break };
        // A publish waits while NATS is away and the client's own buffer is
        // full; the node's close does not.
        tokio::select! {
            () = publish(n) => {}
            _ = closing.cancelled() => break,
        }
    }
    // What was told before the node finished still goes out, if NATS lets it.
    let _ = tokio::time::timeout(CLOSING_GRACE, async {
        while let Ok(n) = outbox.try_recv() {
            publish(n).await;
        }
        let _ = client.flush().await;
    })
    .await;
}

/// Subscribe to `subject`, retrying until the server holds the subscription
/// or the node closes (`None`).
pub(super) async fn subscribe(
    client: &async_nats::Client,
    subject: &str,
    closing: &tokio_util::sync::CancellationToken,
) -> Option<async_nats::Subscriber> {
    loop {
        let attempt = async {
            let s = client
                .subscribe(subject.to_string())
                .await
                .map_err(|e| e.to_string())?;
            // A round trip: once it is back, the server holds the subscription.
            // (It waits for the connection, however long NATS is away.)
            client.flush().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(s)
        };
        let subscribed = tokio::select! {
            r = attempt => r,
            _ = closing.cancelled() => return None,
        };
        match subscribed {
            Ok(s) => return Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot subscribe yet; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = closing.cancelled() => return None,
                }
            }
        }
    }
}

async fn subscriber(client: async_nats::Client, subject: Arc<str>, state: AppState) {
    let closing = state.closing.clone();
    let Some(mut messages) = subscribe(&client, &subject, &closing).await else {
        return;
    };
    state.peers.set_listening();
    // Whoever joined before this replica listened tells again where its
    // devices are.
    state.peers.tell(Notice::Hello);
    loop {
        let message = tokio::select! {
            m = messages.next() => m,
            _ = closing.cancelled() => break,
        };
        let Some(message) = message else { break };
        if message.payload.len() > MAX_NOTICE_BYTES {
            metrics::counter!(CLUSTER_NOTICES_RECEIVED, "kind" => "oversized").increment(1);
            tracing::warn!(
                bytes = message.payload.len(),
                "cluster notice too long; dropped unread"
            );
            continue;
        }
        match serde_json::from_slice::<Envelope>(&message.payload) {
            Ok(envelope) => super::apply::apply(&state, envelope),
            Err(e) => {
                metrics::counter!(CLUSTER_NOTICES_RECEIVED, "kind" => "malformed").increment(1);
                tracing::warn!(error = %e, "cluster notice does not parse; dropped");
            }
        }
    }
    let _ = messages.unsubscribe().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_leave_the_server_addresses() {
        let (servers, creds) = split_credentials("nats://al%40ice:p%3Ass@a:4222,nats://b:4222")
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(servers, ["nats://a:4222", "nats://b:4222"]);
        assert_eq!(
            creds,
            Some(Credentials::UserPassword("al@ice".into(), "p:ss".into()))
        );
        assert_eq!(format!("{creds:?}"), "Some(Credentials(****))");
        let (_, token) =
            split_credentials("tls://s3cr3t@a:4222").unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(token, Some(Credentials::Token("s3cr3t".into())));
    }
}
