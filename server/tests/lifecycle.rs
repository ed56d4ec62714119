//! The whole device lifecycle over real sockets, on SQLite and PostgreSQL, plain
//! and over TLS: pair → connect → handshake → renew → exact retry → old token
//! refused → new token accepted → revoke → socket closed → renew refused.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::CloseCode;
use latchkey_protocol::api::DeviceStatus;
use latchkey_protocol::authorize::{AuthorizeGrant, is_device_id};
use latchkey_testkit::extension::{Ended, new_token};
use latchkey_testkit::{Backend, FakeExtension, TestServer, backend_tests, logs, wait_until};

const DEADLINE: Duration = Duration::from_secs(10);

fn parse_time(s: &str) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
}

async fn lifecycle(backend: Backend, tls: bool) {
    let server = TestServer::builder(backend)
        .tls(tls)
        .start()
        .await
        .expect("server");
    let admin = server.admin();

    let pairing = admin
        .create_pairing(Some("Work laptop"), None)
        .await
        .expect("pairing");
    let scheme = if tls { "wss://" } else { "ws://" };
    assert!(pairing.link.starts_with(scheme), "{}", pairing.link);
    assert!(pairing.link.contains("/extension#"));
    let mut ext = FakeExtension::from_link(&pairing.link, server.http.clone(), server.client_tls())
        .expect("link");
    assert_eq!(ext.pairing_secret.len(), 43);

    // Pair: a 90-day grant, renewal after 30 days.
    let grant = ext.pair().await.expect("pair");
    assert!(is_device_id(&grant.device_id));
    let (expires, renew_after) = (
        parse_time(&grant.expires_at),
        parse_time(&grant.renew_after),
    );
    let now = time::OffsetDateTime::now_utc();
    assert!((expires - now - time::Duration::days(90)).abs() < time::Duration::minutes(1));
    assert!((renew_after - now - time::Duration::days(30)).abs() < time::Duration::minutes(1));
    assert_eq!(grant.service_name.as_deref(), Some("Latchkey"));

    // The link is single use.
    let reuse = ext
        .pair_with(&new_token())
        .await
        .expect("request")
        .expect_err("second pair must fail");
    assert_eq!(reuse.status, 401);
    assert_eq!(reuse.body, r#"{"error":"invalid_authorization"}"#);

    // Connect: the subprotocol is echoed; the handshake answers as bsk does.
    let first_token = ext.token.clone().expect("token");
    let mut socket = match ext.connect().await.expect("connect") {
        Ok(s) => s,
        Err(a) => panic!("upgrade refused: {a:?}"),
    };
    assert_eq!(
        socket.protocol.as_deref(),
        Some(format!("bsk-auth.{first_token}").as_str())
    );
    let hs = socket.handshake().await.expect("handshake");
    assert_eq!(hs.server, "browser-skill-daemon");
    assert_eq!(hs.protocol_version, "1.0");
    assert_eq!(hs.min_compatible_protocol.as_deref(), Some("1.0"));
    socket.heartbeat().await.expect("heartbeat");

    let device_id = grant.device_id.clone();
    assert!(
        wait_until(DEADLINE, || async {
            admin
                .device(&device_id)
                .await
                .map(|d| d.online)
                .unwrap_or(false)
        })
        .await,
        "device never showed online"
    );
    let view = admin.device(&device_id).await.expect("device");
    assert_eq!(view.label, "Work laptop");
    assert_eq!(view.created_by, "bootstrap");
    assert_eq!(view.owner, None);
    assert_eq!(view.status, DeviceStatus::Active);
    assert_eq!(view.browser_name.as_deref(), Some("chromium"));

    // Renew, then retry exactly: the identical grant, no second rotation.
    let next = new_token();
    let renewed = ext.renew_raw(&first_token, &next).await.expect("renew");
    assert_eq!(renewed.status, 200, "{}", renewed.body);
    assert_eq!(
        renewed.headers.get("cache-control").map(|v| v.as_bytes()),
        Some(&b"no-store"[..])
    );
    let renewed_grant: AuthorizeGrant = serde_json::from_str(&renewed.body).expect("grant");
    assert_eq!(
        renewed_grant.device_id, device_id,
        "device id must survive renewal"
    );
    let retry = ext.renew_raw(&first_token, &next).await.expect("retry");
    assert_eq!(retry.status, 200);
    assert_eq!(
        retry.body, renewed.body,
        "an exact retry returns the identical grant"
    );

    // The old token with another successor is refused, and cannot open a socket.
    let other = ext
        .renew_raw(&first_token, &new_token())
        .await
        .expect("renew");
    assert_eq!(other.status, 401);
    let refused = ext.connect().await.expect("connect");
    assert_eq!(refused.expect_err("old token must not connect").status, 401);

    // The new token connects; the new socket replaces the old one.
    ext.token = Some(next.clone());
    let mut socket2 = ext.connect_online().await.expect("new token connects");
    assert_eq!(
        socket.ended(DEADLINE).await.expect("old socket"),
        Ended::Closed(CloseCode::Replaced.code())
    );

    // The newer token renews again from the new current credential.
    let after = ext.renew_raw(&next, &new_token()).await.expect("renew");
    assert_eq!(after.status, 200);
    let latest: AuthorizeGrant = serde_json::from_str(&after.body).expect("grant");
    assert_eq!(latest.device_id, device_id);

    // Revoke: the live socket closes by push with `revoked`; renew and connect refuse.
    let revoked = admin.revoke(&device_id).await.expect("revoke");
    assert_eq!(revoked.status, DeviceStatus::Revoked);
    assert_eq!(
        socket2.ended(DEADLINE).await.expect("socket"),
        Ended::Closed(CloseCode::Revoked.code())
    );
    let renew_after_revoke = ext.renew_raw(&next, &new_token()).await.expect("renew");
    assert_eq!(renew_after_revoke.status, 401);

    // The audit trail records it all (the disconnect lands once the close completes).
    let expected = [
        "pairing.create",
        "device.pair",
        "device.connect",
        "device.renew",
        "device.renew_retry",
        "device.renew_refused",
        "device.disconnect",
        "device.revoke",
    ];
    let fetch_audit = || async {
        let (status, audit) = admin
            .raw(
                latchkey_testkit::reqwest::Method::GET,
                "/v1/admin/audit?limit=100",
                None,
            )
            .await
            .expect("audit");
        assert_eq!(status, 200);
        audit
    };
    let complete = |audit: &serde_json::Value| {
        let actions: Vec<&str> = audit["events"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["action"].as_str()).collect())
            .unwrap_or_default();
        expected.iter().all(|x| actions.contains(x))
    };
    assert!(
        wait_until(DEADLINE, || async { complete(&fetch_audit().await) }).await,
        "audit incomplete: {}",
        fetch_audit().await
    );
    let audit = fetch_audit().await;
    let audit_text = audit.to_string();
    for secret in [
        &ext.pairing_secret,
        &first_token,
        &next,
        &server.admin_token,
    ] {
        assert!(
            !audit_text.contains(secret.as_str()),
            "a secret reached the audit trail"
        );
    }
    logs::assert_no_secrets(&[
        &ext.pairing_secret,
        &first_token,
        &next,
        &server.admin_token,
    ]);
    server.stop().await;
}

