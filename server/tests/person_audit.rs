//! What the browser's person did, in the team's trail, on the real server, both
//! backends (docs/operations.md, "Audit"): Stop on an Agent Window, and "Stop all
//! agents", which the gateway advertises it reads (docs/protocol.md, "Latchkey's
//! additions") and then tells apart from a dropped connection.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_testkit::{AdminClient, Backend, SessionOnBrowser, TestServer, backend_tests};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);
use latchkey_testkit::admin::AUDIT_FIELDS as FIELDS;

/// Whether the trail comes to have a row with every one of `parts`.
async fn logged(admin: &AdminClient, parts: &[&str]) -> bool {
    admin.audit_has(DEADLINE, parts).await
}

async fn the_person_s_stop_and_kill_switch_are_in_the_trail(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    // The gateway says it reads the kill switch.
    let mut ext = server.new_extension().await.expect("extension");
    ext.pair().await.expect("pair");
    let mut socket = ext.connect().await.expect("connect").expect("upgrade");
    let answer = socket.handshake().await.expect("handshake");
    assert_eq!(
        answer.latchkey_features,
        Some(vec![
            "kill_switch".to_string(),
            "user_stop".to_string(),
            "unpair".to_string()
        ])
    );
    drop(socket);

    let (device, browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let agent = server.new_agent().await.expect("agent");
    // Named: the extension that only shook hands may still count as online.
    let first = agent.start(Some(&device)).await.expect("start").id;
    let second = agent.start(Some(&device)).await.expect("start").id;
    let mut events = agent.events(&second).await.expect("events");

    browser.event("session.user_interrupt", json!({"session_id": first}));
    let target = format!("session:{first}");
    let actor = format!("device:{device}");
    assert!(
        logged(
            &admin,
            &[
                "session.interrupt",
                &actor,
                &target,
                "interrupted by the person"
            ]
        )
        .await,
        "{:#?}",
        admin.audit_lines(100, &FIELDS).await
    );

    browser.event("latchkey.kill_switch", json!({}));
    browser.drop_connection();
    let (name, data) = events.next_event().await.expect("an event");
    assert_eq!(
        (name.as_str(), data["reason"].as_str()),
        ("session_ended", Some("kill_switch"))
    );
    let device_ref = format!("device:{device}");
    assert!(
        logged(
            &admin,
            &["device.kill_switch", &device_ref, "sessions ended: 2"]
        )
        .await
    );
    assert!(logged(&admin, &["device.disconnect", &device_ref, "kill_switch"]).await);
    for session in [&first, &second] {
        let target = format!("session:{session}");
        assert!(
            logged(&admin, &["session.end", &target, "kill_switch"]).await,
            "{:#?}",
            admin.audit_lines(100, &FIELDS).await
        );
    }
}
backend_tests!(
    person_audit,
    the_person_s_stop_and_kill_switch_are_in_the_trail
);

async fn a_dropped_connection_is_not_a_kill_switch(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let SessionOnBrowser {
        device,
        browser,
        agent,
        session,
    } = server
        .session_on_new_browser(Arc::new(|_| None))
        .await
        .expect("a session");
    let mut events = agent.events(&session).await.expect("events");
    browser.drop_connection();
    let (_, data) = events.next_event().await.expect("an event");
    assert_ne!(data["reason"], "kill_switch");
    let device_ref = format!("device:{device}");
    assert!(logged(&admin, &["device.disconnect", &device_ref]).await);
    let lines = admin.audit_lines(100, &FIELDS).await.expect("audit");
    assert!(
        !lines.iter().any(|l| l.contains("kill_switch")),
        "{lines:#?}"
    );
}
backend_tests!(dropped, a_dropped_connection_is_not_a_kill_switch);
