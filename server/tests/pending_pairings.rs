//! Pending pairing links on the real server, both backends (docs/pairing-and-grants.md,
//! "Pending links"): an admin lists the team's unused, unexpired links with the member
//! each is for and never a secret, and voids one so it can never pair a browser; a
//! used, voided, expired, foreign or unknown id answers alike and changes nothing.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::{PairingList, PendingPairingView, Role};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

async fn listed(admin: &latchkey_testkit::AdminClient) -> Vec<PendingPairingView> {
    let (status, body) = admin
        .raw(Method::GET, "/v1/admin/pairings", None)
        .await
        .expect("list");
    assert_eq!(status, 200, "{body}");
    serde_json::from_value::<PairingList>(body)
        .expect("a pairing list")
        .pairings
}

async fn an_admin_lists_pending_links_and_voids_one(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let for_alice = admin.create_pairing_for(&alice.id).await.expect("link");
    let for_no_one = admin
        .create_pairing(Some("Kiosk"), Some(600))
        .await
        .expect("link");
    let used = admin.create_pairing(None, None).await.expect("link");
    let mut ext = server.extension_from_link(&used.link).expect("ext");
    ext.pair().await.expect("the used link pairs");
    let short = admin.create_pairing(None, Some(1)).await.expect("link");
    server.clock().advance(Duration::from_secs(2));

    // Only the two links that can still pair, newest first, with whose they are;
    // never a secret.
    let (_, raw) = admin
        .raw(Method::GET, "/v1/admin/pairings", None)
        .await
        .expect("list");
    for link in [&for_alice, &for_no_one, &used, &short] {
        let secret = link.link.rsplit('#').next().expect("a fragment");
        assert!(!raw.to_string().contains(secret), "a secret was listed");
    }
    let pending = listed(&admin).await;
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, [for_no_one.id.as_str(), for_alice.id.as_str()]);
    assert_eq!(pending[0].label.as_deref(), Some("Kiosk"));
    assert!(pending[0].member.is_none());
    let member = pending[1].member.as_ref().expect("alice's link names her");
    assert_eq!(
        (member.id.as_str(), member.email.as_str()),
        (alice.id.as_str(), "alice@example.com")
    );
    assert_eq!(pending[1].created_by, "bootstrap");

    // Voided: it answers with what it was, leaves the list, is audited, and the
    // link no longer pairs a browser.
    let path = format!("/v1/admin/pairings/{}", for_alice.id);
    let (status, body) = admin.raw(Method::DELETE, &path, None).await.expect("void");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], json!(for_alice.id));
    assert_eq!(body["member"]["id"], json!(alice.id));
    let ids: Vec<String> = listed(&admin).await.into_iter().map(|p| p.id).collect();
    assert_eq!(ids, std::slice::from_ref(&for_no_one.id));
    let target = format!("pairing:{}", for_alice.id);
    assert!(
        admin
            .audit_has(
                DEADLINE,
                &["token:bootstrap", "pairing.void", &target, "ok"]
            )
            .await,
        "the void is audited"
    );
    let mut late = server.extension_from_link(&for_alice.link).expect("ext");
    assert!(late.pair().await.is_err(), "a voided link must not pair");

    // Voided again, used, expired, unknown, malformed, or another team's: all
    // `not_found` with one message, and nothing changes.
    let other = server.admin_with(&server.new_tenant("other").await.expect("team"));
    let foreign = other.create_pairing(None, None).await.expect("link");
    let unknown = "pair_0123456789abcdef".to_string();
    let mut answers = Vec::new();
    for id in [
        &for_alice.id,
        &used.id,
        &short.id,
        &unknown,
        &foreign.id,
        &"%00x".to_string(),
    ] {
        let (status, body) = admin
            .raw(Method::DELETE, &format!("/v1/admin/pairings/{id}"), None)
            .await
            .expect("void");
        answers.push((status, body["error"].clone()));
    }
    assert!(
        answers.iter().all(|a| a == &answers[0]),
        "every absent link answers alike: {answers:?}"
    );
    assert_eq!(answers[0].0, 404);
    assert_eq!(answers[0].1["code"], json!("not_found"));
    assert_eq!(listed(&admin).await.len(), 1);
    let theirs: Vec<String> = serde_json::from_value::<PairingList>(
        other
            .raw(Method::GET, "/v1/admin/pairings", None)
            .await
            .expect("list")
            .1,
    )
    .expect("list")
    .pairings
    .into_iter()
    .map(|p| p.id)
    .collect();
    assert_eq!(
        theirs,
        std::slice::from_ref(&foreign.id),
        "the other team's link is untouched"
    );

    // Pending links are the admins' business: an agent token sees nothing.
    let agent = admin.create_token("a", Role::Agent).await.expect("agent");
    let as_agent = server.admin_with(&agent.token);
    for (method, path) in [
        (Method::GET, "/v1/admin/pairings".to_string()),
        (
            Method::DELETE,
            format!("/v1/admin/pairings/{}", for_no_one.id),
        ),
    ] {
        let (status, body) = as_agent.raw(method, &path, None).await.expect("refused");
        assert_eq!(status, 403, "{body}");
    }
    assert_eq!(listed(&admin).await.len(), 1);
    server.stop().await;
}

backend_tests!(pending_links, an_admin_lists_pending_links_and_voids_one);
