//! Single sign-on to the console on the real server, both backends
//! (docs/console.md, "Single sign-on"): the sign-in page offers each provider;
//! what did not start here, came back late, with another state or with the
//! provider's refusal is refused and clears the flow cookie; an unreachable
//! provider is `identity_provider_failed`. A sign-in made by single sign-on
//! (a console sign-in row naming a member, no token) follows the member's role
//! as it changes and ends with their removal. The whole flow against a real
//! OpenID provider runs in Chromium (extension/e2e/console-sso.test.mjs).

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_server::auth::secret;
use latchkey_server::store::ConsoleSessionRecord;
use latchkey_testkit::console::ConsoleClient;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::json;

/// A server offering one provider whose issuer does not answer (a port that
/// was free a moment ago).
async fn with_provider(backend: Backend) -> TestServer {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let issuer = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let section = format!(
        r#"
        [[sso]]
        id = "acme"
        label = "Acme ID"
        issuer = "{issuer}"
        client_id = "latchkey"
        client_secret = "s3cret-never-shown"
        team = "default"
        allowed_domains = ["acme.example"]
        "#
    );
    TestServer::builder(backend)
        .config(move |c| c.console = toml::from_str(&section).expect("console section"))
        .start()
        .await
        .expect("server")
}

/// The `Set-Cookie` values of an answer.
fn set_cookies(page: &latchkey_testkit::console::Page) -> Vec<String> {
    page.headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect()
}

fn clears_the_flow_cookie(page: &latchkey_testkit::console::Page) -> bool {
    set_cookies(page)
        .iter()
        .any(|c| c.starts_with("latchkey_sso=;") && c.contains("Max-Age=0"))
}

async fn what_did_not_start_here_is_refused(backend: Backend) {
    let server = with_provider(backend).await;
    let web = server.console();
    let page = web.get("/console/sign-in").await.expect("page");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#"href="/console/sign-in/sso/acme">Sign in with Acme ID</a>"#),
        "{}",
        page.body
    );
    assert!(!page.body.contains("s3cret"), "the secret is never shown");

    let unknown = web.get("/console/sign-in/sso/nope").await.expect("answer");
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // The provider does not answer: said on the page, with the stable code.
    let down = web.get("/console/sign-in/sso/acme").await.expect("answer");
    assert_eq!(down.status, 502, "{}", down.body);
    assert!(
        down.body.contains("identity_provider_failed"),
        "{}",
        down.body
    );
    assert!(down.body.contains("could not be read"), "{}", down.body);

    let callback = "/console/sign-in/sso/acme/callback";
    let no_cookie = web
        .get(&format!("{callback}?code=c&state=s"))
        .await
        .expect("answer");
    assert_eq!(no_cookie.status, 400, "{}", no_cookie.body);
    assert!(no_cookie.body.contains("start again"), "{}", no_cookie.body);
    assert!(
        no_cookie.body.contains("Sign in with Acme ID"),
        "the page again"
    );
    assert!(
        clears_the_flow_cookie(&no_cookie),
        "{:?}",
        set_cookies(&no_cookie)
    );

    let now = server.clock().now_ms();
    let with_flow = |started: i64, provider: &str| {
        let mut c = web.clone();
        c.cookie = Some(format!(
            "latchkey_sso={provider}.{started}.the-state.the-nonce.the-verifier-0123456789"
        ));
        c
    };
    for (client, query, status, says) in [
        (
            with_flow(now, "acme"),
            "code=c&state=another",
            400,
            "start again",
        ),
        (
            with_flow(now - 11 * 60_000, "acme"),
            "code=c&state=the-state",
            400,
            "start again",
        ),
        (
            with_flow(now, "other"),
            "code=c&state=the-state",
            400,
            "start again",
        ),
        (
            with_flow(now, "acme"),
            "state=the-state",
            400,
            "start again",
        ),
        (
            with_flow(now, "acme"),
            "state=the-state&error=access_denied&error_description=The+person+said+no%0A%1B",
            403,
            "did not sign you in: The person said no",
        ),
    ] {
        let page = client
            .get(&format!("{callback}?{query}"))
            .await
            .expect("answer");
        assert_eq!(page.status, status, "{query}: {}", page.body);
        assert!(page.body.contains(says), "{query}: {}", page.body);
        assert!(clears_the_flow_cookie(&page), "{query}");
        assert!(
            !set_cookies(&page)
                .iter()
                .any(|c| c.starts_with("latchkey_console=")),
            "{query}: not signed in"
        );
    }
    // The right state, but the provider cannot be reached to trade the code.
    let page = with_flow(now, "acme")
        .get(&format!("{callback}?code=c&state=the-state"))
        .await
        .expect("answer");
    assert_eq!(page.status, 502, "{}", page.body);
    assert!(clears_the_flow_cookie(&page));
}

backend_tests!(
    what_did_not_start_here_is_refused,
    what_did_not_start_here_is_refused
);

