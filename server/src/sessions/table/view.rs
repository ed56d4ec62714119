//! A session as the agent API shows it, and the steps of its start that the
//! view reports (docs/sessions.md).

use latchkey_protocol::agent::{SessionPhase, SessionView};

use super::Session;
use crate::clock::rfc3339;

impl Session {
    pub fn view(&self) -> SessionView {
        let s = self.state();
        let phase = if s.stopping || s.ended {
            SessionPhase::Stopping
        } else if s.opened {
            SessionPhase::Open
        } else if s.consent_pending {
            SessionPhase::ConsentPending
        } else {
            SessionPhase::Starting
        };
        SessionView {
            id: self.id.clone(),
            browser_id: self.device_id.clone(),
            agent: self.actor.clone(),
            agent_window_id: s.agent_window_id,
            created_at: rfc3339(self.created_at),
            last_activity_at: rfc3339(s.last_activity),
            busy: s.busy,
            phase,
            purpose: s.purpose.clone(),
            asking_for_help: s.asking_for_help,
        }
    }

    /// Why the agent wants the browser, for the lists to show.
    pub fn set_purpose(&self, purpose: Option<String>) {
        self.state().purpose = purpose;
    }

    /// The browser answered the start: its Agent Window is open.
    pub fn set_opened(&self, agent_window_id: Option<i64>) {
        let mut s = self.state();
        s.agent_window_id = agent_window_id;
        s.opened = true;
        s.consent_pending = false;
    }

    /// The start waits for the browser's person to answer (or stopped waiting).
    pub fn set_consent_pending(&self, pending: bool) {
        self.state().consent_pending = pending;
    }

    /// Add to what the `session.start` audit row says.
    pub fn note_start(&self, note: &str) {
        let mut s = self.state();
        match &mut s.start_note {
            Some(n) => {
                n.push(' ');
                n.push_str(note);
            }
            None => s.start_note = Some(note.to_string()),
        }
    }

    /// Whether the session has ended, whatever ended it.
    pub fn is_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    pub fn start_note(&self) -> Option<String> {
        self.state().start_note.clone()
    }
}
