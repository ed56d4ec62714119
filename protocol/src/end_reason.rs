//! Why a session ended: the one list the agent's `session_ended` event, the
//! `session_ended` error of a later call, the `session.end` audit row and the
//! person's extension all read (docs/sessions.md, "How a session ends").
//!
//! An agent must be able to tell "I stopped it" from "the person stopped it"
//! from "the browser went away", so every path that ends a session names one of
//! these; free text never reaches the wire.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// Why a session ended. Stable: a reason never changes meaning once shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Its agent stopped it.
    Stopped,
    /// A team admin stopped it.
    StoppedByAdmin,
    /// No call for the idle timeout.
    Idle,
    /// It reached its policy's `max_session_minutes`.
    TimeLimit,
    /// A policy written while it ran no longer admits it.
    PolicyChanged,
    /// The API token that opened it was revoked.
    TokenRevoked,
    /// The API token that opened it expired.
    TokenExpired,
    /// The browser's person closed its Agent Window.
    WindowClosed,
    /// The browser's person pressed Stop on its Agent Window.
    UserStopped,
    /// The browser's person pressed "Stop all agents".
    KillSwitch,
    /// An admin (or the person) revoked the browser.
    DeviceRevoked,
    /// The browser's grant expired.
    DeviceExpired,
    /// The browser's connection ended (network, closed, replaced).
    BrowserDisconnected,
    /// The browser connected again; a new connection starts with no sessions.
    BrowserReconnected,
    /// The gateway shut down.
    ServerShuttingDown,
}

impl EndReason {
    /// Every reason, in the order above.
    pub const ALL: [EndReason; 15] = [
        Self::Stopped,
        Self::StoppedByAdmin,
        Self::Idle,
        Self::TimeLimit,
        Self::PolicyChanged,
        Self::TokenRevoked,
        Self::TokenExpired,
        Self::WindowClosed,
        Self::UserStopped,
        Self::KillSwitch,
        Self::DeviceRevoked,
        Self::DeviceExpired,
        Self::BrowserDisconnected,
        Self::BrowserReconnected,
        Self::ServerShuttingDown,
    ];

    /// The wire name (the serde name).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "stopped",
            Self::StoppedByAdmin => "stopped_by_admin",
            Self::Idle => "idle",
            Self::TimeLimit => "time_limit",
            Self::PolicyChanged => "policy_changed",
            Self::TokenRevoked => "token_revoked",
            Self::TokenExpired => "token_expired",
            Self::WindowClosed => "window_closed",
            Self::UserStopped => "user_stopped",
            Self::KillSwitch => "kill_switch",
            Self::DeviceRevoked => "device_revoked",
            Self::DeviceExpired => "device_expired",
            Self::BrowserDisconnected => "browser_disconnected",
            Self::BrowserReconnected => "browser_reconnected",
            Self::ServerShuttingDown => "server_shutting_down",
        }
    }

    /// One clause a person or an agent reads: "the session ended: …".
    pub const fn describe(self) -> &'static str {
        match self {
            Self::Stopped => "its agent stopped it",
            Self::StoppedByAdmin => "a team admin stopped it",
            Self::Idle => "it was idle too long",
            Self::TimeLimit => "it reached its policy's time limit",
            Self::PolicyChanged => "a policy change no longer allows it",
            Self::TokenRevoked => "the agent's token was revoked",
            Self::TokenExpired => "the agent's token expired",
            Self::WindowClosed => "the browser's person closed its window",
            Self::UserStopped => "the browser's person stopped it",
            Self::KillSwitch => "the browser's person stopped all agents",
            Self::DeviceRevoked => "the browser's access was revoked",
            Self::DeviceExpired => "the browser's access expired",
            Self::BrowserDisconnected => "the browser disconnected",
            Self::BrowserReconnected => "the browser reconnected and starts afresh",
            Self::ServerShuttingDown => "the gateway shut down",
        }
    }

    /// Ended by the browser's person (the extension shows these apart).
    pub const fn by_person(self) -> bool {
        matches!(
            self,
            Self::WindowClosed | Self::UserStopped | Self::KillSwitch
        )
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_once_and_named_as_serde_names_it() {
        let mut seen = std::collections::HashSet::new();
        for r in EndReason::ALL {
            assert!(seen.insert(r.as_str()), "{r} twice");
            let json = serde_json::to_value(r).expect("serialises");
            assert_eq!(json, r.as_str());
            let back: EndReason = serde_json::from_value(json).expect("reads back");
            assert_eq!(back, r);
            assert!(!r.describe().is_empty());
        }
    }
}
