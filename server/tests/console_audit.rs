//! The console's Audit page on the real server, both backends (docs/console.md,
//! "Audit"): an admin reads the team's trail, narrows it with the API's filters
//! (blank ones ignored, bad ones refused beside the form), pages it by cursor and
//! exports it as the API exports it; another team's rows never show; members
//! and other sites are refused.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use latchkey_protocol::api::Role;
use latchkey_testkit::console::Page;
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Backend, TestServer, backend_tests};

/// The audit row ids a page shows, top to bottom.
fn row_ids(page: &Page) -> Vec<i64> {
    page.body
        .split(r#"data-audit=""#)
        .skip(1)
        .map(|rest| {
            rest[..rest.find('"').expect("an id")]
                .parse()
                .expect("a number")
        })
        .collect()
}

/// The `href` of the link `rel="next"`, HTML entities undone.
fn older(page: &Page) -> Option<String> {
    let at = page.body.find(r#"rel="next""#)?;
    let before = &page.body[..at];
    let href = &before[before.rfind(r#"href=""#)? + 6..];
    Some(
        href[..href.find('"')?]
            .replace("&#38;", "&")
            .replace("&amp;", "&"),
    )
}

/// The ids of the rows the API lists for `query`.
async fn api_ids(server: &TestServer, query: &str) -> Vec<i64> {
    let (status, body) = server
        .admin()
        .raw(Method::GET, &format!("/v1/admin/audit?{query}"), None)
        .await
        .expect("audit");
    assert_eq!(status, 200, "{body}");
    body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect()
}

async fn an_admin_reads_filters_pages_and_exports_the_trail(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    for name in ["scout", "booker", "mailer"] {
        admin.create_token(name, Role::Agent).await.expect("token");
    }
    assert!(
        admin
            .audit_has(Duration::from_secs(10), &["token.create", "role agent"])
            .await
    );
    let web = server
        .console_signed_in(&server.admin_token)
        .await
        .expect("signed in");

    // The whole trail, newest first, as the API lists it.
    let page = web.get("/console/audit").await.expect("page");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(r#"href="/console/audit""#),
        "the nav links it"
    );
    let shown = row_ids(&page);
    assert!(shown.len() >= 3, "{}", page.body);
    assert_eq!(shown, api_ids(&server, "limit=50").await);
    assert!(page.body.contains("token.create"));

    // Narrowed and paged: two rows a page, the filter kept on the next page.
    let tokens = api_ids(&server, "action=token.create").await;
    assert!(tokens.len() >= 3, "{tokens:?}");
    let mut seen = Vec::new();
    let mut next = Some("/console/audit?action=token.create&limit=2".to_owned());
    let mut pages = 0;
    while let Some(path) = next {
        pages += 1;
        assert!(pages <= tokens.len(), "the pages end");
        let page = web.get(&path).await.expect("page");
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        let ids = row_ids(&page);
        assert!(!ids.is_empty() && ids.len() <= 2, "{path}: {ids:?}");
        assert!(path.contains("action=token.create"), "{path}");
        seen.extend(ids);
        next = older(&page);
    }
    assert_eq!(seen, tokens, "every page in order, nothing twice");

    // A family, and blank fields as a form sends them: no filter.
    let family = web
        .get("/console/audit?action=token.*&actor=&target=&outcome=&since=&until=")
        .await
        .expect("page");
    assert_eq!(family.status, 200, "{}", family.body);
    assert_eq!(row_ids(&family), api_ids(&server, "action=token.*").await);
    let blank = web
        .get("/console/audit?action=&actor=+&since=")
        .await
        .expect("page");
    assert_eq!(row_ids(&blank), shown);

    // A time the trail cannot read is refused beside the form, which keeps it.
    let bad = web
        .get("/console/audit?since=yesterday")
        .await
        .expect("page");
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("invalid_params"), "{}", bad.body);
    assert!(bad.body.contains(r#"value="yesterday""#), "{}", bad.body);
    assert!(row_ids(&bad).is_empty());
    let bad_cursor = web.get("/console/audit?before=x").await.expect("page");
    assert_eq!(bad_cursor.status, 400);
    assert!(bad_cursor.body.contains("invalid_request"));

    // The export: the API's JSON Lines, itself audited; not for another site.
    let refused = web
        .get_from("/console/audit/export", "cross-site")
        .await
        .expect("answer");
    assert_eq!(refused.status, 403);
    assert!(api_ids(&server, "action=audit.export").await.is_empty());
    let export = web
        .get_from("/console/audit/export?since=1h", "same-origin")
        .await
        .expect("export");
    assert_eq!(export.status, 200, "{}", export.body);
    assert_eq!(
        export.headers["content-type"].to_str().expect("type"),
        "application/x-ndjson"
    );
    let disposition = export.headers["content-disposition"]
        .to_str()
        .expect("disposition");
    assert!(
        disposition.starts_with("attachment; filename=\"latchkey-audit-"),
        "{disposition}"
    );
    let mut lines = export.body.lines();
    let header: serde_json::Value =
        serde_json::from_str(lines.next().expect("a header")).expect("json");
    assert_eq!(header["latchkey_audit_export"], 1, "{header}");
    let rows: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(
        rows.iter().any(|r| r.to_string().contains("token.create")),
        "{}",
        export.body
    );
    assert_eq!(api_ids(&server, "action=audit.export").await.len(), 1);

    // Another team's admin sees none of these rows.
    let beta = server.new_tenant("beta").await.expect("beta");
    let as_beta = server.console_signed_in(&beta).await.expect("beta in");
    let theirs = row_ids(&as_beta.get("/console/audit").await.expect("page"));
    assert!(!theirs.is_empty(), "beta's own trail");
    assert!(
        theirs.iter().all(|id| !shown.contains(id)),
        "{theirs:?} / {shown:?}"
    );

    // Members have no Audit page and no export.
    let alice = admin
        .add_member("Alice", "alice@example.com")
        .await
        .expect("alice");
    let token = admin.member_token(&alice.id).await.expect("token");
    let as_alice = server.console_signed_in(&token).await.expect("alice in");
    let devices = as_alice.get("/console/devices").await.expect("page");
    assert!(
        !devices.body.contains("/console/audit"),
        "no link for a member"
    );
    for path in ["/console/audit", "/console/audit/export"] {
        let refused = as_alice.get(path).await.expect("answer");
        assert_eq!(refused.status, 403, "{path}");
        assert!(
            refused.body.contains("permission_denied"),
            "{}",
            refused.body
        );
    }
    server.stop().await;
}

backend_tests!(
    an_admin_reads_filters_pages_and_exports_the_trail,
    an_admin_reads_filters_pages_and_exports_the_trail
);
