//! `latchkey.site_blocked` (docs/protocol.md, "Latchkey's additions"): our
//! extension stopped an agent tab on its way to a site the session's policy
//! refuses. The agent hears of it as a session event, and the team's audit
//! trail keeps it under the token that opened the session.

use latchkey_protocol::additions::{MAX_REPORTED_HOST_CHARS, SiteBlocked};
use latchkey_protocol::agent::SessionEvent;
use latchkey_protocol::policy::PolicyReason;
use latchkey_protocol::text;
use tracing::debug;

use super::Connection;
use crate::audit::{Event, action};
use crate::sessions::table::{MAX_AUDITED_REPORTS, Report};
use crate::socket::Socket;

impl<S: Socket> Connection<S> {
    /// Relay and audit a stopped navigation of one of this device's sessions;
    /// anything else (another device's session, a malformed payload, a reason
    /// that is not about sites) is ignored.
    pub(super) fn on_site_blocked(&self, payload: &serde_json::Value) {
        let Ok(report) = serde_json::from_value::<SiteBlocked>(payload.clone()) else {
            debug!("malformed site_blocked event ignored");
            return;
        };
        if !matches!(
            report.reason,
            PolicyReason::SiteBlocked
                | PolicyReason::SiteNotAllowed
                | PolicyReason::SchemeNotAllowed
        ) {
            return;
        }
        let Some(session) = self
            .state
            .sessions
            .get_on_device(&self.device.id, &report.session_id)
        else {
            debug!("site_blocked for a session this device does not own ignored");
            return;
        };
        // Bounded and cleaned before it is shown or stored (docs/security.md).
        let host = text::clean(&report.host, MAX_REPORTED_HOST_CHARS);
        let pattern = report
            .pattern
            .as_deref()
            .map(|p| text::clean(p, MAX_REPORTED_HOST_CHARS));
        session.emit(SessionEvent::SiteBlocked {
            session_id: session.id.clone(),
            tab_id: report.tab_id,
            host: host.clone(),
            reason: report.reason,
        });
        crate::telemetry::metrics::refused("policy_browser");
        if session.count_report(Report::SiteBlock) >= MAX_AUDITED_REPORTS {
            debug!(session = %session.id, "site_blocked beyond the audited bound");
            return;
        }
        let mut detail = format!(
            "browser stopped tab {} at {} ({}",
            report.tab_id,
            host,
            report.reason.as_str()
        );
        if let Some(p) = pattern {
            detail.push_str(&format!(" pattern:{p}"));
        }
        detail.push(')');
        self.state.audit.record_detached(Event {
            tenant_id: &session.tenant_id,
            actor: session.actor.clone(),
            action: action::POLICY_DENY,
            target: format!("session:{}", session.id),
            outcome: "denied",
            detail: Some(detail),
        });
    }
}
