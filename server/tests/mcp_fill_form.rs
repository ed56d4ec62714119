//! `browser_fill_form` on the real server (docs/mcp.md, "Filling a form"): each
//! field is its own catalogue call through the pipeline, in order and audited; a
//! form with one bad field reaches the browser not at all; the first failure ends
//! the call and says what was set and what was not attempted.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::{ErrorBody, ErrorCode};
use latchkey_testkit::mcp::text;
use latchkey_testkit::{Action, Backend, McpClient, Revision, Script, TestServer, backend_tests};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

/// A form page: fills and selects answer as the extension does, but ref e9 is
/// stale.
fn form_script() -> Script {
    Arc::new(|r| {
        let params = r.params.clone().unwrap_or_default();
        if params["ref"] == "e9" {
            let mut e =
                ErrorBody::new(ErrorCode::NotFound, "ref e9 is not in the current snapshot");
            e.data = Some(json!({"reason": "ref_not_found"}));
            return Some(Action::Error(e));
        }
        match r.method.as_str() {
            "tool.fill" => Some(Action::Reply(json!({
                "tab_id": 7, "used_ref": params["ref"],
                "value_length": params["value"].as_str().map_or(0, |v| v.encode_utf16().count()),
            }))),
            "tool.select" => Some(Action::Reply(json!({
                "tab_id": 7, "used_ref": params["ref"], "multiple": false,
                "selected_values": ["fr"], "selected_labels": ["France"],
            }))),
            _ => None,
        }
    })
}

/// What the browser was asked to set, in order: method, ref, value(s).
fn sets(browser: &latchkey_testkit::FakeBrowser) -> Vec<(String, Value, Value)> {
    browser
        .received()
        .into_iter()
        .filter(|r| r.method == "tool.fill" || r.method == "tool.select")
        .map(|r| {
            let p = r.params.unwrap_or_default();
            let value = p.get("value").or_else(|| p.get("values")).cloned();
            (r.method, p["ref"].clone(), value.unwrap_or_default())
        })
        .collect()
}

backend_tests!(
    a_form_is_set_field_by_field_through_the_pipeline,
    |backend: Backend| async move {
        let server = TestServer::start(backend).await.expect("server");
        let agent = server.new_agent().await.expect("agent");
        let (_device, browser) = server.new_browser(form_script()).await.expect("browser");
        let mcp = McpClient::to_server(&server, &agent.token, Revision::Stateless)
            .await
            .expect("client");
        let listed = mcp.tools().await.expect("tools");
        let tool = listed
            .iter()
            .find(|t| t.name == "browser_fill_form")
            .expect("listed");
        assert_eq!(
            tool.annotations.as_ref().and_then(|a| a.destructive_hint),
            Some(true)
        );

        let filled = mcp
            .call(
                "browser_fill_form",
                json!({"fields": [
                    {"name": "Email", "type": "textbox", "ref": "e3", "value": "ada@example.test"},
                    {"name": "Country", "type": "combobox", "ref": "e5", "value": "France"},
                    {"name": "Volume", "type": "slider", "ref": "e6", "value": "30"},
                ]}),
            )
            .await
            .expect("answer");
        assert_eq!(filled.is_error, Some(false), "{}", text(&filled));
        assert_eq!(
            text(&filled),
            "Set 3 of 3 fields:\n- \"Email\" [ref=e3]: typed 16 characters\n\
             - \"Country\" [ref=e5]: selected [\"France\"]\n- \"Volume\" [ref=e6]: typed 2 characters"
        );
        assert_eq!(
            sets(&browser),
            [
                ("tool.fill".into(), json!("e3"), json!("ada@example.test")),
                ("tool.select".into(), json!("e5"), json!(["France"])),
                ("tool.fill".into(), json!("e6"), json!("30")),
            ]
        );
        // One session, and one audit row per field.
        assert_eq!(browser.count("tool.session_start"), 1);
        let admin = server.admin();
        assert!(
            admin
                .audit_has(DEADLINE, &["session.call", "tool.select"])
                .await
        );
        assert!(
            admin
                .audit_has(DEADLINE, &["session.call", "tool.fill"])
                .await
        );

        // One bad field: nothing reaches the browser.
        for bad in [
            json!({"name": "Agree", "type": "checkbox", "ref": "e7", "value": "true"}),
            json!({"name": "Email", "type": "textbox", "ref": "", "value": "x"}),
        ] {
            let refused = mcp
                .call(
                    "browser_fill_form",
                    json!({"fields": [
                        {"name": "Email", "type": "textbox", "ref": "e3", "value": "b@example.test"},
                        bad,
                    ]}),
                )
                .await
                .expect("answer");
            assert_eq!(refused.is_error, Some(true));
            assert!(
                text(&refused).starts_with("invalid_params: "),
                "{}",
                text(&refused)
            );
            assert!(
                text(&refused).contains("[field fields[1]."),
                "{}",
                text(&refused)
            );
        }
        assert_eq!(sets(&browser).len(), 3);

        // The first failure ends the call and says what was and was not done.
        let failed = mcp
            .call(
                "browser_fill_form",
                json!({"fields": [
                    {"name": "Name", "type": "textbox", "ref": "e4", "value": "Ada"},
                    {"name": "City", "type": "textbox", "ref": "e9", "value": "Paris"},
                    {"name": "Zip", "type": "textbox", "ref": "e8", "value": "75001"},
                ]}),
            )
            .await
            .expect("answer");
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(
            text(&failed),
            "Field 2 of 3, \"City\" [ref=e9], was not set:\n\
             not_found (ref_not_found): ref e9 is not in the current snapshot\n\
             stale ref: call browser_snapshot again and use a ref from it\n\
             Set before it:\n- \"Name\" [ref=e4]: typed 3 characters\n\
             Not attempted: [\"Zip\"]"
        );
        let structured = failed.structured_content.expect("structured");
        assert_eq!(structured["not_attempted"], json!(["Zip"]));
        let tried: Vec<Value> = sets(&browser).into_iter().skip(3).map(|s| s.1).collect();
        assert_eq!(tried, [json!("e4"), json!("e9")]);
        mcp.close().await.expect("close");
    }
);

