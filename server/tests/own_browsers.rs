//! A person's own token on the real server, both backends (docs/people.md): with a
//! member token Alice sees who she is, makes a link for a browser of hers, lists
//! and revokes only her own browsers (her live connection closes 4001), and reaches
//! neither the admin API nor the agent API; Bob's browser answers as an unknown one.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::{DeviceList, MemberView, PairingCreated};
use latchkey_testkit::extension::Ended;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{AdminClient, Backend, TestServer, backend_tests};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

async fn ok<T: serde::de::DeserializeOwned>(
    client: &AdminClient,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> T {
    let (status, answer) = client.raw(method, path, body).await.expect("answer");
    assert!((200..300).contains(&status), "{path}: {status} {answer}");
    serde_json::from_value(answer).expect("body")
}

async fn a_person_manages_their_own_browsers_and_nothing_else(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let (alice, bob) = admin.alice_and_bob().await.expect("alice and bob");
    let as_alice = server.admin_with(&admin.member_token(&alice.id).await.expect("token"));

    let me: MemberView = ok(&as_alice, Method::GET, "/v1/me", None).await;
    assert_eq!(me.id, alice.id);

    // Her own link pairs a browser that is hers.
    let link: PairingCreated = ok(
        &as_alice,
        Method::POST,
        "/v1/me/pairings",
        Some(json!({"label": "laptop"})),
    )
    .await;
    let mut ext = server.extension_from_link(&link.link).expect("ext");
    let hers = ext.pair().await.expect("pair").device_id;
    let mut socket = ext.connect_online().await.expect("online");
    // Bob's browser, paired by an admin.
    let bobs_link = admin.create_pairing_for(&bob.id).await.expect("link");
    let mut bobs = server.extension_from_link(&bobs_link.link).expect("ext");
    let his = bobs.pair().await.expect("pair").device_id;

    let mine: DeviceList = ok(&as_alice, Method::GET, "/v1/me/devices", None).await;
    let ids: Vec<&str> = mine.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, vec![hers.as_str()]);
    assert_eq!(
        mine.devices[0].owner.as_ref().map(|o| o.id.as_str()),
        Some(alice.id.as_str())
    );
    assert_eq!(mine.devices[0].label, "laptop");

    // Bob's browser answers as an unknown one, and stays live.
    let foreign = as_alice
        .raw(Method::DELETE, &format!("/v1/me/devices/{his}"), None)
        .await
        .expect("answer");
    let unknown = as_alice
        .raw(
            Method::DELETE,
            "/v1/me/devices/0123456789abcdef0123456789abcdef",
            None,
        )
        .await
        .expect("answer");
    assert_eq!(foreign, unknown);
    assert_eq!(foreign.0, 404);
    assert_eq!(
        format!("{:?}", admin.device(&his).await.expect("his").status),
        "Active"
    );

    // Neither the admin API nor the agent API.
    for (method, path) in [
        (Method::GET, "/v1/admin/devices"),
        (Method::GET, "/v1/admin/members"),
        (Method::POST, "/v1/admin/pairings"),
        (Method::GET, "/v1/browsers"),
        (Method::GET, "/v1/sessions"),
    ] {
        let body = (method == Method::POST).then(|| json!({}));
        let (status, answer) = as_alice.raw(method, path, body).await.expect("answer");
        assert_eq!(
            (status, answer["error"]["code"].clone()),
            (403, json!("permission_denied")),
            "{path}"
        );
    }

    // Her own revocation closes her live connection at once.
    let (status, body) = as_alice
        .raw(Method::DELETE, &format!("/v1/me/devices/{hers}"), None)
        .await
        .expect("answer");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "revoked");
    assert_eq!(
        socket.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );

    // A member's unused links are bounded (5 by default), so their token cannot
    // use up the team's.
    let mut refused = None;
    for _ in 0..6 {
        let (status, body) = as_alice
            .raw(Method::POST, "/v1/me/pairings", Some(json!({})))
            .await
            .expect("answer");
        if status != 201 {
            refused = Some(body["error"]["code"].clone());
            break;
        }
    }
    assert_eq!(refused, Some(json!("limit_reached")));
    server.stop().await;
}

async fn tokens_without_a_person_have_no_me(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    // The team's first admin token has no person behind it.
    let (status, body) = admin
        .raw(Method::GET, "/v1/me", None)
        .await
        .expect("answer");
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (403, json!("permission_denied"))
    );
    // A member token must name its member.
    let (status, body) = admin
        .raw(
            Method::POST,
            "/v1/admin/tokens",
            Some(json!({"name": "x", "role": "member"})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, body["error"]["data"]["field"].clone()),
        (400, json!("member_id"))
    );
    server.stop().await;
}

backend_tests!(
    own_browsers,
    a_person_manages_their_own_browsers_and_nothing_else
);
backend_tests!(no_person, tokens_without_a_person_have_no_me);
