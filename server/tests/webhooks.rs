//! Signed webhooks on the real server, both backends (docs/webhooks.md): events a
//! team's endpoint follows arrive in order, signed, once each (a restart
//! delivers nothing twice); a failing receiver is retried until it answers, and
//! one failing for the configured day is disabled with an audit row and resumes
//! from where it stopped once enabled; a manual redelivery sends the same event
//! id again; destinations inside the gateway's network are refused unless the
//! operator allows them.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_protocol::webhooks::WebhookPayload;
use latchkey_testkit::receiver::Receiver;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{AdminClient, Backend, TestServer, backend_tests, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(15);

async fn server(backend: Backend) -> TestServer {
    TestServer::builder(backend)
        .config(|c| {
            c.webhooks.allow_private_destinations = true;
            c.webhooks.poll_interval_ms = 20;
            c.webhooks.retry_base_ms = 20;
            c.webhooks.retry_max_ms = 100;
        })
        .start()
        .await
        .expect("server")
}

/// Register `url` for `events`: the endpoint's id and secret.
async fn register(admin: &AdminClient, url: &str, events: &[&str]) -> (String, String) {
    let (status, body) = admin
        .raw(
            Method::POST,
            "/v1/admin/webhooks",
            Some(json!({"url": url, "events": events, "description": "ops channel"})),
        )
        .await
        .expect("register");
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "active");
    let secret = body["secret"].as_str().expect("secret").to_string();
    (body["id"].as_str().expect("id").to_string(), secret)
}

fn payload(r: &latchkey_testkit::receiver::Received) -> WebhookPayload {
    serde_json::from_slice(&r.body).expect("a payload")
}

async fn events_arrive_in_order_signed_and_once(backend: Backend) {
    let mut server = server(backend).await;
    let admin = server.admin();
    let receiver = Receiver::start().await.expect("receiver");
    let (id, secret) = register(&admin, &receiver.url, &["token.create", "token.revoke"]).await;
    // The list never shows the secret.
    let (_, list) = admin
        .raw(Method::GET, "/v1/admin/webhooks", None)
        .await
        .expect("list");
    assert!(!list.to_string().contains(&secret), "{list}");

    let mut tokens = Vec::new();
    for n in 0..3 {
        let t = admin
            .create_token(&format!("hooked-{n}"), Role::Agent)
            .await
            .expect("token");
        tokens.push(t.view.id);
    }
    admin
        .add_member("Not Followed", "nf@example.com")
        .await
        .expect("member");
    admin.revoke_token(&tokens[0]).await.expect("revoke");
    assert!(
        wait_until(DEADLINE, || async { receiver.received().len() == 4 }).await,
        "{:?}",
        receiver.received()
    );
    let got = receiver.received();
    let types: Vec<String> = got.iter().map(|r| payload(r).event_type).collect();
    assert_eq!(
        types,
        [
            "token.create",
            "token.create",
            "token.create",
            "token.revoke"
        ]
    );
    let seqs: Vec<i64> = got.iter().map(|r| payload(r).data.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in trail order: {seqs:?}"
    );
    for r in &got {
        let p = payload(r);
        assert_eq!(p.data.team, "default");
        assert_eq!(p.data.target.strip_prefix("token:").map(|_| ()), Some(()));
        let timestamp: i64 = r.timestamp.parse().expect("unix seconds");
        let expected =
            latchkey_server::webhooks::sign::signature(&secret, &r.id, timestamp, &r.body);
        assert_eq!(
            Some(r.signature.clone()),
            expected,
            "signed with the endpoint's secret"
        );
        assert!(r.id.ends_with(&format!("_{}", p.data.seq)), "{}", r.id);
    }

    // After a restart only the new event arrives: nothing twice.
    server.restart().await.expect("restart");
    let admin = server.admin();
    admin
        .create_token("after-restart", Role::Agent)
        .await
        .expect("token");
    assert!(wait_until(DEADLINE, || async { receiver.received().len() == 5 }).await);
    let mut ids: Vec<String> = receiver.received().into_iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "no event delivered twice");

    // A redelivery sends the same event id again, now.
    let first = &got[0];
    let (status, body) = admin
        .raw(
            Method::POST,
            &format!("/v1/admin/webhooks/{id}/redeliver"),
            Some(json!({"seq": payload(first).data.seq})),
        )
        .await
        .expect("redeliver");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["delivered"], true, "{body}");
    assert_eq!(
        receiver.received().last().map(|r| r.id.clone()),
        Some(first.id.clone())
    );
    let (status, _) = admin
        .raw(
            Method::POST,
            &format!("/v1/admin/webhooks/{id}/redeliver"),
            Some(json!({"seq": 1})),
        )
        .await
        .expect("redeliver");
    assert_eq!(status, 400, "the bootstrap row is not an event it follows");
    server.stop().await;
}

backend_tests!(delivery, events_arrive_in_order_signed_and_once);

