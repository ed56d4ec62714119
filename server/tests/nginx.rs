//! latchkeyd behind the real nginx (Debian's package) with `deploy/nginx/nginx.conf`
//! and `latchkey.conf` (testkit's `Nginx`) on loopback ports: pairing, a TLS WebSocket and an agent call through the proxy,
//! an idle connection outliving the proxy's read timeout thanks to heartbeats, the
//! client address as latchkeyd sees it (forged X-Forwarded-For ignored), and an
//! access log without secrets. Timeouts are scaled down 100× (300 s → 3 s).

#![allow(clippy::expect_used, clippy::panic)]

use std::net::IpAddr;
use std::time::Duration;

use latchkey_testkit::extension::{Ended, TEST_EXTENSION_ORIGIN};
use latchkey_testkit::nginx::start_behind_nginx;
use latchkey_testkit::{AdminClient, FakeAgent, FakeBrowser, FakeExtension, Nginx};
use serde_json::json;

const CLIENT: &str = "127.0.0.2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latchkeyd_behind_nginx() {
    let Some((server, nginx, certs)) = start_behind_nginx(Some("3s"), |_| {})
        .await
        .expect("behind nginx")
    else {
        return;
    };
    let port = nginx.port;
    let base = format!("https://localhost:{port}");
    let client_ip: IpAddr = CLIENT.parse().expect("ip");
    let http = latchkey_testkit::http_builder()
        .tls_certs_only([
            latchkey_testkit::reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).expect("ca"),
        ])
        .local_address(client_ip)
        .redirect(latchkey_testkit::reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let tls = certs.client_config().expect("tls");

    // Pairing through nginx, with the public URL as the link.
    let admin = AdminClient::new(http.clone(), base.clone(), server.admin_token.clone());
    let pairing = admin
        .create_pairing(Some("behind nginx"), None)
        .await
        .expect("pairing via nginx");
    assert!(
        pairing
            .link
            .starts_with(&format!("wss://localhost:{port}/extension#")),
        "{}",
        pairing.link
    );
    let mut ext =
        FakeExtension::from_link(&pairing.link, http.clone(), Some(tls.clone())).expect("link");
    ext.local_addr = Some(client_ip);
    let device = ext.pair().await.expect("pair through nginx").device_id;

    // The WebSocket through nginx over TLS, with a forged X-Forwarded-For.
    let token = ext.token.clone().expect("token");
    let protocol = format!("bsk-auth.{token}");
    let mut socket = ext
        .connect_with(
            &[
                ("sec-websocket-protocol", &protocol),
                ("origin", TEST_EXTENSION_ORIGIN),
                ("x-forwarded-for", "203.0.113.9"),
            ],
            None,
        )
        .await
        .expect("request")
        .expect("upgrade through nginx");
    assert_eq!(
        socket.protocol.as_deref(),
        Some(protocol.as_str()),
        "the subprotocol survives the proxy"
    );
    socket.handshake().await.expect("handshake");
    let browser = FakeBrowser::serve_default(socket);

    // An agent call relayed through nginx.
    let agent_token = admin
        .create_token("nginx-agent", latchkey_protocol::api::Role::Agent)
        .await
        .expect("token")
        .token;
    let agent = FakeAgent::new(http.clone(), base.clone(), agent_token.clone());
    let session = agent.start(Some(&device)).await.expect("session via nginx");
    let r = agent
        .call(&session.id, "tool.snapshot", json!({"n": 1}))
        .await
        .expect("call");
    assert!(r.is_ok(), "{:?}", r.body);

    // The MCP endpoint and the well-known documents through nginx.
    let post = |token: Option<&str>, body: serde_json::Value| {
        let mut request = http
            .post(format!("{base}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let refused = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await
    .expect("answer");
    assert_eq!(refused.status(), 401);
    let metadata_url = format!("https://localhost:{port}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        refused.headers()["www-authenticate"],
        format!("Bearer resource_metadata=\"{metadata_url}\"").as_str()
    );
    let metadata: serde_json::Value = http
        .get(&metadata_url)
        .send()
        .await
        .expect("metadata")
        .json()
        .await
        .expect("json");
    assert_eq!(
        metadata["resource"],
        format!("https://localhost:{port}/mcp")
    );
    let jwks = http
        .get(format!("{base}/.well-known/jwks.json"))
        .send()
        .await
        .expect("jwks");
    assert_eq!(jwks.status(), 200);
    let snapshot = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "browser_snapshot", "arguments": {}}});
    let called = post(Some(&agent_token), snapshot).await.expect("answer");
    assert_eq!(called.status(), 200);
    let answer: serde_json::Value = called.json().await.expect("JSON-RPC");
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    // Idle beyond nginx's (scaled) 3 s read timeout: heartbeats keep the socket
    // open. Another device's silent socket on the same proxy is cut, which proves
    // the timeout is live.
    let silent_link = admin
        .create_pairing(None, None)
        .await
        .expect("pairing")
        .link;
    let mut quiet =
        FakeExtension::from_link(&silent_link, http.clone(), Some(tls.clone())).expect("link");
    quiet.local_addr = Some(client_ip);
    quiet.pair().await.expect("pair");
    let mut silent = quiet.connect_online().await.expect("silent socket");
    for _ in 0..25 {
        browser.event("system.heartbeat", json!({}));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ended = silent
        .ended(Duration::from_secs(10))
        .await
        .expect("the silent socket is cut by the proxy");
    assert_eq!(
        ended,
        Ended::Dropped,
        "nginx closes the TCP connection without a WebSocket close"
    );
    let r = agent
        .call(&session.id, "tool.snapshot", json!({"n": 2}))
        .await
        .expect("call");
    assert!(
        r.is_ok(),
        "the heartbeating socket survived 5 s of agent silence: {:?}",
        r.body
    );

    // latchkeyd saw the real client, not the forged address.
    let (status, audit) = admin
        .raw(
            latchkey_testkit::reqwest::Method::GET,
            "/v1/admin/audit?limit=100",
            None,
        )
        .await
        .expect("audit");
    assert_eq!(status, 200);
    let details: Vec<String> = audit["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["action"] == "device.pair" || e["action"] == "device.connect")
        .map(|e| e["detail"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(details.len() >= 2, "{details:?}");
    for d in &details {
        assert!(
            d.contains(&format!("from {CLIENT}")),
            "latchkeyd must see the client address: {d}"
        );
        assert!(
            !d.contains("203.0.113.9"),
            "a forged X-Forwarded-For must not be believed: {d}"
        );
    }

    // The access log has the requests and nothing secret.
    let log = nginx.access_log();
    assert!(log.contains("POST /extension/authorize"), "{log}");
    assert!(log.contains("GET /extension HTTP/1.1\" 101"), "{log}");
    assert!(log.starts_with(CLIENT), "{log}");
    for secret in [
        ext.pairing_secret.as_str(),
        token.as_str(),
        server.admin_token.as_str(),
        agent_token.as_str(),
        "bsk-auth",
        "Bearer",
    ] {
        assert!(
            !log.contains(secret),
            "the access log must not contain {secret:?}"
        );
    }
    // Every route of the OpenAPI document reaches latchkeyd through the shipped
    // site file, the document itself included: none is left to nginx's own 404.
    // Last, since it revokes every device on the way.
    let doc: serde_json::Value = http
        .get(format!("{base}/openapi.json"))
        .send()
        .await
        .expect("document through nginx")
        .json()
        .await
        .expect("json");
    let mut routed = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        if path == "/" {
            continue; // Local mode only: never behind a proxy.
        }
        for (method, operation) in item.as_object().expect("item") {
            let Ok(method) =
                latchkey_testkit::reqwest::Method::from_bytes(method.to_uppercase().as_bytes())
            else {
                continue;
            };
            let mut request = http
                .request(
                    method.clone(),
                    format!("{base}{}", path.replace("{id}", "unknown-id")),
                )
                .bearer_auth(&server.admin_token);
            if operation.get("requestBody").is_some() {
                request = request.json(&json!({}));
            }
            let answer = request.send().await.expect("answer");
            let status = answer.status();
            let body = if path.ends_with("/events") {
                String::new()
            } else {
                answer.text().await.expect("body")
            };
            assert!(
                !(status == 404 && body.contains("nginx")),
                "{method} {path} stops at nginx: {body}"
            );
            routed += 1;
        }
    }
    assert!(routed >= 58, "{routed} operations through nginx");

    nginx.stop().await;
    server.stop().await;
}

/// The shipped site's cap on connections per client address (`limit_conn
/// latchkey_conn 200`, answered 429): an office behind one NAT address gets 200
/// browsers in, the 201st is refused 429 by nginx, and a browser from another
/// address still connects (docs/deploy.md, "Sizing nginx").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_gets_200_sockets_through_nginx_and_the_next_is_refused_429() {
    let Some((server, nginx, certs)) = start_behind_nginx(None, |l| {
        // Pairing happens straight at latchkeyd, from one address.
        l.authorize_per_minute = 60_000;
        l.max_unused_pairings = 1_000;
        l.upgrades_per_minute = 1_000_000;
    })
    .await
    .expect("behind nginx") else {
        return;
    };
    let tls = certs.client_config().expect("tls");
    let ws_url = format!("wss://localhost:{}/extension", nginx.port);
    let paired_from = |address: &str| {
        let (server, ws_url, tls) = (&server, ws_url.clone(), tls.clone());
        let address: IpAddr = address.parse().expect("ip");
        async move {
            let mut ext = server.new_extension().await.expect("extension");
            // The link names nginx; pairing goes to latchkeyd itself.
            ext.authorize_url = format!("{}/extension/authorize", server.http_base());
            ext.pair().await.expect("pair");
            ext.via(&ws_url, Some(tls));
            ext.local_addr = Some(address);
            ext
        }
    };

    let mut office = Vec::with_capacity(200);
    for _ in 0..200 {
        let ext = paired_from("127.0.0.3").await;
        office.push(ext.connect_online().await.expect("within the cap"));
    }
    let refused = paired_from("127.0.0.3")
        .await
        .connect()
        .await
        .expect("answer")
        .expect_err("the 201st from one address is refused");
    assert_eq!(refused.status, 429, "{}", refused.body);
    // nginx's own answer: the socket never reached latchkeyd.
    assert!(refused.body.contains("nginx"), "{}", refused.body);
    let elsewhere = paired_from("127.0.0.4").await;
    elsewhere
        .connect_online()
        .await
        .expect("another address is not capped");
    drop(office);
    nginx.stop().await;
    server.stop().await;
}

/// Two replicas in cluster mode behind the shipped nginx, as an upstream of
/// both: browsers' sockets spread over the replicas, and every request of an
/// agent reaches the replica its token hashes to, where its sessions live, so
/// it drives browsers of either replica through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_nginx_keep_an_agent_on_one_and_spread_browsers() {
    let Some(binary) = Nginx::binary() else {
        assert!(std::env::var_os("CI").is_none(), "nginx is required in CI");
        return;
    };
    let Some((_nats, a, b)) = latchkey_testkit::cluster::two_replicas_with(|l| {
        l.upgrades_per_minute = 60_000;
    })
    .await
    else {
        return;
    };
    let port = latchkey_testkit::nginx::free_port().expect("port");
    let (nginx, certs) = Nginx::start_in_front(
        &binary,
        vec![a.addr().to_string(), b.addr().to_string()],
        port,
    )
    .await
    .expect("nginx");
    let tls = certs.client_config().expect("tls");
    let mut browsers = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..16 {
        let mut ext = a.new_extension().await.expect("extension");
        ids.push(ext.pair().await.expect("pair").device_id);
        ext.via(
            &format!("wss://localhost:{port}/extension"),
            Some(tls.clone()),
        );
        browsers.push(FakeBrowser::serve_default(
            ext.connect_online().await.expect("online through nginx"),
        ));
    }
    let held = (a.state().registry.len(), b.state().registry.len());
    assert!(
        held.0 > 0 && held.1 > 0,
        "browsers on both replicas: {held:?}"
    );

    let http = latchkey_testkit::http_builder()
        .tls_certs_only([
            latchkey_testkit::reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).expect("ca"),
        ])
        .build()
        .expect("client");
    let token = a.new_agent().await.expect("agent").token;
    let agent = FakeAgent::new(http, format!("https://localhost:{port}"), token);
    let all_online = latchkey_testkit::wait_until(Duration::from_secs(10), || async {
        agent.browsers().await.is_ok_and(|l| {
            ids.iter()
                .all(|id| l.browsers.iter().any(|x| &x.id == id && x.online))
        })
    })
    .await;
    assert!(all_online, "every browser online for the agent");
    for id in &ids {
        let session = agent.start(Some(id)).await.expect("session").id;
        let answer = agent
            .call(&session, "tool.snapshot", json!({}))
            .await
            .expect("call");
        assert!(answer.is_ok(), "{id}: {:?}", answer.body);
        agent.stop(&session).await.expect("stop");
    }
    for browser in &browsers {
        assert_eq!(browser.count("tool.snapshot"), 1);
    }
    nginx.stop().await;
    for s in [b, a] {
        s.stop().await;
    }
}
