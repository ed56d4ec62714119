//! Sessions without ceremony (docs/mcp.md, "Sessions"): an MCP client never sees a
//! session id. Each caller (tenant, token and the optional `Latchkey-Session-Key`)
//! has one choice: the browser it picked or was given, and the Latchkey session open
//! on it. The first browser tool call opens the session; after it ends (the idle
//! reaper, the person's Stop, `browser_close`) the next call opens a new one on the
//! same browser.
//!
//! The choices live in this node's memory, bounded: a caller whose choice was
//! forgotten (evicted, or another node answering) starts over from "the only
//! browser online", or is asked to pick one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use latchkey_protocol::EndReason;
use latchkey_protocol::agent::{StartSessionRequest, StopSessionResult};

use crate::auth::principal::Principal;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::sessions::start_stop;
use crate::sessions::table::Session;

/// Callers remembered per node; past this the least recently used is forgotten.
const MAX_CHOICES: usize = 10_000;
/// The longest `Latchkey-Session-Key` kept.
pub const MAX_KEY_CHARS: usize = 64;

/// Whose choice: sessions are the token's own, as on the REST API.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    tenant_id: String,
    token_id: String,
    key: String,
}

impl Caller {
    /// The caller `p`, kept apart from the token's other clients by `key`.
    pub fn new(p: &Principal, key: &str) -> Self {
        Self {
            tenant_id: p.tenant_id.clone(),
            token_id: p.token_id.clone(),
            key: key.to_string(),
        }
    }
}

#[derive(Debug, Default)]
struct Choice {
    /// The browser picked or first given.
    device_id: Option<String>,
    /// The session open on it, if it has not ended.
    session_id: Option<String>,
    /// Set when the session was ended by a decision the endpoint must not undo
    /// on its own (the person's Stop, an admin, a policy): until the agent picks
    /// a browser again, calls answer `session_ended` with this reason.
    halted: Option<EndReason>,
}

/// Ends after which the next call may open a new session by itself: nobody
/// decided against the agent.
fn reopens(reason: EndReason) -> bool {
    matches!(
        reason,
        EndReason::Stopped
            | EndReason::Idle
            | EndReason::BrowserDisconnected
            | EndReason::BrowserReconnected
            | EndReason::ServerShuttingDown
    )
}

/// One caller's choice behind its own lock, and when it was last used.
type Slot = (Arc<tokio::sync::Mutex<Choice>>, u64);

/// Each caller's choice behind its own lock, so one caller's opening (which may
/// wait for a person's consent) never holds up another's.
#[derive(Debug, Default)]
pub struct Choices {
    slots: Mutex<HashMap<Caller, Slot>>,
    /// A counter standing in for "when last used".
    uses: std::sync::atomic::AtomicU64,
}

impl Choices {
    fn slot(&self, caller: &Caller) -> Arc<tokio::sync::Mutex<Choice>> {
        let used = self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((slot, at)) = slots.get_mut(caller) {
            *at = used;
            return slot.clone();
        }
        if slots.len() >= MAX_CHOICES
            && let Some(oldest) = slots
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(c, _)| c.clone())
        {
            slots.remove(&oldest);
        }
        let slot = Arc::new(tokio::sync::Mutex::new(Choice::default()));
        slots.insert(caller.clone(), (slot.clone(), used));
        slot
    }

    /// The caller's session, opened on its browser if none is open.
    pub async fn session(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
    ) -> Result<Arc<Session>, CoreError> {
        let slot = self.slot(caller);
        let mut choice = slot.lock().await;
        if let Some(session) = live(core, p, &mut choice)? {
            return Ok(session);
        }
        let device_id = choice.device_id.clone();
        open(core, p, &mut choice, device_id, None).await
    }

    /// Pick `device_id`: the session on another browser ends, one opens on this.
    pub async fn select(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
        device_id: &str,
        purpose: Option<String>,
    ) -> Result<Arc<Session>, CoreError> {
        let slot = self.slot(caller);
        let mut choice = slot.lock().await;
        choice.halted = None;
        if let Some(session) = live(core, p, &mut choice)? {
            if session.device_id == device_id {
                return Ok(session);
            }
            start_stop::stop(core, &session, EndReason::Stopped).await?;
            choice.session_id = None;
        }
        open(core, p, &mut choice, Some(device_id.to_string()), purpose).await
    }

    /// End the caller's session, if one is open; the browser stays chosen.
    pub async fn close(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
    ) -> Result<Option<StopSessionResult>, CoreError> {
        let slot = self.slot(caller);
        let mut choice = slot.lock().await;
        let Ok(Some(session)) = live(core, p, &mut choice) else {
            return Ok(None);
        };
        choice.session_id = None;
        start_stop::stop(core, &session, EndReason::Stopped)
            .await
            .map(Some)
    }
}

/// The caller's open session; none when it has none or its last one ended in a
/// way [`reopens`] allows; `session_ended` when a decision ended it.
fn live(
    core: &Core,
    p: &Principal,
    choice: &mut Choice,
) -> Result<Option<Arc<Session>>, CoreError> {
    if let Some(reason) = choice.halted {
        return Err(CoreError::SessionEnded(reason));
    }
    let Some(id) = choice.session_id.clone() else {
        return Ok(None);
    };
    let ended = match core.sessions.owned(p, &id) {
        Ok(session) => match session.end_reason() {
            None if !session.is_ended() => return Ok(Some(session)),
            reason => reason,
        },
        Err(CoreError::SessionEnded(reason)) => Some(reason),
        Err(CoreError::SessionNotFound) => None,
        Err(e) => return Err(e),
    };
    choice.session_id = None;
    match ended {
        Some(reason) if !reopens(reason) => {
            choice.halted = Some(reason);
            Err(CoreError::SessionEnded(reason))
        }
        _ => Ok(None),
    }
}

async fn open(
    core: &Core,
    p: &Principal,
    choice: &mut Choice,
    device_id: Option<String>,
    purpose: Option<String>,
) -> Result<Arc<Session>, CoreError> {
    let request = StartSessionRequest {
        browser_id: device_id,
        purpose,
        ..StartSessionRequest::default()
    };
    let session = start_stop::start(core, p, request).await?;
    choice.device_id = Some(session.device_id.clone());
    choice.session_id = Some(session.id.clone());
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(n: usize) -> Caller {
        Caller {
            tenant_id: "t".into(),
            token_id: format!("tok{n}"),
            key: String::new(),
        }
    }

    #[test]
    fn the_least_recently_used_caller_is_forgotten_first() {
        let choices = Choices::default();
        for n in 0..MAX_CHOICES {
            choices.slot(&caller(n));
        }
        // Caller 0 used again: caller 1 is now the oldest.
        let kept = choices.slot(&caller(0));
        choices.slot(&caller(MAX_CHOICES));
        let slots = choices.slots.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(slots.len(), MAX_CHOICES);
        assert!(!slots.contains_key(&caller(1)));
        assert!(Arc::ptr_eq(&slots[&caller(0)].0, &kept));
    }
}
