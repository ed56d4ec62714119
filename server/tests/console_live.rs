//! The console's live updates on the real server, both backends (docs/console.md,
//! "Live updates"): the device list's stream sends the list again when a browser
//! comes online, a session starts or ends on it, and it is revoked; a sign-out
//! ends the stream at once.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use latchkey_testkit::{Backend, EventStream, TestServer, backend_tests};

/// Read list updates until one satisfies `want`; each must come within the read
/// deadline.
async fn until(live: &mut EventStream, what: &str, want: impl Fn(&str) -> bool) -> String {
    loop {
        let (name, data) = live
            .next_event()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(name, "list");
        let html = data["html"].as_str().expect("html").to_owned();
        if want(&html) {
            return html;
        }
    }
}

/// The `<tr>` of `device` in `html`.
fn row<'a>(html: &'a str, device: &str) -> Option<&'a str> {
    let at = html.find(&format!(r#"data-device="{device}""#))?;
    let rest = &html[at..];
    Some(&rest[..rest.find("</tr>")?])
}

async fn the_device_list_follows_browsers_and_sessions_live(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let mut web = server.console();
    assert_eq!(
        web.sign_in(&server.admin_token).await.expect("in").status,
        303
    );

    // Signing out ends that sign-in's stream at once. First, while nothing else
    // happens on the server that would wake the stream anyway.
    let mut other = server.console();
    assert_eq!(
        other.sign_in(&server.admin_token).await.expect("in").status,
        303
    );
    let csrf = other
        .get("/console/devices")
        .await
        .expect("page")
        .csrf()
        .expect("csrf");
    let mut ending = other.stream("/console/devices/live").await.expect("stream");
    until(&mut ending, "the list as it is", |h| {
        h.contains("No browsers yet")
    })
    .await;
    let out = other
        .post("/console/sign-out", &[("csrf", &csrf)])
        .await
        .expect("out");
    assert_eq!(out.status, 303);
    assert!(ending.next().await.expect("the stream ends").is_none());

    let mut live = web.stream("/console/devices/live").await.expect("stream");
    until(&mut live, "the list as it is", |h| {
        h.contains("No browsers yet")
    })
    .await;

    // A browser comes online; then a session starts on it and ends.
    let (device, _browser) = server
        .new_browser(Arc::new(|_| None))
        .await
        .expect("browser");
    let online =
        |h: &str| row(h, &device).is_some_and(|r| r.contains("Online") && r.contains("<td>0</td>"));
    until(&mut live, "online", online).await;
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(Some(&device)).await.expect("session").id;
    let busy = |h: &str| row(h, &device).is_some_and(|r| r.contains("<td>1</td>"));
    until(&mut live, "one session", busy).await;
    agent.stop(&session).await.expect("stop");
    until(&mut live, "no session", online).await;

    // Revoked.
    admin.revoke(&device).await.expect("revoke");
    let revoked = |h: &str| row(h, &device).is_some_and(|r| r.contains("Revoked"));
    until(&mut live, "revoked", revoked).await;
    server.stop().await;
}

backend_tests!(
    the_device_list_follows_browsers_and_sessions_live,
    the_device_list_follows_browsers_and_sessions_live
);
