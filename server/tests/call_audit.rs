//! Every tool call in the team's audit trail, on the real server, both backends
//! (docs/operations.md, "Audit"): the method, the host it acted on (learned from
//! the answers that move tabs), its outcome, its duration, in the order the
//! session made them; never a value the agent typed.

#![allow(clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::{ErrorBody, ErrorCode};
use latchkey_testkit::reqwest::Method;
use latchkey_testkit::{Action, Backend, TestServer, backend_tests, wait_until};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(10);

async fn each_call_is_one_row_with_its_host_and_outcome(backend: Backend) {
    let server = TestServer::start(backend).await.expect("server");
    let admin = server.admin();
    let script: latchkey_testkit::Script = Arc::new(|r| match r.method.as_str() {
        "tool.navigate" => Some(Action::Reply(json!({
            "tab_id": 3, "url": r.params.as_ref().map_or(Value::Null, |p| p["url"].clone()),
            "final_url": "https://www.shop.test/cart", "reached": "load"
        }))),
        "tool.request_help" => Some(Action::Reply(json!({"outcome": "cancelled", "tab_id": 3}))),
        "tool.reload" => Some(Action::Error(ErrorBody::new(
            ErrorCode::CdpFailed,
            "detached",
        ))),
        _ => None,
    });
    let (device, _browser) = server.new_browser(script).await.expect("browser");
    let (status, body) = admin
        .raw(
            Method::PUT,
            &format!("/v1/admin/devices/{device}/policy"),
            Some(json!({"capabilities": ["read", "input", "navigate"]})),
        )
        .await
        .expect("policy");
    assert_eq!(status, 200, "{body}");
    let agent = server.new_agent().await.expect("agent");
    let session = agent.start(None).await.expect("start").id;
    let calls = [
        ("tool.navigate", json!({"url": "https://shop.test/"}), "ok"),
        (
            "tool.fill",
            json!({"selector": "#card", "value": "4111-hunter2"}),
            "ok",
        ),
        (
            "tool.evaluate",
            json!({"expression": "document.cookie"}),
            "permission_denied",
        ),
        ("tool.reload", json!({}), "cdp_failed"),
        ("tool.tab_list", json!({}), "ok"),
        ("tool.request_help", json!({"prompt": "Solve it"}), "ok"),
    ];
    for (method, params, _) in &calls {
        agent
            .call(&session, method, params.clone())
            .await
            .expect("answer");
    }
    let target = format!("session:{session}");
    let rows = || async {
        let (_, body) = admin
            .raw(Method::GET, "/v1/admin/audit?limit=50", None)
            .await
            .expect("audit");
        let mut rows: Vec<Value> = body["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["action"] == "session.call" && e["target"] == target.as_str())
            .cloned()
            .collect();
        rows.reverse();
        rows
    };
    assert!(
        wait_until(DEADLINE, || async { rows().await.len() == calls.len() }).await,
        "{:#?}",
        rows().await
    );
    let rows = rows().await;
    let hosts = [
        "shop.test",
        "www.shop.test",
        "www.shop.test",
        "www.shop.test",
        "www.shop.test",
        "www.shop.test",
    ];
    for ((row, (method, _, outcome)), host) in rows.iter().zip(&calls).zip(hosts) {
        let detail = row["detail"].as_str().expect("detail");
        assert!(
            detail.starts_with(&format!("{method} host:{host} ")),
            "{detail}"
        );
        assert!(detail.ends_with("ms"), "{detail}");
        assert_eq!(row["outcome"], *outcome, "{row}");
        assert!(
            row["actor"]
                .as_str()
                .is_some_and(|a| a.starts_with("token:")),
            "{row}"
        );
    }
    // A help request says how the person's part ended.
    let help = rows
        .last()
        .and_then(|r| r["detail"].as_str())
        .expect("detail");
    assert!(help.contains(" help:cancelled "), "{help}");
    // The ask itself is in the trail when the person is asked.
    let (_, body) = admin
        .raw(
            Method::GET,
            "/v1/admin/audit?action=session.help_requested",
            None,
        )
        .await
        .expect("audit");
    assert_eq!(body["events"][0]["target"], target.as_str(), "{body}");
    assert_eq!(
        body["events"][0]["detail"],
        format!("device:{device} host:www.shop.test"),
        "{body}"
    );
    // The trail narrowed: by action and outcome, by a family of actions, by
    // actor and time.
    let query = |q: String| {
        let admin = admin.clone();
        async move {
            admin
                .raw(Method::GET, &format!("/v1/admin/audit?{q}"), None)
                .await
                .expect("audit")
        }
    };
    let (_, body) = query("action=session.call&outcome=permission_denied".into()).await;
    let denied = body["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(denied.len(), 1, "{body}");
    assert!(
        denied[0]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("tool.evaluate"))
    );
    let (_, body) = query(format!("action=session.*&target=session:{session}")).await;
    let actions: Vec<&str> = body["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions.len(),
        calls.len() + 2,
        "the calls, the help request and the start: {actions:?}"
    );
    assert!(actions.iter().all(|a| a.starts_with("session.")));
    let actor = rows[0]["actor"].as_str().expect("actor").to_string();
    let (_, body) = query(format!("actor={actor}&since=10m")).await;
    assert!(
        body["events"]
            .as_array()
            .is_some_and(|e| e.len() >= calls.len()),
        "{body}"
    );
    let (_, body) = query(format!("actor={actor}&until=10m")).await;
    assert_eq!(body["events"], json!([]), "nothing is ten minutes old");
    let (status, body) = query("since=last%20week".into()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["data"]["field"], "since");

    let all = admin
        .audit_lines(100, &["detail"])
        .await
        .expect("audit")
        .join("\n");
    assert!(
        !all.contains("hunter2") && !all.contains("cookie"),
        "no value reaches the trail"
    );
}
backend_tests!(call_rows, each_call_is_one_row_with_its_host_and_outcome);
