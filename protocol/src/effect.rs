//! Effect classes of extension methods (docs/protocol.md, "Events from the extension") and the
//! gateway's limits that are not a tool's own (those are in the catalogue,
//! [`crate::tools::catalogue`]). The `user_aborted` gate consumes its marker on the next
//! gated call.

/// What a method does to the user's browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Changes tabs, windows, pages or input state. Gated.
    BrowserMutation,
    /// Hover-like probes. Gated.
    TransientInput,
    /// Reads. Never gated.
    PassiveRead,
    /// Session and connection management. Never gated.
    ControlPlane,
}

impl Effect {
    /// The class's name in published documents (the tool catalogue's schema).
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::BrowserMutation => "browser_mutation",
            Effect::TransientInput => "transient_input",
            Effect::PassiveRead => "passive_read",
            Effect::ControlPlane => "control_plane",
        }
    }

    /// Whether a pending user interrupt refuses this call.
    pub fn is_gated(self) -> bool {
        matches!(self, Effect::BrowserMutation | Effect::TransientInput)
    }
}

/// The effect of `method`: a tool's from the catalogue ([`crate::tools::TOOLS`]),
/// the control plane for the session and connection methods. Unknown methods count
/// as mutations: an interrupt the user pressed must never be bypassed by a method
/// the gateway does not know.
pub fn effect(method: &str) -> Effect {
    if let Some(tool) = crate::tools::tool_named(method) {
        return tool.effect;
    }
    match method {
        "session.start" | "session.stop" | "session.stop_all" | "session.list"
        | "system.handshake" | "system.ping" | "system.status" | "browser.list" | "cancel" => {
            Effect::ControlPlane
        }
        _ => Effect::BrowserMutation,
    }
}

/// Session lifecycle methods: only the gateway sends them, through the session API.
pub const SESSION_START: &str = "tool.session_start";
pub const SESSION_STOP: &str = "tool.session_stop";

/// The longest `timeout_ms` an agent may ask for (docs/protocol.md, "Limits": 10 min).
pub const MAX_CALL_TIMEOUT_MS: u64 = 600_000;
/// `tool.session_start` reply wait (docs/protocol.md, "Limits").
pub const SESSION_START_TIMEOUT_MS: u64 = 15_000;
/// `tool.session_stop` budget (docs/protocol.md, "Limits").
pub const SESSION_STOP_TIMEOUT_MS: u64 = 50_000;
/// How long a cancelled call keeps its session busy waiting for the final answer.
pub const CANCEL_GRACE_MS: u64 = 2_000;
/// `tool.wait_ms` upper bound.
pub const MAX_WAIT_MS: u64 = 300_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_per_contract() {
        assert_eq!(effect("tool.click"), Effect::BrowserMutation);
        assert_eq!(effect("tool.evaluate"), Effect::BrowserMutation);
        assert_eq!(effect("tool.hover"), Effect::TransientInput);
        assert_eq!(effect("tool.snapshot"), Effect::PassiveRead);
        assert_eq!(effect("tool.session_stop"), Effect::ControlPlane);
        assert_eq!(effect("tool.brand_new"), Effect::BrowserMutation);
        assert!(effect("tool.observe").is_gated());
        assert!(!effect("tool.request_help").is_gated());
    }
}