async fn deliveries(admin: &AdminClient, id: &str) -> Vec<Value> {
    let (status, body) = admin
        .raw(
            Method::GET,
            &format!("/v1/admin/webhooks/{id}/deliveries"),
            None,
        )
        .await
        .expect("deliveries");
    assert_eq!(status, 200, "{body}");
    body["deliveries"].as_array().cloned().unwrap_or_default()
}

async fn a_failing_receiver_is_retried_then_disabled_and_resumes(backend: Backend) {
    let server = server(backend).await;
    let admin = server.admin();
    let receiver = Receiver::start().await.expect("receiver");
    let (id, _) = register(&admin, &receiver.url, &["token.create"]).await;

    // Two failures, then it answers: the event arrives on the third attempt.
    receiver.fail_next(2);
    admin
        .create_token("retried", Role::Agent)
        .await
        .expect("token");
    assert!(wait_until(DEADLINE, || async { receiver.received().len() == 1 }).await);
    // The attempt is logged once the receiver has answered it.
    assert!(
        wait_until(DEADLINE, || async {
            deliveries(&admin, &id).await.len() == 3
        })
        .await
    );
    let log = deliveries(&admin, &id).await;
    let outcomes: Vec<(bool, i64)> = log
        .iter()
        .map(|d| (d["delivered"] == true, d["attempt"].as_i64().unwrap_or(-1)))
        .collect();
    assert_eq!(outcomes, [(true, 3), (false, 2), (false, 1)], "{log:?}");
    assert_eq!(log[1]["status"], 500);
    assert_eq!(log[1]["error"], "HTTP 500");

    // Failing for the whole day: disabled, with a row in the trail.
    receiver.fail_next(usize::MAX);
    admin
        .create_token("unlucky", Role::Agent)
        .await
        .expect("token");
    assert!(wait_until(DEADLINE, || async { receiver.seen() >= 5 }).await);
    server.clock().advance(Duration::from_secs(86_400 + 60));
    let disabled = wait_until(DEADLINE, || async {
        let (_, list) = admin
            .raw(Method::GET, "/v1/admin/webhooks", None)
            .await
            .expect("list");
        list["webhooks"][0]["status"] == "disabled"
    })
    .await;
    assert!(disabled);
    assert!(
        admin
            .audit_has(DEADLINE, &["webhook.disabled", &format!("webhook:{id}")])
            .await
    );
    let seen = receiver.seen();
    admin
        .create_token("while-off", Role::Agent)
        .await
        .expect("token");

    // Enabled again: what waited is delivered, in order.
    receiver.fail_next(0);
    let (status, body) = admin
        .raw(
            Method::POST,
            &format!("/v1/admin/webhooks/{id}/enable"),
            None,
        )
        .await
        .expect("enable");
    assert_eq!((status, &body["status"]), (200, &json!("active")), "{body}");
    assert!(wait_until(DEADLINE, || async { receiver.received().len() == 3 }).await);
    assert!(receiver.seen() > seen);
    server.stop().await;
}

backend_tests!(
    retries,
    a_failing_receiver_is_retried_then_disabled_and_resumes
);

/// Without the operator's leave, no destination inside the gateway's network;
/// and the usual refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inward_destinations_and_bad_requests_are_refused() {
    let server = TestServer::start(Backend::Sqlite).await.expect("server");
    let admin = server.admin();
    let refuse = |body: Value| {
        let admin = admin.clone();
        async move {
            let (status, answer) = admin
                .raw(Method::POST, "/v1/admin/webhooks", Some(body))
                .await
                .expect("answer");
            (status, answer["error"]["data"]["field"].clone())
        }
    };
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1/hook",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://localhost/hook",
        "https://[::1]/hook",
        "http://hooks.example.com/",
        "https://user:pw@hooks.example.com/",
    ] {
        assert_eq!(
            refuse(json!({"url": url, "events": ["device.revoke"]})).await,
            (400, json!("url")),
            "{url}"
        );
    }
    for events in [json!([]), json!(["device.revoke", "session.call"])] {
        assert_eq!(
            refuse(json!({"url": "https://hooks.example.com/", "events": events})).await,
            (400, json!("events"))
        );
    }
    // Another team's endpoint answers like an unknown one.
    let (id, _) = register(&admin, "https://hooks.example.com/a", &["device.revoke"]).await;
    let other = server.admin_with(&server.new_tenant("other").await.expect("team"));
    for path in [
        format!("/v1/admin/webhooks/{id}"),
        "/v1/admin/webhooks/wh_0000000000000000".into(),
        "/v1/admin/webhooks/not-an-id".into(),
    ] {
        let (status, body) = other
            .raw(Method::DELETE, &path, None)
            .await
            .expect("answer");
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = admin
        .raw(Method::DELETE, &format!("/v1/admin/webhooks/{id}"), None)
        .await
        .expect("delete");
    assert_eq!(status, 200);
    assert!(admin.audit_has(DEADLINE, &["webhook.delete"]).await);
    server.stop().await;
}
