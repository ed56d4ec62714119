//! The names the remote MCP endpoint gives the catalogue's methods (docs/mcp.md).
//! Agents already know playwright-mcp's tool names (`browser_navigate`,
//! `browser_snapshot`, `browser_click`, …), so a method that does what one of those
//! does takes its name; the rest follow the same pattern. Params, descriptions and
//! hints come from the catalogue entry the name points at, so a method is still
//! described once.

use super::{TOOLS, Tool, tool_named};
use crate::effect::Effect;

/// One catalogue method as an MCP tool.
#[derive(Debug, Clone, Copy)]
pub struct McpTool {
    /// The MCP tool name.
    pub name: &'static str,
    /// The `tool.*` method it calls.
    pub method: &'static str,
}

impl McpTool {
    /// The catalogue entry it calls.
    pub fn tool(&self) -> Option<&'static Tool> {
        tool_named(self.method)
    }
}

const fn named(name: &'static str, method: &'static str) -> McpTool {
    McpTool { name, method }
}

/// Every method an agent may call, by its MCP name. The session lifecycle methods
/// are not here: the endpoint opens and ends sessions itself (docs/mcp.md,
/// "Sessions").
pub static MCP_TOOLS: &[McpTool] = &[
    named("browser_tabs", "tool.tab_list"),
    named("browser_tab_new", "tool.tab_create"),
    named("browser_tab_close", "tool.tab_close"),
    named("browser_tab_select", "tool.tab_select"),
    named("browser_borrow_tab", "tool.tab_borrow"),
    named("browser_return_tab", "tool.tab_return"),
    named("browser_resize", "tool.window_resize"),
    named("browser_emulate", "tool.emulate"),
    named("browser_navigate", "tool.navigate"),
    named("browser_navigate_back", "tool.navigate_back"),
    named("browser_navigate_forward", "tool.navigate_forward"),
    named("browser_reload", "tool.reload"),
    named("browser_wait_for_navigation", "tool.wait_for_navigation"),
    named("browser_wait_for", "tool.wait_ms"),
    named("browser_click", "tool.click"),
    named("browser_hover", "tool.hover"),
    named("browser_type", "tool.fill"),
    named("browser_press_key", "tool.press"),
    named("browser_select_option", "tool.select"),
    named("browser_snapshot", "tool.snapshot"),
    named("browser_observe", "tool.observe"),
    named("browser_get_html", "tool.get_html"),
    named("browser_take_screenshot", "tool.screenshot"),
    named("browser_console_messages", "tool.console"),
    named("browser_network_requests", "tool.network"),
    named("browser_evaluate", "tool.evaluate"),
    named("request_help", "tool.request_help"),
    named("browser_record_start", "tool.record_start"),
    named("browser_record_stop", "tool.record_stop"),
    named("browser_record_await", "tool.record_await"),
];

/// The MCP tool named `name`.
pub fn mcp_tool(name: &str) -> Option<&'static McpTool> {
    MCP_TOOLS.iter().find(|t| t.name == name)
}

/// The MCP name of `method`, if agents may call it through MCP.
pub fn mcp_name(method: &str) -> Option<&'static str> {
    MCP_TOOLS
        .iter()
        .find(|t| t.method == method)
        .map(|t| t.name)
}

/// MCP's `readOnlyHint`: the method only reads.
pub fn read_only(tool: &Tool) -> bool {
    matches!(tool.effect, Effect::PassiveRead)
}

/// MCP's `destructiveHint`: the method may change what the person's browser holds
/// (pages, tabs, form state); hover-like probes and reads do not.
pub fn destructive(tool: &Tool) -> bool {
    matches!(tool.effect, Effect::BrowserMutation)
}

/// Every catalogue method an agent may call has exactly one MCP name.
pub fn unnamed_methods() -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|t| !t.session_lifecycle)
        .filter(|t| MCP_TOOLS.iter().filter(|m| m.method == t.method).count() != 1)
        .map(|t| t.method)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_method_has_one_name_and_every_name_one_method() {
        assert_eq!(unnamed_methods(), Vec::<&str>::new());
        for t in MCP_TOOLS {
            let tool = t
                .tool()
                .unwrap_or_else(|| panic!("{} names no method", t.name));
            assert!(!tool.session_lifecycle, "{} is the gateway's", t.method);
            assert_eq!(
                MCP_TOOLS.iter().filter(|o| o.name == t.name).count(),
                1,
                "{} twice",
                t.name
            );
            // MCP tool names: 1..=128 of [A-Za-z0-9_.-].
            assert!(
                t.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            );
        }
    }

    #[test]
    fn hints_follow_the_effect_class() {
        let snapshot = mcp_tool("browser_snapshot").and_then(McpTool::tool);
        let click = mcp_tool("browser_click").and_then(McpTool::tool);
        let hover = mcp_tool("browser_hover").and_then(McpTool::tool);
        let (Some(snapshot), Some(click), Some(hover)) = (snapshot, click, hover) else {
            panic!("names missing");
        };
        assert!(read_only(snapshot) && !destructive(snapshot));
        assert!(!read_only(click) && destructive(click));
        assert!(!read_only(hover) && !destructive(hover));
        assert_eq!(mcp_name("tool.fill"), Some("browser_type"));
        assert_eq!(mcp_name("tool.session_start"), None);
    }
}
