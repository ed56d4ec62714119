//! `/v1/me/audit` and the console's Activity page on the real server, both
//! backends (docs/people.md, "Their own audit"): a person sees the rows about
//! their own browsers and the sessions on them, and every call of one such
//! session; another person's browser and sessions are not there, and asking for
//! another person's session answers exactly as an unknown one.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};
use serde_json::{Value, json};

fn rows(list: &Value) -> Vec<String> {
    list["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["action"].as_str().unwrap_or_default(),
                e["target"].as_str().unwrap_or_default(),
                e["detail"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

async fn a_person_reads_what_happened_to_their_browsers_only(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let (_browsers, devices) = server
        .online_browsers_for(&[&alice.id, &bob.id])
        .await
        .expect("browsers");
    let agent = server.new_agent().await.expect("agent");
    let hers = agent.start(Some(&devices[0])).await.expect("session").id;
    let his = agent.start(Some(&devices[1])).await.expect("session").id;
    for session in [&hers, &his] {
        let done = agent
            .call(session, "tool.snapshot", json!({}))
            .await
            .expect("call");
        assert!(done.is_ok(), "{}", done.body);
    }
    // The call rows are committed by the group commit right after the answer.
    let call_row = format!("session:{hers}");
    assert!(
        admin
            .audit_has(Duration::from_secs(10), &["session.call", &call_row])
            .await
    );
    let as_alice = server.admin_with(&admin.member_token(&alice.id).await.expect("token"));
    let as_bob = server.admin_with(&admin.member_token(&bob.id).await.expect("token"));

    let (status, list) = as_alice
        .raw(Method::GET, "/v1/me/audit", None)
        .await
        .expect("audit");
    assert_eq!(status, 200, "{list}");
    let seen = rows(&list).join("\n");
    let her_device = format!("device:{}", devices[0]);
    let his_device = format!("device:{}", devices[1]);
    for want in [
        format!("device.pair {her_device}"),
        format!("device.connect {her_device}"),
        format!("session.start session:{hers} {her_device}"),
    ] {
        assert!(seen.contains(&want), "{want} missing from:\n{seen}");
    }
    assert!(!seen.contains(&his_device), "his browser: {seen}");
    assert!(!seen.contains(&his), "his session: {seen}");
    assert!(
        !seen.contains("session.call"),
        "calls are a click further: {seen}"
    );

    // One session: every row, its call included.
    let (status, one) = as_alice
        .raw(Method::GET, &format!("/v1/me/audit?session={hers}"), None)
        .await
        .expect("session");
    assert_eq!(status, 200, "{one}");
    let seen = rows(&one);
    assert!(
        seen.iter()
            .any(|r| r.starts_with(&format!("session.call session:{hers} tool.snapshot"))),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|r| r.contains(&format!("session:{hers}"))),
        "{seen:?}"
    );

    // His session, asked by her: exactly an unknown session's answer.
    let (status, refused) = as_alice
        .raw(Method::GET, &format!("/v1/me/audit?session={his}"), None)
        .await
        .expect("answer");
    let (_, unknown) = as_alice
        .raw(
            Method::GET,
            "/v1/me/audit?session=0123456789abcdef0123456789abcdef",
            None,
        )
        .await
        .expect("answer");
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused, unknown);
    let (status, _) = as_alice
        .raw(Method::GET, "/v1/me/audit?session=%00", None)
        .await
        .expect("answer");
    assert_eq!(status, 404);
    let (status, _) = as_alice
        .raw(Method::GET, "/v1/me/audit?limit=0", None)
        .await
        .expect("answer");
    assert_eq!(status, 400);

    // His own view holds his, and paging walks it without repeats.
    let mut before: Option<i64> = None;
    let mut all = Vec::new();
    for _ in 0..20 {
        let path = match before {
            Some(b) => format!("/v1/me/audit?limit=1&before={b}"),
            None => "/v1/me/audit?limit=1".to_owned(),
        };
        let (status, page) = as_bob.raw(Method::GET, &path, None).await.expect("page");
        assert_eq!(status, 200, "{page}");
        all.extend(rows(&page));
        match page["next_before"].as_i64() {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    assert!(all.iter().any(|r| r.contains(&his)), "{all:?}");
    assert!(!all.iter().any(|r| r.contains(&hers)), "{all:?}");
    let (_, whole) = as_bob
        .raw(Method::GET, "/v1/me/audit", None)
        .await
        .expect("all");
    assert_eq!(all, rows(&whole), "pages of one are the whole list");

    // The console shows her the same, with a link into the session.
    let web = server
        .console_signed_in(&admin.member_token(&alice.id).await.expect("token"))
        .await
        .expect("in");
    let page = web.get("/console/activity").await.expect("page");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains(&format!(r#"href="/console/activity?session={hers}""#)),
        "{}",
        page.body
    );
    assert!(!page.body.contains(&his), "{}", page.body);
    let one = web
        .get(&format!("/console/activity?session={hers}"))
        .await
        .expect("page");
    assert_eq!(one.status, 200);
    assert!(one.body.contains("tool.snapshot"), "{}", one.body);
    let theirs = web
        .get(&format!("/console/activity?session={his}"))
        .await
        .expect("page");
    assert_eq!(theirs.status, 404, "{}", theirs.body);

    // The admin's Audit page leads from a session to all of its rows.
    let admin_web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("in");
    let audit = admin_web.get("/console/audit").await.expect("page");
    assert!(
        audit
            .body
            .contains(&format!(r#"href="/console/audit?target=session%3A{hers}""#)),
        "{}",
        audit.body
    );

    // Agent and plain admin tokens have no person, so no such trail.
    let (status, _) = server
        .admin_with(&server.admin_token)
        .raw(Method::GET, "/v1/me/audit", None)
        .await
        .expect("answer");
    assert_eq!(status, 403);
}

backend_tests!(
    a_person_reads_what_happened_to_their_browsers_only,
    a_person_reads_what_happened_to_their_browsers_only
);