/// A console client signed in as `member_id` the way a finished single sign-on
/// leaves it: a sign-in row naming the member, no token.
async fn signed_in_as_member(server: &TestServer, member_id: &str) -> ConsoleClient {
    let tenant = server.default_tenant_id().await.expect("tenant");
    let cookie = secret::random_secret();
    let now = server.clock().now_ms();
    server
        .state()
        .store
        .put_console_session(
            &ConsoleSessionRecord {
                id_hash: secret::hash(&cookie),
                tenant_id: tenant,
                token_hash: None,
                member_id: Some(member_id.to_owned()),
                created_at: now,
                expires_at: now + 3_600_000,
            },
            now,
        )
        .await
        .expect("sign-in row");
    let mut web = server.console();
    web.cookie = Some(format!("latchkey_console={cookie}"));
    web
}

async fn a_member_signed_in_by_sso_has_their_role_until_removed(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, _bob) = admin.alice_and_bob().await.expect("members");
    let web = signed_in_as_member(&server, &alice.id).await;

    let devices = web.get("/console/devices").await.expect("devices");
    assert_eq!(devices.status, 200, "{}", devices.body);
    assert!(
        devices.body.contains(&alice.display_name),
        "their name in the frame"
    );
    assert_eq!(
        web.get("/console/members").await.expect("members").status,
        403
    );

    // Made an admin: the next request is an admin's.
    let path = format!("/v1/admin/members/{}", alice.id);
    let (status, body) = admin
        .raw(Method::PATCH, &path, Some(json!({"role": "admin"})))
        .await
        .expect("patch");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "admin");
    let members = web.get("/console/members").await.expect("members");
    assert_eq!(members.status, 200, "{}", members.body);

    // What they do there is theirs in the audit, not a token's.
    let csrf = members.csrf().expect("csrf");
    let added = web
        .post(
            "/console/members",
            &[
                ("csrf", &csrf),
                ("name", "Carol"),
                ("email", "carol@example.com"),
            ],
        )
        .await
        .expect("add");
    assert_eq!(added.status, 303, "{}", added.body);
    let actor = format!("member:{}", alice.id);
    assert!(
        admin
            .audit_has(std::time::Duration::from_secs(10), &["member.add", &actor])
            .await
    );
    assert!(
        admin
            .audit_has(
                std::time::Duration::from_secs(10),
                &["member.role", "member to admin"]
            )
            .await
    );

    // Removed: the cookie stops working at once.
    let (status, _) = admin
        .raw(Method::DELETE, &path, None)
        .await
        .expect("remove");
    assert_eq!(status, 200);
    let after = web.get("/console/devices").await.expect("devices");
    assert_eq!(after.status, 303);
    assert_eq!(after.location(), Some("/console/sign-in"));
    // A sign-in that finished just after the removal (its row written after the
    // removal deleted theirs) does not work either.
    let late = signed_in_as_member(&server, &alice.id).await;
    let page = late.get("/console/devices").await.expect("devices");
    assert_eq!(page.status, 303);
    assert_eq!(page.location(), Some("/console/sign-in"));
}

backend_tests!(
    a_member_signed_in_by_sso_has_their_role_until_removed,
    a_member_signed_in_by_sso_has_their_role_until_removed
);

async fn roles_change_by_the_rules(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("members");
    let patch = |id: String, body: serde_json::Value| {
        let admin = admin.clone();
        async move {
            admin
                .raw(
                    Method::PATCH,
                    &format!("/v1/admin/members/{id}"),
                    Some(body),
                )
                .await
                .expect("patch")
        }
    };
    // The only owner stays one; with a second owner, the first may step down.
    assert_eq!(
        patch(alice.id.clone(), json!({"role": "owner"})).await.0,
        200
    );
    let (status, body) = patch(alice.id.clone(), json!({"role": "member"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("only owner")
    );
    assert_eq!(patch(bob.id.clone(), json!({"role": "owner"})).await.0, 200);
    assert_eq!(
        patch(alice.id.clone(), json!({"role": "member"})).await.0,
        200
    );

    // A bad role, an unknown field, an unknown or another team's id.
    let (status, body) = patch(bob.id.clone(), json!({"role": "king"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = patch(bob.id.clone(), json!({"role": "admin", "x": 1})).await;
    assert_eq!(status, 400);
    let (unknown, unknown_body) =
        patch("mem_doesnotexist000000000".into(), json!({"role": "admin"})).await;
    assert_eq!(unknown, 404);
    let other_admin = server.admin_with(&server.new_tenant("other").await.expect("tenant"));
    let (foreign, foreign_body) = other_admin
        .raw(
            Method::PATCH,
            &format!("/v1/admin/members/{}", bob.id),
            Some(json!({"role": "member"})),
        )
        .await
        .expect("patch");
    assert_eq!(foreign, 404);
    assert_eq!(
        foreign_body, unknown_body,
        "a foreign id answers like an unknown one"
    );
    let members: serde_json::Value = admin
        .raw(Method::GET, "/v1/admin/members", None)
        .await
        .expect("list")
        .1;
    let bob_now = members["members"]
        .as_array()
        .expect("members")
        .iter()
        .find(|m| m["id"] == bob.id.as_str())
        .expect("bob");
    assert_eq!(bob_now["role"], "owner", "nothing changed");
}

backend_tests!(roles_change_by_the_rules, roles_change_by_the_rules);