backend_tests!(lifecycle_plain, |b| lifecycle(b, false));
backend_tests!(lifecycle_tls, |b| lifecycle(b, true));

async fn revoke_all_voids_pairings(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let mut a = server.new_extension().await.expect("ext");
    a.pair().await.expect("pair");
    let mut b = server.new_extension().await.expect("ext");
    b.pair().await.expect("pair");
    let unused = server.new_extension().await.expect("ext");
    let mut sa = a.connect_online().await.expect("online");
    let mut sb = b.connect_online().await.expect("online");

    let result = admin.revoke_all().await.expect("revoke all");
    assert_eq!(result.revoked_devices, 2);
    assert_eq!(result.voided_pairings, 1);
    assert_eq!(
        sa.ended(DEADLINE).await.expect("a"),
        Ended::Closed(CloseCode::Revoked.code())
    );
    assert_eq!(
        sb.ended(DEADLINE).await.expect("b"),
        Ended::Closed(CloseCode::Revoked.code())
    );
    let mut unused = unused;
    let answer = unused
        .pair_with(&new_token())
        .await
        .expect("request")
        .expect_err("voided");
    assert_eq!(answer.status, 401);
    assert!(
        admin
            .devices()
            .await
            .expect("list")
            .iter()
            .all(|d| d.status == DeviceStatus::Revoked)
    );
    server.stop().await;
}

backend_tests!(revoke_all, revoke_all_voids_pairings);
