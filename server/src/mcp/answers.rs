//! What a tool call answers through MCP (docs/mcp.md, "Results and errors"): the
//! snapshot as text with its `[ref=eN]` refs, a screenshot as image content with a
//! one-line caption, other results as their JSON; a failure as a tool error
//! (`isError`) whose text says what to do next, keeping the stable code.

use base64::Engine as _;
use latchkey_protocol::policy::PolicyReason;
use latchkey_protocol::{ErrorBody, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// A successful result of `method`, read from the browser's JSON.
pub fn success(method: &str, result: Value, max_image_bytes: usize) -> CallToolResult {
    match method {
        "tool.screenshot" => screenshot(result, max_image_bytes),
        "tool.snapshot" | "tool.observe" => snapshot(&result),
        _ => structured(result),
    }
}

/// Any other result: its JSON as text, and as structured content for programs.
pub fn structured(result: Value) -> CallToolResult {
    let text = result.to_string();
    let mut answer = CallToolResult::success(vec![ContentBlock::text(text)]);
    if result.is_object() {
        answer.structured_content = Some(result);
    }
    answer
}

fn snapshot(result: &Value) -> CallToolResult {
    let text = result.get("text").and_then(Value::as_str).unwrap_or("");
    let mut head = format!(
        "Tab {} · {} refs",
        number(result, "tab_id"),
        number(result, "ref_count")
    );
    if result.get("truncated").and_then(Value::as_bool) == Some(true) {
        head.push_str(" · truncated: raise max_tokens or snapshot a smaller part");
    }
    let text = playwright_refs(text);
    let mut blocks = vec![ContentBlock::text(format!("{head}\n{text}"))];
    if let Some(dialogs) = dialogs(result) {
        blocks.push(dialogs);
    }
    CallToolResult::success(blocks)
}

fn screenshot(result: Value, max_image_bytes: usize) -> CallToolResult {
    let Some(data) = result.get("image_base64").and_then(Value::as_str) else {
        return failure(ErrorBody::new(
            ErrorCode::ProtocolError,
            "the browser's screenshot carries no image",
        ));
    };
    let format = result
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("png");
    let mime = match format {
        "jpeg" | "jpg" => "image/jpeg",
        _ => "image/png",
    };
    // Decoded, so a caption can say the real size; a bad encoding is the
    // browser's fault, named as such.
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(bytes) => bytes.len(),
        Err(_) => {
            return failure(ErrorBody::new(
                ErrorCode::ProtocolError,
                "the browser's screenshot is not base64",
            ));
        }
    };
    if bytes > max_image_bytes {
        return failure(ErrorBody::new(
            ErrorCode::CapacityReached,
            format!(
                "the screenshot is {bytes} bytes, over this gateway's limit of \
                 {max_image_bytes}: screenshot one element by ref, or make the window \
                 smaller with browser_resize"
            ),
        ));
    }
    let caption = format!(
        "Screenshot of tab {}, {}×{} px, {format}, {bytes} bytes",
        number(&result, "tab_id"),
        number(&result, "width"),
        number(&result, "height"),
    );
    let mut blocks = vec![
        ContentBlock::image(data.to_string(), mime),
        ContentBlock::text(caption),
    ];
    if let Some(dialogs) = dialogs(&result) {
        blocks.push(dialogs);
    }
    CallToolResult::success(blocks)
}

