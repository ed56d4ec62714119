//! The web console on the real server, both backends (docs/console.md): sign-in
//! with a token and what the cookie is, the security headers, the Devices page
//! for an admin and for a member, a revocation that asks first and closes the
//! live connection, CSRF and cross-site refusals that change nothing, sign-out,
//! and a removed member's cookie that stops working at once.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::reqwest::header::{CONTENT_SECURITY_POLICY, SET_COOKIE, X_FRAME_OPTIONS};
use latchkey_testkit::{Backend, TestServer, backend_tests};

const DEADLINE: Duration = Duration::from_secs(10);

async fn an_admin_signs_in_sees_the_team_and_revokes_a_browser(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let (ext, hers) = server.paired_for(&alice.id).await.expect("paired");
    let mut socket = ext.connect_online().await.expect("online");
    let mut web = server.console();

    // Signed out: every page leads to the sign-in page, which is framed by nobody.
    let page = web.get("/console/devices").await.expect("devices");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/sign-in"))
    );
    let page = web.get("/console/sign-in").await.expect("sign-in");
    assert_eq!(page.status, 200);
    let csp = page.headers[CONTENT_SECURITY_POLICY].to_str().expect("csp");
    for part in [
        "default-src 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers[X_FRAME_OPTIONS], "DENY");

    // Wrong tokens are refused on the page, with no cookie.
    let page = web.sign_in("lk_not-a-real-token").await.expect("answer");
    assert_eq!(page.status, 401);
    assert!(
        page.body.contains("unknown, expired or revoked"),
        "{}",
        page.body
    );
    assert!(page.headers.get(SET_COOKIE).is_none());
    let agent = admin
        .create_token("bot", Role::Agent)
        .await
        .expect("agent token");
    let page = web.sign_in(&agent.token).await.expect("answer");
    assert_eq!(page.status, 401);
    assert!(page.body.contains("agent token"), "{}", page.body);
    assert!(web.cookie.is_none());

    // The admin token signs in; the cookie is HttpOnly, Lax, for /console only.
    let page = web.sign_in(&server.admin_token).await.expect("sign in");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/devices"))
    );
    let set = page.headers[SET_COOKIE]
        .to_str()
        .expect("cookie")
        .to_owned();
    for part in ["HttpOnly", "SameSite=Lax", "Path=/console", "Max-Age=43200"] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    assert!(
        !set.contains(&server.admin_token),
        "the token is not the cookie"
    );

    let page = web.get("/console/devices").await.expect("devices");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!(r#"data-device="{hers}""#)),
        "{}",
        page.body
    );
    assert!(page.body.contains("alice@example.com"));
    assert!(page.body.contains("Online"));
    assert!(page.body.contains("in 89 days") || page.body.contains("in 90 days"));
    let csrf = page.csrf().expect("csrf token");

    // The confirmation names the browser and its owner.
    let revoke = format!("/console/devices/{hers}/revoke");
    let page = web.get(&revoke).await.expect("confirm");
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("<strong>Alice &#60;alice@example.com&#62;</strong>"),
        "{}",
        page.body
    );

    // Without the CSRF token, with a wrong one, or from another site: refused,
    // and the browser stays live.
    let missing = web.post(&revoke, &[]).await.expect("answer");
    assert_eq!(missing.status, 400);
    let wrong = web
        .post(&revoke, &[("csrf", &"0".repeat(64))])
        .await
        .expect("answer");
    assert_eq!(wrong.status, 403);
    assert!(wrong.body.contains("permission_denied"), "{}", wrong.body);
    let cross = web
        .post_from(&revoke, &[("csrf", &csrf)], "cross-site")
        .await
        .expect("answer");
    assert_eq!(cross.status, 403);
    assert_eq!(
        format!("{:?}", admin.device(&hers).await.expect("device").status),
        "Active"
    );

    // With it: revoked, and the live connection closes at once.
    let done = web.post(&revoke, &[("csrf", &csrf)]).await.expect("revoke");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/devices"))
    );
    assert_eq!(
        socket.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );
    let page = web.get("/console/devices").await.expect("devices");
    assert!(page.body.contains("Revoked"), "{}", page.body);
    assert!(
        !page.body.contains(&revoke),
        "no revoke link for a revoked browser"
    );
    assert!(
        admin.audit_has(DEADLINE, &["device.revoke", &hers]).await,
        "the revocation is in the audit trail"
    );

    // Signing out ends the sign-in in the store: the old cookie leads to sign-in.
    let out = web
        .post("/console/sign-out", &[("csrf", &csrf)])
        .await
        .expect("out");
    assert_eq!(
        (out.status, out.location()),
        (303, Some("/console/sign-in"))
    );
    let page = web.get("/console/devices").await.expect("devices");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/sign-in"))
    );
    server.stop().await;
}

