//! The web console behind the real nginx with the shipped site file
//! (docs/console.md, docs/deploy.md): the pages reach latchkeyd, the cookie is
//! `Secure` since the public address is `wss://`, the client address nginx passes
//! is the one sign-ins are limited by, and a live list's first event arrives
//! through the proxy while the stream stays open (nginx does not buffer it).

#![allow(clippy::expect_used, clippy::panic)]

use latchkey_testkit::ConsoleClient;
use latchkey_testkit::nginx::start_behind_nginx;
use latchkey_testkit::reqwest::header::SET_COOKIE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_through_nginx() {
    let Some((server, nginx, certs)) = start_behind_nginx(None, |l| {
        l.console_sign_ins_per_minute = 2;
    })
    .await
    .expect("behind nginx") else {
        return;
    };
    let http = latchkey_testkit::http_builder()
        .tls_certs_only([
            latchkey_testkit::reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).expect("ca"),
        ])
        .redirect(latchkey_testkit::reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let base = format!("https://localhost:{}", nginx.port);
    let mut web = ConsoleClient::new(http.clone(), base.clone());

    let page = web.get("/console").await.expect("console");
    assert_eq!(
        (page.status, page.location()),
        (303, Some("/console/devices"))
    );
    let page = web.sign_in(&server.admin_token).await.expect("sign in");
    assert_eq!(page.status, 303, "{}", page.body);
    let set = page.headers[SET_COOKIE].to_str().expect("cookie");
    assert!(set.contains("; Secure"), "{set}");
    let page = web.get("/console/devices").await.expect("devices");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("No browsers yet"));

    // The first event of the live list comes through while the stream is open.
    let mut live = web.stream("/console/devices/live").await.expect("stream");
    let (name, data) = live
        .next_event()
        .await
        .expect("the first event through nginx");
    assert_eq!(name, "list");
    assert!(
        data["html"]
            .as_str()
            .expect("html")
            .contains("No browsers yet")
    );

    // Sign-ins are limited by the client's address as nginx passes it: a second
    // try from here uses up the budget of 2, a third is refused.
    let mut other = ConsoleClient::new(http, base);
    assert_eq!(other.sign_in("lk_wrong").await.expect("answer").status, 401);
    let refused = other.sign_in(&server.admin_token).await.expect("answer");
    assert_eq!(refused.status, 429, "{}", refused.body);
    drop(live);
    nginx.stop().await;
    server.stop().await;
}
