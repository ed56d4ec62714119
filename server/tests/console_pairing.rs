//! The console's Pair a browser page on the real server, both backends
//! (docs/console.md, "Pair a browser"): an admin makes a link for a member, shown
//! once with its QR code, and a real pairing through it gives that member's
//! browser; pending links are listed and voided (with the CSRF token only), and a
//! voided link pairs nothing; a member's links are always their own, and they
//! cannot void anyone else's.

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_protocol::api::DeviceView;
use latchkey_testkit::console::Page;
use latchkey_testkit::{Backend, TestServer, backend_tests};

/// The link shown once on `page`, unescaped.
fn shown_link(page: &Page) -> String {
    let at = page
        .body
        .find(r#"id="pairing-link""#)
        .expect("the link field");
    let rest = &page.body[at..];
    let value = &rest[rest.find(r#"value=""#).expect("value") + 7..];
    let raw = &value[..value.find('"').expect("end")];
    raw.replace("&#47;", "/")
        .replace("&#x2f;", "/")
        .replace("&#35;", "#")
        .replace("&amp;", "&")
}

/// The pending link ids on `page`, in order.
fn pending_ids(page: &Page) -> Vec<String> {
    page.body
        .split(r#"data-pairing=""#)
        .skip(1)
        .map(|rest| rest[..rest.find('"').expect("end")].to_owned())
        .collect()
}

async fn links_made_in_the_console_pair_the_right_browser_and_void(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let mut web = server.console();
    assert_eq!(
        web.sign_in(&server.admin_token).await.expect("in").status,
        303
    );

    let page = web.get("/console/pair").await.expect("page");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("No links waiting"), "{}", page.body);
    assert!(
        page.body
            .contains(&format!(r#"<option value="{}">"#, alice.id))
    );
    let csrf = page.csrf().expect("csrf");

    // A link for Alice: shown once, with its QR code, and it pairs her browser.
    let made = web
        .post(
            "/console/pair",
            &[
                ("csrf", &csrf),
                ("member", &alice.id),
                ("label", "Alice+laptop"),
                ("ttl_secs", "300"),
            ],
        )
        .await
        .expect("made");
    assert_eq!(made.status, 201, "{}", made.body);
    assert!(made.body.contains(r#"src="data:image/svg+xml;base64,"#));
    let link = shown_link(&made);
    assert!(
        link.starts_with(&format!("{}/extension#", server.public_base())),
        "{link}"
    );
    let mut ext = server.extension_from_link(&link).expect("ext");
    let device = ext.pair().await.expect("pair").device_id;
    let view: DeviceView = admin.device(&device).await.expect("device");
    assert_eq!(view.owner.map(|o| o.id), Some(alice.id.clone()));
    assert_eq!(view.label, "Alice laptop");

    // Another, listed until voided; a voided link pairs nothing.
    let made = web
        .post(
            "/console/pair",
            &[("csrf", &csrf), ("member", &bob.id), ("ttl_secs", "900")],
        )
        .await
        .expect("made");
    assert_eq!(made.status, 201);
    let bobs_link = shown_link(&made);
    let page = web.get("/console/pair").await.expect("page");
    let ids = pending_ids(&page);
    assert_eq!(ids.len(), 1, "the used link is gone, Bob's waits: {ids:?}");
    assert!(page.body.contains("Bob &#60;bob@example.com&#62;"));
    let void = format!("/console/pairings/{}/void", ids[0]);
    assert_eq!(web.post(&void, &[]).await.expect("answer").status, 400);
    assert_eq!(
        web.post(&void, &[("csrf", &"f".repeat(64))])
            .await
            .expect("answer")
            .status,
        403
    );
    assert_eq!(
        pending_ids(&web.get("/console/pair").await.expect("page")),
        ids
    );
    let done = web.post(&void, &[("csrf", &csrf)]).await.expect("void");
    assert_eq!((done.status, done.location()), (303, Some("/console/pair")));
    assert!(pending_ids(&web.get("/console/pair").await.expect("page")).is_empty());
    let mut late = server.extension_from_link(&bobs_link).expect("ext");
    assert!(late.pair().await.is_err(), "a voided link pairs nothing");

    // Longer than the server allows: refused with the API's code, nothing made.
    let long = web
        .post("/console/pair", &[("csrf", &csrf), ("ttl_secs", "86400")])
        .await
        .expect("answer");
    assert_eq!(long.status, 400);
    assert!(long.body.contains("invalid_params"), "{}", long.body);
    assert!(pending_ids(&web.get("/console/pair").await.expect("page")).is_empty());

    // A member's link is always for themselves; they cannot void an admin's.
    let admins = web
        .post(
            "/console/pair",
            &[("csrf", &csrf), ("member", &alice.id), ("ttl_secs", "300")],
        )
        .await
        .expect("made");
    assert_eq!(admins.status, 201);
    let admins_id = pending_ids(&web.get("/console/pair").await.expect("page"))[0].clone();
    let mut as_bob = server.console();
    let token = admin.member_token(&bob.id).await.expect("token");
    assert_eq!(as_bob.sign_in(&token).await.expect("in").status, 303);
    let page = as_bob.get("/console/pair").await.expect("page");
    assert!(
        !page.body.contains(r#"<select id="member""#),
        "members pick no one"
    );
    assert!(
        pending_ids(&page).is_empty(),
        "Alice's link is not Bob's to see"
    );
    let bob_csrf = page.csrf().expect("csrf");
    let made = as_bob
        .post(
            "/console/pair",
            &[
                ("csrf", &bob_csrf),
                ("member", &alice.id),
                ("ttl_secs", "300"),
            ],
        )
        .await
        .expect("made");
    assert_eq!(made.status, 201);
    let mut his = server.extension_from_link(&shown_link(&made)).expect("ext");
    let device = his.pair().await.expect("pair").device_id;
    let view: DeviceView = admin.device(&device).await.expect("device");
    assert_eq!(view.owner.map(|o| o.id), Some(bob.id.clone()));
    let refused = as_bob
        .post(
            &format!("/console/pairings/{admins_id}/void"),
            &[("csrf", &bob_csrf)],
        )
        .await
        .expect("answer");
    assert_eq!(refused.status, 404);
    assert!(pending_ids(&web.get("/console/pair").await.expect("page")).contains(&admins_id));
    server.stop().await;
}

backend_tests!(
    links_made_in_the_console_pair_the_right_browser_and_void,
    links_made_in_the_console_pair_the_right_browser_and_void
);