/// The extension marks refs `@eN`; MCP agents know playwright-mcp's `[ref=eN]`.
/// Only a ref mark outside a quoted name or value is rewritten (a page's own text
/// is left as it is); the tools take `eN` either way.
pub fn playwright_refs(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut quoted = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if quoted {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                '\n' => quoted = false,
                _ => {}
            }
        } else if c == '"' {
            quoted = true;
        } else if c == '@' && out.ends_with(' ') {
            let digits = rest[1..]
                .strip_prefix('e')
                .map_or(0, |d| d.bytes().take_while(u8::is_ascii_digit).count());
            let end = 2 + digits;
            let boundary = rest[end.min(rest.len())..]
                .chars()
                .next()
                .is_none_or(|n| !n.is_alphanumeric());
            if digits > 0 && boundary {
                out.push_str("[ref=");
                out.push_str(&rest[1..end]);
                out.push(']');
                rest = &rest[end..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Dialogs the call met, which the agent should know were answered for it.
fn dialogs(result: &Value) -> Option<ContentBlock> {
    let dialogs = result.get("dialogs")?.as_array()?;
    (!dialogs.is_empty()).then(|| ContentBlock::text(format!("Dialogs: {}", json!(dialogs))))
}

fn number(result: &Value, key: &str) -> String {
    result
        .get(key)
        .map_or_else(|| "?".to_string(), |v| v.to_string())
}

/// A failed call as a tool error: `code (reason): message` and what to do next,
/// with the error body as structured content so programs read the code.
pub fn failure(body: ErrorBody) -> CallToolResult {
    let mut answer = CallToolResult::error(vec![ContentBlock::text(failure_text(&body))]);
    answer.structured_content = Some(json!({ "error": body }));
    answer
}

/// A failure's text: `code (reason): message [field f]` and the hint, if any.
pub fn failure_text(body: &ErrorBody) -> String {
    let reason = body
        .data
        .as_ref()
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    let field = body
        .data
        .as_ref()
        .and_then(|d| d.get("field"))
        .and_then(Value::as_str);
    let mut text = body.code.as_str().to_string();
    if let Some(reason) = reason {
        text.push_str(&format!(" ({reason})"));
    }
    text.push_str(": ");
    text.push_str(&body.message);
    if let Some(field) = field {
        text.push_str(&format!(" [field {field}]"));
    }
    if let Some(hint) = hint(body.code, reason) {
        text.push('\n');
        text.push_str(hint);
    }
    text
}

/// What an agent can do about a failure, where something can be done.
pub fn hint(code: ErrorCode, reason: Option<&str>) -> Option<&'static str> {
    Some(match (code, reason) {
        (_, Some("ref_not_found")) => {
            "stale ref: call browser_snapshot again and use a ref from it"
        }
        (_, Some("selector_not_found")) => {
            "nothing matches: call browser_snapshot and target the element by ref"
        }
        (_, Some("element_not_visible")) => {
            "scroll it into view or close what covers it, then browser_snapshot again"
        }
        (_, Some("agent_window_scope")) => {
            "that tab is not in this session's window: call browser_tabs for its tabs"
        }
        (_, Some("tab_not_active")) => "select the tab first with browser_tab_select",
        (_, Some("restricted_tab_url")) => {
            "browser pages cannot be read or driven: navigate the tab to a web page"
        }
        (_, Some("borrow_conflict")) => "another session has borrowed that tab: use another",
        (_, Some("target_not_fillable")) => {
            "that element takes no typing: click checkboxes and buttons with browser_click"
        }
        (_, Some("target_not_select")) => {
            "that is not a <select>: click a custom list's option with browser_click"
        }
        (_, Some("option_not_found") | Some("single_select_value_count")) => {
            "use one option's value or label as browser_snapshot shows it"
        }
        (ErrorCode::UnknownMethod, _) => {
            "this browser's extension does not offer that tool: reach the goal with others"
        }
        (_, Some("session_busy")) => "another call of this session is still running: wait for it",
        (_, Some("consent_denied")) => "the browser's person said no: do not ask again unprompted",
        (ErrorCode::MultipleBrowsersOnline, _) => {
            "call browser_list, then browser_select with the id of the browser to use"
        }
        (ErrorCode::NoBrowserConnected | ErrorCode::BrowserDisconnected, _) => {
            "the browser is not online: call browser_list to see which are"
        }
        (ErrorCode::SessionEnded, _) => {
            "call browser_select to open a new session (its person may be asked)"
        }
        (ErrorCode::UserAborted, _) => {
            "the browser's person pressed Stop: ask them before going on"
        }
        (ErrorCode::PermissionDenied, Some(reason)) if is_policy(reason) => {
            "a policy of the team or the person forbids this"
        }
        (ErrorCode::InvalidParams, _) => "check the arguments against the tool's input schema",
        (ErrorCode::RateLimited, _) => "slow down and retry shortly",
        _ => return None,
    })
}

/// A refusal by a policy, rather than by the browser or the page.
fn is_policy(reason: &str) -> bool {
    PolicyReason::ALL.iter().any(|r| r.as_str() == reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(answer: &CallToolResult) -> String {
        answer
            .content
            .iter()
            .filter_map(|b| b.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_stale_ref_says_to_snapshot_again() {
        let mut body = ErrorBody::new(ErrorCode::NotFound, "ref e9 is unknown");
        body.data = Some(json!({"reason": "ref_not_found"}));
        let answer = failure(body);
        assert_eq!(answer.is_error, Some(true));
        let text = text_of(&answer);
        assert!(text.starts_with("not_found (ref_not_found): ref e9 is unknown"));
        assert!(text.contains("call browser_snapshot again"));
    }

    #[test]
    fn a_policy_hint_only_for_a_policys_refusal() {
        let denied = |reason: &str| hint(ErrorCode::PermissionDenied, Some(reason));
        // The person's own no has a hint of its own.
        for r in PolicyReason::ALL
            .into_iter()
            .filter(|r| *r != PolicyReason::ConsentDenied)
        {
            assert_eq!(
                denied(r.as_str()),
                Some("a policy of the team or the person forbids this")
            );
        }
        for reason in [
            "restricted_tab_url",
            "borrow_conflict",
            "agent_window_scope",
        ] {
            let said = denied(reason).unwrap_or_default();
            assert!(
                !said.is_empty() && !said.contains("policy"),
                "{reason}: {said}"
            );
        }
        assert_eq!(denied("something_new"), None);
        let fill = hint(ErrorCode::InvalidParams, Some("target_not_fillable"));
        assert!(fill.is_some_and(|h| h.contains("browser_click")));
        let unknown = hint(ErrorCode::UnknownMethod, None);
        assert!(unknown.is_some_and(|h| h.contains("does not offer")));
    }

    #[test]
    fn refs_are_written_as_playwright_writes_them_outside_quotes_only() {
        assert_eq!(
            playwright_refs(
                "- textbox \"Email\" @e12: \"ann @e3 x\"\n- link \"a\\\" @e4\" @e5\n- x @e @eb @e6x @e7"
            ),
            "- textbox \"Email\" [ref=e12]: \"ann @e3 x\"\n- link \"a\\\" @e4\" [ref=e5]\n- x @e @eb @e6x [ref=e7]"
        );
        assert_eq!(playwright_refs("ü @e1"), "ü [ref=e1]");
        // Several elements inline on one line, between quoted page text, and a link
        // target whose spaces and quotes the extension percent-encoded.
        assert_eq!(
            playwright_refs(
                "- paragraph: \"Say @e9\" link \"A\" @e1 -> /a%20@e8%22 \"and\" link \"B\" @e2 -> /b"
            ),
            "- paragraph: \"Say @e9\" link \"A\" [ref=e1] -> /a%20@e8%22 \"and\" link \"B\" [ref=e2] -> /b"
        );
    }

    #[test]
    fn a_snapshot_is_text_with_its_refs() {
        let answer = success(
            "tool.snapshot",
            json!({"tab_id": 3, "ref_count": 1, "text": "- button \"Go\" @e1"}),
            1 << 20,
        );
        assert_eq!(answer.is_error, Some(false));
        assert_eq!(text_of(&answer), "Tab 3 · 1 refs\n- button \"Go\" [ref=e1]");
    }

    #[test]
    fn a_screenshot_is_an_image_with_a_caption_and_a_cap() {
        let png = base64::engine::general_purpose::STANDARD.encode([0u8; 100]);
        let shot =
            json!({"tab_id": 2, "format": "png", "width": 10, "height": 5, "image_base64": png});
        let answer = success("tool.screenshot", shot.clone(), 100);
        assert!(matches!(answer.content[0], ContentBlock::Image(_)));
        assert_eq!(
            text_of(&answer),
            "Screenshot of tab 2, 10×5 px, png, 100 bytes"
        );
        let over = success("tool.screenshot", shot, 99);
        assert_eq!(over.is_error, Some(true));
        assert!(text_of(&over).contains("over this gateway's limit of 99"));
    }
}
