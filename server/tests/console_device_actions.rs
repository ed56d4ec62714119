//! Renaming a browser and revoking every browser from the console, on the real
//! server, both backends (docs/console.md, "Devices"): a label the API refuses is
//! shown beside the field and changes nothing; revoke-all does nothing until the
//! team's name is typed, then closes every live connection with 4001 and voids
//! the unused links; members and forged forms are refused.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::extension::Ended;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};

const DEADLINE: Duration = Duration::from_secs(10);

async fn an_admin_renames_a_browser_and_others_cannot(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let mut ext = server.new_extension().await.expect("extension");
    let id = ext.pair().await.expect("pair").device_id;
    let before = admin.device(&id).await.expect("device").label;
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let path = format!("/console/devices/{id}/rename");
    let devices = web.get("/console/devices").await.expect("devices");
    assert!(devices.body.contains(&path), "a Rename link");
    let form = web.get(&path).await.expect("form");
    assert_eq!(form.status, 200);
    assert!(
        form.body.contains(&format!(r#"value="{before}""#)),
        "{}",
        form.body
    );
    let csrf = form.csrf().expect("csrf");

    // Refused labels: shown beside the field with what was typed; nothing changes.
    let long = "x".repeat(200);
    for typed in ["", "+++", "%01%02", long.as_str()] {
        let refused = web
            .post(&path, &[("csrf", &csrf), ("label", typed)])
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{typed}: {}", refused.body);
        assert!(refused.body.contains(r#"role="alert""#), "{}", refused.body);
        assert!(
            refused.body.contains(r#"id="device-label""#) && refused.body.contains("invalid"),
            "the form again, marked: {}",
            refused.body
        );
        assert_eq!(admin.device(&id).await.expect("device").label, before);
    }
    let forged = web
        .post(&path, &[("csrf", &"0".repeat(64)), ("label", "Forged")])
        .await
        .expect("answer");
    assert_eq!(forged.status, 403);

    let done = web
        .post(&path, &[("csrf", &csrf), ("label", "Kitchen+laptop")])
        .await
        .expect("rename");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/devices"))
    );
    assert_eq!(
        admin.device(&id).await.expect("device").label,
        "Kitchen laptop"
    );
    assert!(
        admin
            .audit_has(DEADLINE, &["device.rename", &format!("device:{id}")])
            .await
    );

    // A member, even the owner, renames nothing here (nor through the API).
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let token = admin.member_token(&alice.id).await.expect("token");
    let as_alice = server.console_signed_in(&token).await.expect("alice in");
    assert_eq!(as_alice.get(&path).await.expect("answer").status, 403);
    let page = as_alice.get("/console/devices").await.expect("page");
    let csrf = page.csrf().expect("csrf");
    let refused = as_alice
        .post(&path, &[("csrf", &csrf), ("label", "Mine")])
        .await
        .expect("answer");
    assert_eq!(refused.status, 403);
    assert_eq!(
        admin.device(&id).await.expect("device").label,
        "Kitchen laptop"
    );
    // An unknown id answers as any unknown id does.
    let unknown = web
        .get("/console/devices/dev_00000000000000000000000000000000/rename")
        .await
        .expect("answer");
    assert_eq!(unknown.status, 404);
    server.stop().await;
}

backend_tests!(
    an_admin_renames_a_browser_and_others_cannot,
    an_admin_renames_a_browser_and_others_cannot
);

async fn revoke_all_waits_for_the_teams_name_then_ends_every_browser(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let mut sockets = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut ext = server.new_extension().await.expect("extension");
        ids.push(ext.pair().await.expect("pair").device_id);
        sockets.push(ext.connect_online().await.expect("online"));
    }
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    admin.create_pairing_for(&alice.id).await.expect("link");
    let pending = || async {
        let (status, body) = admin
            .raw(Method::GET, "/v1/admin/pairings", None)
            .await
            .expect("pairings");
        assert_eq!(status, 200, "{body}");
        body["pairings"].as_array().map_or(0, Vec::len)
    };
    let before = pending().await;
    assert!(before >= 1);
    let active = || async {
        let mut n = 0;
        for id in &ids {
            n += usize::from(
                format!("{:?}", admin.device(id).await.expect("device").status) == "Active",
            );
        }
        n
    };

    // Members have no such page.
    let token = admin.member_token(&alice.id).await.expect("token");
    let as_alice = server.console_signed_in(&token).await.expect("alice in");
    assert_eq!(
        as_alice
            .get("/console/devices/revoke-all")
            .await
            .expect("answer")
            .status,
        403
    );
    let csrf = as_alice
        .get("/console/devices")
        .await
        .expect("page")
        .csrf()
        .expect("csrf");
    let refused = as_alice
        .post(
            "/console/devices/revoke-all",
            &[("csrf", &csrf), ("confirm", "default")],
        )
        .await
        .expect("answer");
    assert_eq!(refused.status, 403);
    assert_eq!(active().await, 2);

    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let devices = web.get("/console/devices").await.expect("devices");
    assert!(devices.body.contains("/console/devices/revoke-all"));
    let ask = web.get("/console/devices/revoke-all").await.expect("page");
    assert_eq!(ask.status, 200);
    assert!(ask.body.contains("2 active browsers"), "{}", ask.body);
    assert!(ask.body.contains("2 connected now"), "{}", ask.body);
    assert!(
        ask.body.contains("<strong>default</strong>"),
        "{}",
        ask.body
    );
    let csrf = ask.csrf().expect("csrf");

    // Anything but the team's name, or no CSRF token: nothing happens.
    for typed in ["", "Default", "defaul", "revoke+all"] {
        let refused = web
            .post(
                "/console/devices/revoke-all",
                &[("csrf", &csrf), ("confirm", typed)],
            )
            .await
            .expect("answer");
        assert_eq!(refused.status, 400, "{typed}: {}", refused.body);
        assert!(
            refused.body.contains("Nothing was revoked"),
            "{}",
            refused.body
        );
    }
    let forged = web
        .post(
            "/console/devices/revoke-all",
            &[("csrf", &"0".repeat(64)), ("confirm", "default")],
        )
        .await
        .expect("answer");
    assert_eq!(forged.status, 403);
    assert_eq!(active().await, 2);
    assert_eq!(pending().await, before);

    let done = web
        .post(
            "/console/devices/revoke-all",
            &[("csrf", &csrf), ("confirm", "+default+")],
        )
        .await
        .expect("revoke all");
    assert_eq!(
        (done.status, done.location()),
        (303, Some("/console/devices"))
    );
    for socket in &mut sockets {
        assert_eq!(
            socket.ended(DEADLINE).await.expect("closed"),
            Ended::Closed(4001)
        );
    }
    assert_eq!(active().await, 0);
    assert_eq!(pending().await, 0, "unused links voided");
    assert!(
        admin
            .audit_has(DEADLINE, &["device.revoke_all", "2 devices"])
            .await
    );
    server.stop().await;
}

backend_tests!(
    revoke_all_waits_for_the_teams_name_then_ends_every_browser,
    revoke_all_waits_for_the_teams_name_then_ends_every_browser
);
