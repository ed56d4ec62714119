//! "Stop all agents" pressed in our extension (`latchkey.kill_switch`,
//! docs/protocol.md "Latchkey's additions"), in the team's audit trail
//! (docs/operations.md, "Audit"): the person's extension and the team's admins
//! see the same story. (An interrupt of one Agent Window is audited where its
//! session lives: `devices::session_events`.)

use tracing::info;

use super::Connection;
use crate::audit::{Event, action};
use crate::socket::Socket;

/// The outcome of the disconnect row of a browser whose person pressed the
/// kill switch (its sessions end with `EndReason::KillSwitch`).
pub const KILL_SWITCH: &str = "kill_switch";

impl<S: Socket> Connection<S> {
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
