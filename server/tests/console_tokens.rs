//! The console's Agents and tokens page on the real server, both backends
//! (docs/console.md, "Agents and tokens"): an admin creates a token whose secret
//! is shown once and works, sees it listed with its role and expiry, and revokes
//! it (it stops working); bad requests change nothing; members have no such page.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::console::Page;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};

/// The value of the input `id` on `page`.
fn field(page: &Page, id: &str) -> Option<String> {
    let at = page.body.find(&format!(r#"id="{id}""#))?;
    let rest = &page.body[at..];
    let value = &rest[rest.find(r#"value=""#)? + 7..];
    Some(value[..value.find('"')?].to_owned())
}

async fn an_admin_creates_lists_and_revokes_tokens(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let mut web = server.console();
    assert_eq!(
        web.sign_in(&server.admin_token).await.expect("in").status,
        303
    );
    let page = web.get("/console/tokens").await.expect("page");
    assert_eq!(page.status, 200);
    let csrf = page.csrf().expect("csrf");
    let before = page.body.matches("data-token=").count();

    let made = web
        .post(
            "/console/tokens",
            &[
                ("csrf", &csrf),
                ("name", "booking"),
                ("role", "agent"),
                ("ttl_secs", "2592000"),
            ],
        )
        .await
        .expect("made");
    assert_eq!(made.status, 201, "{}", made.body);
    let secret = field(&made, "new-token").expect("the secret, shown once");
    assert!(secret.starts_with("lk_"), "{secret}");
    let agent = server.agent(&secret);
    assert!(agent.browsers().await.is_ok(), "the new token works");

    let page = web.get("/console/tokens").await.expect("page");
    assert!(
        !page.body.contains(&secret),
        "the secret is shown only once"
    );
    assert_eq!(page.body.matches("data-token=").count(), before + 1);
    assert!(page.body.contains("booking"));
    assert!(
        page.body.contains("in 30 days") || page.body.contains("in 29 days"),
        "{}",
        page.body
    );

    // A member token must name its member: refused, nothing made.
    let bad = web
        .post(
            "/console/tokens",
            &[("csrf", &csrf), ("name", "x"), ("role", "member")],
        )
        .await
        .expect("answer");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("invalid_params"), "{}", bad.body);
    let page = web.get("/console/tokens").await.expect("page");
    assert_eq!(page.body.matches("data-token=").count(), before + 1);

    // Revoked from the console: it stops working at once.
    let tokens = admin
        .raw(Method::GET, "/v1/admin/tokens", None)
        .await
        .expect("list")
        .1;
    let id = tokens["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .find(|t| t["name"] == "booking")
        .and_then(|t| t["id"].as_str())
        .expect("booking")
        .to_owned();
    let revoke = format!("/console/tokens/{id}/revoke");
    assert_eq!(
        web.post(&revoke, &[("csrf", &"0".repeat(64))])
            .await
            .expect("answer")
            .status,
        403
    );
    assert!(agent.browsers().await.is_ok());
    let done = web.post(&revoke, &[("csrf", &csrf)]).await.expect("revoke");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/tokens"))
    );
    assert!(
        agent.browsers().await.is_err(),
        "a revoked token is refused"
    );
    assert!(
        web.get("/console/tokens")
            .await
            .expect("page")
            .body
            .contains("Revoked")
    );

    // Members have no tokens page.
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let mut as_alice = server.console();
    let token = admin.member_token(&alice.id).await.expect("token");
    assert_eq!(as_alice.sign_in(&token).await.expect("in").status, 303);
    let page = as_alice.get("/console/devices").await.expect("page");
    assert!(
        !page.body.contains("/console/tokens"),
        "no link for a member"
    );
    let refused = as_alice.get("/console/tokens").await.expect("answer");
    assert_eq!(refused.status, 403);
    server.stop().await;
}

backend_tests!(
    an_admin_creates_lists_and_revokes_tokens,
    an_admin_creates_lists_and_revokes_tokens
);

/// The team's live delegations are listed with the token at their root and what
/// they are narrowed to; Revoke ends one and every delegation below it, and the
/// delegation token stops working at once (docs/delegation.md).
async fn an_admin_sees_and_revokes_delegations(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let made = admin
        .create_token("booker", latchkey_protocol::api::Role::Agent)
        .await
        .expect("agent");
    let agent = server.agent(&made.token);
    let minted = agent
        .request(
            Method::POST,
            "/v1/delegations",
            Some(&serde_json::json!({"ttl_secs": 900, "name": "checkout-helper", "sites": ["*.shop.test"]})),
        )
        .await
        .expect("mint");
    assert_eq!(minted.status, 201, "{}", minted.body);
    let id = minted.body["id"].as_str().expect("id").to_string();
    let token = minted.body["token"].as_str().expect("token").to_string();
    let child = server
        .agent(&token)
        .request(
            Method::POST,
            "/v1/delegations",
            Some(&serde_json::json!({"ttl_secs": 300, "name": "one-step"})),
        )
        .await
        .expect("mint");
    assert_eq!(child.status, 201, "{}", child.body);

    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let page = web.get("/console/tokens").await.expect("page");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!(r#"data-delegation="{id}""#)),
        "{}",
        page.body
    );
    assert!(page.body.contains("sites *.shop.test"), "{}", page.body);
    assert!(
        page.body.contains("(2 levels down)"),
        "the child, by its root: {}",
        page.body
    );
    assert!(!page.body.contains(&token), "never the delegation token");
    let csrf = page.csrf().expect("csrf");

    let path = format!("/console/delegations/{id}/revoke");
    let forged = web
        .post(&path, &[("csrf", &"0".repeat(64))])
        .await
        .expect("answer");
    assert_eq!(forged.status, 403);
    assert_eq!(
        server
            .agent(&token)
            .try_start(None)
            .await
            .expect("answer")
            .status,
        409,
        "still works: no browser"
    );
    let revoked = web.post(&path, &[("csrf", &csrf)]).await.expect("revoke");
    assert_eq!(revoked.status, 303, "{}", revoked.body);
    assert_eq!(
        server
            .agent(&token)
            .try_start(None)
            .await
            .expect("answer")
            .status,
        401
    );
    let after = web.get("/console/tokens").await.expect("page");
    assert!(
        after.body.contains("No live delegations"),
        "the child went with it: {}",
        after.body
    );
    let unknown = web
        .post(
            "/console/delegations/del_0000000000000000/revoke",
            &[("csrf", &csrf)],
        )
        .await
        .expect("answer");
    assert_eq!(unknown.status, 404);
}

backend_tests!(
    an_admin_sees_and_revokes_delegations,
    an_admin_sees_and_revokes_delegations
);