/// A browser whose extension lists `set_checked`: a click with
/// `latchkey_checked` answers the state it left the box in.
fn checking_script() -> Script {
    let form = form_script();
    Arc::new(move |r| {
        let params = r.params.clone().unwrap_or_default();
        if r.method != "tool.click" {
            return form(r);
        }
        Some(Action::Reply(json!({
            "tab_id": 7, "used_ref": params["ref"], "x": 10.0, "y": 20.0,
            "latchkey_checked": params["latchkey_checked"],
        })))
    })
}

const CHECKOUT: fn() -> Value = || {
    json!({"fields": [
        {"name": "Name", "type": "textbox", "ref": "e2", "value": "Ada"},
        {"name": "Gift wrap", "type": "checkbox", "ref": "e3", "value": "true"},
        {"name": "Express", "type": "radio", "ref": "e4", "value": "true"},
    ]})
};

backend_tests!(
    checkboxes_are_set_only_on_a_browser_that_can,
    |backend: Backend| async move {
        // A contract-only extension: it would ignore the state and toggle.
        let server = TestServer::start(backend.clone()).await.expect("server");
        let agent = server.new_agent().await.expect("agent");
        let (device, browser) = server
            .new_browser(checking_script())
            .await
            .expect("browser");
        let mcp = McpClient::to_server(&server, &agent.token, Revision::Stateless)
            .await
            .expect("client");
        let refused = mcp
            .call("browser_fill_form", CHECKOUT())
            .await
            .expect("answer");
        assert_eq!(refused.is_error, Some(true));
        assert!(
            text(&refused).starts_with("invalid_params: field \"Gift wrap\": this browser's extension cannot set a checkbox"),
            "{}",
            text(&refused)
        );
        assert!(
            text(&refused).contains("[field fields[1].type]"),
            "{}",
            text(&refused)
        );
        // The same param sent by hand, on the HTTP API, never reaches it either.
        let session = agent.start(Some(&device)).await.expect("session");
        let by_hand = agent
            .call(
                &session.id,
                "tool.click",
                json!({"ref": "e3", "latchkey_checked": true}),
            )
            .await
            .expect("answer");
        assert_eq!(by_hand.status, 400);
        assert_eq!(by_hand.body["error"]["data"]["field"], "latchkey_checked");
        assert_eq!(sets(&browser).len(), 0);
        assert_eq!(browser.count("tool.click"), 0);

        // An extension that lists set_checked: the boxes are set, in order.
        let server = TestServer::start(backend).await.expect("server");
        let agent = server.new_agent().await.expect("agent");
        let (_device, browser) = server
            .new_browser_with_features(checking_script(), &["set_checked"])
            .await
            .expect("browser");
        let mcp = McpClient::to_server(&server, &agent.token, Revision::Stateless)
            .await
            .expect("client");
        let filled = mcp
            .call("browser_fill_form", CHECKOUT())
            .await
            .expect("answer");
        assert_eq!(filled.is_error, Some(false), "{}", text(&filled));
        assert_eq!(
            text(&filled),
            "Set 3 of 3 fields:\n- \"Name\" [ref=e2]: typed 3 characters\n\
             - \"Gift wrap\" [ref=e3]: checked\n- \"Express\" [ref=e4]: checked"
        );
        let clicks: Vec<Value> = browser
            .received()
            .into_iter()
            .filter(|r| r.method == "tool.click")
            .map(|r| r.params.unwrap_or_default())
            .map(|p| json!([p["ref"], p["latchkey_checked"]]))
            .collect();
        assert_eq!(clicks, [json!(["e3", true]), json!(["e4", true])]);
        mcp.close().await.expect("close");
    }
);