backend_tests!(
    an_admin_signs_in_sees_the_team_and_revokes_a_browser,
    an_admin_signs_in_sees_the_team_and_revokes_a_browser
);

async fn a_member_sees_only_their_own_and_removal_ends_their_sign_in(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let mut ids = Vec::new();
    for member in [&alice.id, &bob.id] {
        ids.push(server.paired_for(member).await.expect("paired").1);
    }
    let (hers, his) = (&ids[0], &ids[1]);
    let mut web = server.console();
    let token = admin.member_token(&alice.id).await.expect("token");
    let page = web.sign_in(&token).await.expect("sign in");
    assert_eq!(page.status, 303);

    let page = web.get("/console/devices").await.expect("devices");
    assert!(page.body.contains("My browsers"));
    assert!(page.body.contains(&format!(r#"data-device="{hers}""#)));
    assert!(
        !page.body.contains(his.as_str()),
        "Bob's browser is not shown"
    );
    assert!(!page.body.contains("bob@example.com"));
    let csrf = page.csrf().expect("csrf");

    // Bob's browser answers exactly as an unknown one, and stays live.
    let foreign = web
        .get(&format!("/console/devices/{his}/revoke"))
        .await
        .expect("answer");
    let unknown = web
        .get("/console/devices/0123456789abcdef0123456789abcdef/revoke")
        .await
        .expect("answer");
    assert_eq!((foreign.status, &foreign.body), (404, &unknown.body));
    let tried = web
        .post(
            &format!("/console/devices/{his}/revoke"),
            &[("csrf", &csrf)],
        )
        .await
        .expect("answer");
    assert_eq!(tried.status, 404);
    assert_eq!(
        format!("{:?}", admin.device(his).await.expect("his").status),
        "Active"
    );

    // Removing Alice ends her sign-in at once.
    let (status, body) = admin
        .raw(
            Method::DELETE,
            &format!("/v1/admin/members/{}", alice.id),
            None,
        )
        .await
        .expect("remove");
    assert_eq!(status, 200, "{body}");
    let page = web.get("/console/devices").await.expect("devices");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/sign-in"))
    );
    server.stop().await;
}

backend_tests!(
    a_member_sees_only_their_own_and_removal_ends_their_sign_in,
    a_member_sees_only_their_own_and_removal_ends_their_sign_in
);

/// Behind TLS the cookie is `Secure`; sign-in attempts are limited per address,
/// and a revoked token's sign-in ends with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_cookie_is_secure_and_sign_ins_are_limited() {
    let server = TestServer::builder(Backend::Sqlite)
        .tls(true)
        .limits(|l| l.console_sign_ins_per_minute = 3)
        .start()
        .await
        .expect("server");
    let admin = server.admin();
    let member = admin
        .add_member("Carol", "carol@example.com")
        .await
        .expect("carol");
    let token = admin.member_token(&member.id).await.expect("token");
    let mut web = server.console();
    let page = web.sign_in(&token).await.expect("sign in");
    assert_eq!(page.status, 303);
    let set = page.headers[SET_COOKIE].to_str().expect("cookie");
    assert!(set.contains("; Secure"), "{set}");
    assert_eq!(web.get("/console/devices").await.expect("page").status, 200);

    // Revoking the token ends the sign-in made with it.
    let tokens = admin
        .raw(Method::GET, "/v1/admin/tokens", None)
        .await
        .expect("tokens")
        .1;
    let id = tokens["tokens"]
        .as_array()
        .expect("list")
        .iter()
        .find(|t| t["member_id"] == member.id.as_str())
        .and_then(|t| t["id"].as_str())
        .expect("the member's token")
        .to_owned();
    assert_eq!(admin.revoke_token(&id).await.expect("revoke").0, 200);
    let page = web.get("/console/devices").await.expect("page");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/sign-in"))
    );

    // Two more tries use up the minute's three; the fourth is refused.
    let mut stranger = server.console();
    for _ in 0..2 {
        assert_eq!(
            stranger.sign_in("lk_wrong").await.expect("answer").status,
            401
        );
    }
    let refused = stranger.sign_in(&server.admin_token).await.expect("answer");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.body.contains("rate_limited"));
    assert!(refused.headers.get("retry-after").is_some());
    assert!(stranger.cookie.is_none());
    server.stop().await;
}
