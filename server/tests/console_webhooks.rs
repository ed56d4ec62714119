//! The console's Webhooks page on the real server, both backends
//! (docs/console.md, "Webhooks"): an admin adds an endpoint (its secret shown
//! once, never again), sees its deliveries to a real receiver, delivers one
//! again, and removes it; a refused endpoint is shown beside the form and adds
//! nothing; members and forged forms are refused.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::receiver::Receiver;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests, wait_until};

async fn an_admin_adds_follows_and_removes_an_endpoint(backend: Backend) {
    let server = TestServer::builder(backend)
        .config(|c| {
            c.webhooks.allow_private_destinations = true;
            c.webhooks.poll_interval_ms = 20;
        })
        .start()
        .await
        .expect("server");
    let admin = server.admin();
    let receiver = Receiver::start().await.expect("receiver");
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let page = web.get("/console/webhooks").await.expect("page");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("No endpoints yet"), "{}", page.body);
    let csrf = page.csrf().expect("csrf");

    // Refused: no event, then a URL that is not one. Nothing is added.
    for (url, event, says) in [
        (receiver.url.as_str(), None, "at least one event"),
        ("not a url", Some("event:token.create"), "url"),
    ] {
        let mut fields = vec![("csrf", csrf.as_str()), ("url", url)];
        if let Some(e) = event {
            fields.push((e, "on"));
        }
        let refused = web
            .post("/console/webhooks", &fields)
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert!(refused.body.contains(says), "{says}: {}", refused.body);
    }
    let (_, listed) = admin
        .raw(Method::GET, "/v1/admin/webhooks", None)
        .await
        .expect("list");
    assert_eq!(listed["webhooks"].as_array().map(Vec::len), Some(0));

    // Added: the secret once, on this answer only.
    let added = web
        .post(
            "/console/webhooks",
            &[
                ("csrf", &csrf),
                ("url", &receiver.url),
                ("description", "Ops chat"),
                ("event:token.create", "on"),
                ("event:device.revoke", "on"),
            ],
        )
        .await
        .expect("add");
    assert_eq!(added.status, 200, "{}", added.body);
    let at = added
        .body
        .find(r#"id="new-secret" type="text" readonly value=""#)
        .expect("secret shown");
    let rest = &added.body[at..];
    let secret = rest
        .split("value=\"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .expect("value");
    assert!(secret.starts_with("whsec_"), "{secret}");
    let (_, listed) = admin
        .raw(Method::GET, "/v1/admin/webhooks", None)
        .await
        .expect("list");
    assert_eq!(
        listed["webhooks"][0]["events"],
        serde_json::json!(["device.revoke", "token.create"])
    );
    let id = listed["webhooks"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let again = web.get("/console/webhooks").await.expect("page");
    assert!(!again.body.contains(secret), "never shown again");
    assert!(again.body.contains("Ops chat"));

    // An event it follows arrives; its page shows the delivery; once more by hand.
    admin
        .create_token("hooked", latchkey_protocol::api::Role::Agent)
        .await
        .expect("token");
    assert!(wait_until(Duration::from_secs(10), || async { receiver.seen() >= 1 }).await);
    // The receiver has it; the delivery log is written once its answer is read,
    // so the page is read until it shows it.
    let path = format!("/console/webhooks/{id}");
    let logged = |page: &str| page.contains("token.create") && page.contains("HTTP 204");
    assert!(
        wait_until(Duration::from_secs(10), || async {
            logged(&web.get(&path).await.expect("page").body)
        })
        .await
    );
    let detail = web.get(&path).await.expect("page");
    assert_eq!(detail.status, 200, "{}", detail.body);
    assert!(logged(&detail.body), "{}", detail.body);
    let seq_at = detail
        .body
        .find(r#"name="seq" value=""#)
        .expect("a redeliver form")
        + r#"name="seq" value=""#.len();
    let seq = &detail.body[seq_at..detail.body[seq_at..].find('"').expect("end") + seq_at];
    let again = web
        .post(
            &format!("{path}/redeliver"),
            &[("csrf", &csrf), ("seq", seq)],
        )
        .await
        .expect("redeliver");
    assert_eq!(again.status, 303, "{}", again.body);
    assert!(wait_until(Duration::from_secs(10), || async { receiver.seen() >= 2 }).await);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            web.get(&path)
                .await
                .expect("page")
                .body
                .contains("again, by hand")
        })
        .await
    );

    // Members and forged forms change nothing.
    let (alice, _) = admin.alice_and_bob().await.expect("members");
    let as_alice = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("token"))
        .await
        .expect("in");
    assert_eq!(
        as_alice
            .get("/console/webhooks")
            .await
            .expect("page")
            .status,
        403
    );
    assert_eq!(as_alice.get(&path).await.expect("page").status, 403);
    let forged = web
        .post(&format!("{path}/remove"), &[("csrf", &"0".repeat(64))])
        .await
        .expect("answer");
    assert_eq!(forged.status, 403);
    let unknown = web
        .post(
            "/console/webhooks/whk_0000000000000000/remove",
            &[("csrf", &csrf)],
        )
        .await
        .expect("answer");
    assert_eq!(unknown.status, 404);

    // Removed.
    let removed = web
        .post(&format!("{path}/remove"), &[("csrf", &csrf)])
        .await
        .expect("remove");
    assert_eq!(removed.status, 303);
    let (_, listed) = admin
        .raw(Method::GET, "/v1/admin/webhooks", None)
        .await
        .expect("list");
    assert_eq!(listed["webhooks"].as_array().map(Vec::len), Some(0));
    assert_eq!(web.get(&path).await.expect("page").status, 404);
}

backend_tests!(
    an_admin_adds_follows_and_removes_an_endpoint,
    an_admin_adds_follows_and_removes_an_endpoint
);
