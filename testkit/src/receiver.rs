//! A webhook receiver on 127.0.0.1:0 (docs/webhooks.md): records every delivery
//! (its headers and body) and answers 204, or 500 while told to fail.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

/// One delivery as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: Bytes,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    /// Requests still to fail (500) before answering 204 again.
    fail: AtomicUsize,
    /// Requests seen, failed ones included.
    seen: AtomicUsize,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hook(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    shared.seen.fetch_add(1, Ordering::SeqCst);
    let failing = shared
        .fail
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if failing {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let delivery = Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body,
    };
    if let Ok(mut all) = shared.received.lock() {
        all.push(delivery);
    }
    StatusCode::NO_CONTENT
}

impl Receiver {
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, shared, task })
    }

    /// Answer the next `n` requests with 500.
    pub fn fail_next(&self, n: usize) {
        self.shared.fail.store(n, Ordering::SeqCst);
    }

    /// Every delivery answered 204, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.shared
            .received
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Requests seen, failed ones included.
    pub fn seen(&self) -> usize {
        self.shared.seen.load(Ordering::SeqCst)
    }
}
