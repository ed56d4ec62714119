//! What the browser's person did, in the team's audit trail (docs/operations.md,
//! "Audit"): an interrupt of an Agent Window (`session.user_interrupt`, a
//! contract event: Pause in our extension, Stop in a contract-only one) and
//! "Stop all agents" pressed in our extension
//! (`latchkey.kill_switch`, docs/protocol.md "Latchkey's additions"). The
//! person's extension and the team's admins see the same story.

use tracing::info;

use super::Connection;
use crate::audit::{self, Event, action};
use crate::sessions::table::{MAX_AUDITED_REPORTS, Report, Session};
use crate::socket::Socket;

/// The outcome of the disconnect row of a browser whose person pressed the
/// kill switch (its sessions end with `EndReason::KillSwitch`).
pub const KILL_SWITCH: &str = "kill_switch";

impl<S: Socket> Connection<S> {
    /// The person interrupted `session` (Pause in our extension): one `session.interrupt` row under the browser, written off
    /// the socket's path, for the first [`MAX_AUDITED_REPORTS`] of a session.
    pub(super) fn audit_interrupt(&self, session: &Session) {
        if session.count_report(Report::Interrupt) >= MAX_AUDITED_REPORTS {
            tracing::debug!(session = %session.id, "interrupt beyond the audited bound");
            return;
        }
        self.state.audit.record_detached(Event {
            tenant_id: &self.device.tenant_id,
            actor: audit::device_ref(&self.device.id),
            action: action::SESSION_INTERRUPT,
            target: format!("session:{}", session.id),
            outcome: "ok",
            detail: Some(format!(
                "interrupted by the person; agent {}",
                session.actor
            )),
        });
    }

    /// "Stop all agents": remembered for the connection's end (which follows at
    /// once), and one `device.kill_switch` row with the sessions it ends.
    pub(super) fn on_kill_switch(&mut self) {
        if self.kill_switch {
            return;
        }
        self.kill_switch = true;
        let open = self
            .state
            .sessions
            .list(|s| s.device_id == self.device.id)
            .len();
        info!(sessions = open, "kill switch pressed");
        self.state.audit.record_detached(Event::by_device(
            &self.device.tenant_id,
            &self.device.id,
            action::DEVICE_KILL_SWITCH,
            "ok",
            Some(format!("Stop all agents pressed; sessions ended: {open}")),
        ));
    }
}
