//! The people of a team (docs/people.md) on the real server, both backends: a
//! browser paired for a member is theirs and is listed with their name and email;
//! tokens record the person behind them; removing a member ends their browsers'
//! live connections (4001) and their tokens' agent sockets (4006) at once and voids
//! their unused links; bad input and foreign ids change nothing.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::{MemberRemovedView, Role, TokenList};
use latchkey_server::store::ApiTokenRecord;
use latchkey_testkit::extension::Ended;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{AgentSocket, Backend, TestServer, backend_tests};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(10);

async fn a_members_browser_is_theirs_until_they_are_removed(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member("Alice Example", "  Alice@Example.com ")
        .await
        .expect("alice");
    assert_eq!(alice.email, "alice@example.com");
    let bob = admin
        .add_member("Bob", "bob@example.com")
        .await
        .expect("bob");

    // A link made for Alice pairs a browser that is hers.
    let (ext, device) = server.paired_for(&alice.id).await.expect("paired");
    let mut socket = ext.connect_online().await.expect("online");
    // Bob's browser stays his through Alice's removal.
    let bobs_link = admin.create_pairing_for(&bob.id).await.expect("link");
    let mut bobs = server.extension_from_link(&bobs_link.link).expect("ext");
    let bobs_device = bobs.pair().await.expect("pair").device_id;
    let listed = admin.device(&device).await.expect("device");
    let owner = listed.owner.expect("an owner");
    assert_eq!(
        (owner.id.as_str(), owner.display_name.as_str()),
        (alice.id.as_str(), "Alice Example")
    );
    assert_eq!(owner.email, "alice@example.com");
    assert_eq!(listed.created_by, "bootstrap");

    // An admin token that is Alice's own, and an agent token it creates: both
    // record her.
    let (status, own) = admin
        .raw(
            Method::POST,
            "/v1/admin/tokens",
            Some(json!({"name": "alice-admin", "role": "admin", "member_id": alice.id})),
        )
        .await
        .expect("token");
    assert_eq!(status, 201, "{own}");
    assert_eq!(own["member_id"], json!(alice.id));
    let as_alice = server.admin_with(own["token"].as_str().expect("secret"));
    let agent = as_alice
        .create_token("alice-agent", Role::Agent)
        .await
        .expect("agent");
    assert_eq!(agent.view.member_id.as_deref(), Some(alice.id.as_str()));
    let mut agent_socket = AgentSocket::open(&server, &agent.token)
        .await
        .expect("agent socket");
    // An unused link of hers is voided by the removal.
    let unused = admin
        .create_pairing_for(&alice.id)
        .await
        .expect("unused link");

    let (status, body) = admin
        .raw(
            Method::DELETE,
            &format!("/v1/admin/members/{}", alice.id),
            None,
        )
        .await
        .expect("remove");
    assert_eq!(status, 200, "{body}");
    let removed: MemberRemovedView = serde_json::from_value(body).expect("view");
    assert_eq!(removed.revoked_devices, vec![device.clone()]);
    assert_eq!(removed.revoked_tokens.len(), 2);
    assert_eq!(removed.voided_pairings, 1);
    assert_eq!(
        socket.ended(DEADLINE).await.expect("closed"),
        Ended::Closed(4001)
    );
    let (ended, _) = agent_socket.ended(DEADLINE).await.expect("closed");
    assert_eq!(ended, Ended::Closed(4006));

    // Her browser still shows whose it was; Bob's is untouched.
    let after = admin.device(&device).await.expect("device");
    assert_eq!(after.owner.map(|o| o.id), Some(alice.id.clone()));
    assert_eq!(format!("{:?}", after.status), "Revoked");
    assert_eq!(
        format!(
            "{:?}",
            admin.device(&bobs_device).await.expect("bob").status
        ),
        "Active"
    );
    let members: Vec<String> = admin_members(&server).await;
    assert_eq!(members, vec![bob.id.clone()]);
    let (_, tokens) = admin
        .raw(Method::GET, "/v1/admin/tokens", None)
        .await
        .expect("tokens");
    let tokens: TokenList = serde_json::from_value(tokens).expect("token list");
    assert!(
        tokens
            .tokens
            .iter()
            .filter(|t| t.member_id.as_deref() == Some(&alice.id))
            .all(|t| t.revoked_at.is_some())
    );
    // A voided link is refused as a used one is.
    let mut late = server.extension_from_link(&unused.link).expect("ext");
    assert_eq!(
        late.pair_with(&latchkey_testkit::extension::new_token())
            .await
            .expect("answer")
            .err()
            .map(|a| a.status),
        Some(401)
    );

    // A link for a removed member, and a second removal, answer as for an unknown one.
    let (gone, _) = admin
        .raw(
            Method::POST,
            "/v1/admin/pairings",
            Some(json!({"member_id": alice.id})),
        )
        .await
        .expect("pairing");
    assert_eq!(gone, 404);
    let (again, _) = admin
        .raw(
            Method::DELETE,
            &format!("/v1/admin/members/{}", alice.id),
            None,
        )
        .await
        .expect("remove");
    assert_eq!(again, 404);
    // The store itself refuses a token for her now (the handler's own check could
    // have read her before the removal committed).
    let late_token = ApiTokenRecord {
        id: "tok_00000000000000aa".into(),
        tenant_id: default_tenant(&server).await,
        name: "late".into(),
        role: "admin".into(),
        token_hash: "a".repeat(64),
        created_at: server.clock().now_ms(),
        expires_at: None,
        revoked_at: None,
        last_used_at: None,
        member_id: Some(alice.id.clone()),
    };
    assert!(
        !server
            .state()
            .store
            .insert_member_token(&late_token)
            .await
            .expect("store")
    );
    // Her address is free again: a person may come back.
    admin
        .add_member("Alice Again", "alice@example.com")
        .await
        .expect("re-added");
    server.stop().await;
}

