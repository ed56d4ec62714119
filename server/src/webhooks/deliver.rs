//! Delivering (docs/webhooks.md, "Delivery"): each node's worker takes the
//! endpoints that have events waiting (held by a lease, so one replica at a time
//! delivers each), reads their team's trail on from where they stopped, and
//! POSTs each event they follow, in order. A failure stops the endpoint's round
//! and schedules the same event again after a backoff; an endpoint failing for
//! `disable_after_secs` is disabled, with a `webhook.disabled` audit row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_protocol::webhooks::{WebhookEventData, WebhookPayload};

use super::WebhooksConfig;
use super::destination::{GuardedResolver, check_url};
use crate::audit::{Event, action};
use crate::audit_chain::ChainedRow;
use crate::clock::rfc3339;
use crate::core::Core;
use crate::store::webhooks::{DeliveryRecord, Progress, WebhookRecord};

/// Endpoints taken per round.
const CLAIM: i64 = 16;
/// Trail rows read per query.
const PAGE: i64 = 100;
/// How long a replica holds an endpoint it delivers to.
const LEASE: Duration = Duration::from_secs(120);

/// How one attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub delivered: bool,
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// The HTTP client deliveries go through: no redirects, no proxy from the
/// environment, a time limit, and the destination check at every connection.
#[derive(Debug, Clone)]
pub struct Deliverer {
    http: reqwest::Client,
    pub config: WebhooksConfig,
}

impl Deliverer {
    pub fn new(config: WebhooksConfig) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_millis(config.timeout_ms.min(5_000)))
            .dns_resolver(GuardedResolver {
                allow_private: config.allow_private_destinations,
            })
            .user_agent(concat!("Latchkey-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, config })
    }

    /// One POST of the event at `row` to `w`, signed.
    pub async fn attempt(
        &self,
        w: &WebhookRecord,
        row: &ChainedRow,
        team: &str,
        now_ms: i64,
    ) -> Attempt {
        let failed = |error: String| Attempt {
            delivered: false,
            status: None,
            error: Some(error),
        };
        // Checked again: an address literal never reaches the resolver.
        if let Err(e) = check_url(&w.url, self.config.allow_private_destinations) {
            return failed(e);
        }
        let e = &row.event;
        let payload = WebhookPayload {
            event_type: e.action.clone(),
            timestamp: rfc3339(e.at),
            data: WebhookEventData {
                team: team.to_string(),
                seq: row.seq,
                actor: e.actor.clone(),
                target: e.target.clone(),
                outcome: e.outcome.clone(),
                detail: e.detail.clone(),
            },
        };
        let Ok(body) = serde_json::to_vec(&payload) else {
            return failed("the event does not encode".into());
        };
        let id = super::event_id(&e.tenant_id, row.seq);
        let timestamp = now_ms / 1_000;
        let Some(signature) = super::sign::signature(&w.secret, &id, timestamp, &body) else {
            return failed("the endpoint's secret does not decode".into());
        };
        let sent = self
            .http
            .post(&w.url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let status = resp.status();
                Attempt {
                    delivered: status.is_success(),
                    status: Some(status.as_u16()),
                    error: (!status.is_success()).then(|| format!("HTTP {}", status.as_u16())),
                }
            }
            // Never the URL: it may carry a token of the receiver's.
            Err(err) => failed(describe(&err.without_url())),
        }
    }

    /// The delay before retry number `attempts` (1, 2, …): doubling from the
    /// base, capped, ±50 % jitter so endpoints that failed together do not retry
    /// together.
    pub fn backoff(&self, attempts: i64) -> i64 {
        let base = self.config.retry_base_ms as f64;
        let doubled = base * 2f64.powi(attempts.clamp(1, 30) as i32 - 1);
        let capped = doubled.min(self.config.retry_max_ms as f64);
        (capped * rand::random_range(0.5..1.5)) as i64
    }
}

fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    latchkey_protocol::text::truncate(&latchkey_protocol::text::clean(&text, 400), 300)
}

/// The node's worker, until it drains.
pub async fn worker(core: Core, deliverer: Arc<Deliverer>) {
    let mut tick = tokio::time::interval(Duration::from_millis(deliverer.config.poll_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = core.shutdown.cancelled() => return,
        }
        let now = core.clock.now_ms();
        let claimed = match core
            .store
            .claim_webhooks(now, LEASE.as_millis() as i64, CLAIM)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "webhook endpoints could not be read");
                continue;
            }
        };
        let rounds = claimed.into_iter().map(|w| round(&core, &deliverer, w));
        futures_util::future::join_all(rounds).await;
    }
}

/// Deliver what waits for one claimed endpoint, then let it go.
async fn round(core: &Core, deliverer: &Deliverer, w: WebhookRecord) {
    let started = Instant::now();
    let mut p = Progress {
        cursor_seq: w.cursor_seq,
        attempts: w.attempts,
        failing_since: w.failing_since,
        next_attempt_at: 0,
        disabled_at: None,
    };
    let team = core
        .team_names
        .of(core.store.as_ref(), &w.tenant_id)
        .await
        .unwrap_or_default();
    'round: while started.elapsed() < LEASE / 2 {
        let page = match core
            .store
            .audit_chain_page(&w.tenant_id, p.cursor_seq, PAGE)
            .await
        {
            Ok(page) if !page.is_empty() => page,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, webhook = %w.id, "the trail could not be read for a webhook");
                break;
            }
        };
        for row in &page {
            if !w.follows(&row.event.action) {
                p.cursor_seq = row.seq;
                continue;
            }
            let now = core.clock.now_ms();
            let attempt = deliverer.attempt(&w, row, &team, now).await;
            p.attempts += 1;
            log(core, &w, row, p.attempts, now, &attempt).await;
            if attempt.delivered {
                p.cursor_seq = row.seq;
                p.attempts = 0;
                p.failing_since = None;
                continue;
            }
            let since = *p.failing_since.get_or_insert(now);
            if now - since >= deliverer.config.disable_after_secs as i64 * 1_000 {
                p.disabled_at = Some(now);
                disabled(core, &w, &attempt).await;
            } else {
                p.next_attempt_at = now + deliverer.backoff(p.attempts);
            }
            break 'round;
        }
    }
    if let Err(e) = core.store.release_webhook(&w.id, &p).await {
        tracing::warn!(error = %e, webhook = %w.id, "a webhook's progress could not be saved");
    }
}

/// Log an attempt (the endpoint's delivery log).
pub async fn log(
    core: &Core,
    w: &WebhookRecord,
    row: &ChainedRow,
    attempt: i64,
    now: i64,
    a: &Attempt,
) {
    let record = DeliveryRecord {
        endpoint_id: w.id.clone(),
        seq: row.seq,
        event_type: row.event.action.clone(),
        attempt,
        at: now,
        delivered: a.delivered,
        status: a.status.map(i64::from),
        error: a.error.clone(),
    };
    if let Err(e) = core.store.log_delivery(&record).await {
        tracing::warn!(error = %e, webhook = %w.id, "a webhook delivery could not be logged");
    }
}

async fn disabled(core: &Core, w: &WebhookRecord, last: &Attempt) {
    tracing::warn!(webhook = %w.id, tenant = %w.tenant_id, "webhook endpoint disabled after failing");
    core.audit
        .record(Event {
            tenant_id: &w.tenant_id,
            actor: "system".into(),
            action: action::WEBHOOK_DISABLED,
            target: format!("webhook:{}", w.id),
            outcome: "ok",
            detail: Some(format!(
                "failing for {} s; last: {}",
                core.config.webhooks.disable_after_secs,
                last.error.as_deref().unwrap_or("no answer")
            )),
        })
        .await;
}