async fn default_tenant(server: &TestServer) -> String {
    server.default_tenant_id().await.expect("default tenant")
}

async fn admin_members(server: &TestServer) -> Vec<String> {
    let (status, body) = server
        .admin()
        .raw(Method::GET, "/v1/admin/members", None)
        .await
        .expect("members");
    assert_eq!(status, 200);
    body["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_string())
        .collect()
}

async fn bad_input_and_foreign_ids_change_nothing(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let refusals = [
        (
            json!({"display_name": "A", "email": "not-an-address"}),
            "invalid_params",
            "email",
        ),
        (
            json!({"display_name": "", "email": "a@example.com"}),
            "invalid_params",
            "display_name",
        ),
        (
            json!({"display_name": "A", "email": "ALICE@example.com"}),
            "invalid_request",
            "email",
        ),
        (
            json!({"display_name": "A", "email": "b@example.com", "role": "boss"}),
            "invalid_request",
            "",
        ),
    ];
    for (body, code, field) in refusals {
        let (status, answer) = admin
            .raw(Method::POST, "/v1/admin/members", Some(body.clone()))
            .await
            .expect("answer");
        assert!((400..500).contains(&status), "{body}: {status}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        if !field.is_empty() {
            assert_eq!(answer["error"]["data"]["field"], field, "{body}: {answer}");
        }
    }
    // An agent token names no owner of its own.
    let (status, answer) = admin
        .raw(
            Method::POST,
            "/v1/admin/tokens",
            Some(json!({"name": "x", "role": "agent", "member_id": alice.id})),
        )
        .await
        .expect("answer");
    assert_eq!(
        (status, answer["error"]["data"]["field"].clone()),
        (400, json!("member_id"))
    );
    assert_eq!(admin_members(&server).await, vec![alice.id.clone()]);

    // Another team's member is unknown here, for a link, a token and a removal.
    let b = server.admin_with(&server.new_tenant("beta").await.expect("tenant beta"));
    let unknown = "mem_0000000000000000";
    for id in [alice.id.as_str(), unknown, "mem_x"] {
        let link = b
            .raw(
                Method::POST,
                "/v1/admin/pairings",
                Some(json!({"member_id": id})),
            )
            .await
            .expect("link");
        let token = b
            .raw(
                Method::POST,
                "/v1/admin/tokens",
                Some(json!({"name": "t", "role": "admin", "member_id": id})),
            )
            .await
            .expect("token");
        let removal = b
            .raw(Method::DELETE, &format!("/v1/admin/members/{id}"), None)
            .await
            .expect("remove");
        for (status, body) in [link, token, removal] {
            assert_eq!(status, 404, "{id}: {body}");
            assert_eq!(body["error"]["message"], "no such member", "{id}: {body}");
        }
    }
    assert!(
        b.raw(Method::GET, "/v1/admin/members", None)
            .await
            .expect("list")
            .1["members"]
            .as_array()
            .expect("members")
            .is_empty()
    );
    assert_eq!(admin_members(&server).await, vec![alice.id.clone()]);
    server.stop().await;
}

backend_tests!(owners, a_members_browser_is_theirs_until_they_are_removed);
backend_tests!(member_input, bad_input_and_foreign_ids_change_nothing);
