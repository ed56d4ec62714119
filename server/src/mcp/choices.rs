//! Sessions without ceremony (docs/mcp.md, "Sessions"): an MCP client never sees a
//! session id. Each caller (tenant, token and the optional `Latchkey-Session-Key`)
//! has one choice: the browser it picked or was given, and the Latchkey session open
//! on it. The first browser tool call opens the session; after it ends (the idle
//! reaper, the person's Stop, `browser_close`) the next call opens a new one on the
//! same browser.
//!
//! The choice is kept in the store, so a caller's next request may land on any
//! replica (or on this one after a restart) and carry on with the same browser
//! and session; the session itself is reached where it lives (`sessions::routed`).
//! Each node keeps a copy, trusted while its session is open: a choice changes
//! only after its session was stopped (`browser_select`, `browser_close`) or
//! ended, so an open session is still the choice. Writes name the version they
//! read: when two replicas open a session for one caller at once, the one that
//! writes second stops its own and takes the first one's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use latchkey_protocol::EndReason;
use latchkey_protocol::agent::{StartSessionRequest, StopSessionResult};

use crate::auth::principal::Principal;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::devices::link::RawResult;
use crate::sessions::calls::ToolCall;
use crate::sessions::routed::{self, IfOpen, Scope, Standing};
use crate::sessions::start_stop;
use crate::sessions::table::Session;
use crate::store::{ChoiceKey, McpChoiceRecord};

/// Callers whose copy and lock this node keeps; past this the least recently
/// used is dropped (the store still has its choice).
const MAX_CHOICES: usize = 10_000;
/// The longest `Latchkey-Session-Key` kept.
pub const MAX_KEY_CHARS: usize = 64;
/// Rounds of read, decide, write before a caller whose other clients keep
/// changing its choice is told to retry.
const ROUNDS: usize = 3;

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

    fn store_key(&self) -> ChoiceKey<'_> {
        ChoiceKey {
            tenant_id: &self.tenant_id,
            token_id: &self.token_id,
            caller_key: &self.key,
        }
    }
}

/// The session a browser tool call goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub device_id: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Choice {
    /// The browser picked or first given.
    device_id: Option<String>,
    /// The session open on it, if it has not ended.
    session_id: Option<String>,
    /// Set when the session was ended by a decision the endpoint must not undo
    /// on its own (the person's Stop, an admin, a policy): until the agent picks
    /// a browser again, calls answer `session_ended` with this reason.
    halted: Option<EndReason>,
    /// The stored version this copy was read at or written as; `None` while
    /// the store holds no choice for the caller.
    version: Option<i64>,
}

impl Choice {
    fn chosen(&self) -> Option<Chosen> {
        Some(Chosen {
            device_id: self.device_id.clone()?,
            session_id: self.session_id.clone()?,
        })
    }

    fn from_record(record: McpChoiceRecord) -> Self {
        let halted = record.halted.and_then(|name| {
            let reason = EndReason::ALL.into_iter().find(|r| r.as_str() == name);
            if reason.is_none() {
                tracing::warn!("mcp: a stored end reason is unknown to this version; ignored");
            }
            reason
        });
        Self {
            device_id: record.device_id,
            session_id: record.session_id,
            halted,
            version: Some(record.version),
        }
    }

    fn record(&self) -> McpChoiceRecord {
        McpChoiceRecord {
            device_id: self.device_id.clone(),
            session_id: self.session_id.clone(),
            halted: self.halted.map(|r| r.as_str().to_string()),
            version: self.version.unwrap_or(0),
        }
    }
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

/// One caller's copy behind its own lock, and when it was last used.
type Slot = (Arc<tokio::sync::Mutex<Choice>>, u64);

/// Each caller's copy behind its own lock, so one caller's opening (which may
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

    /// Run `call` on the caller's session, opening one first if none is open.
    pub async fn call(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
        call: ToolCall,
    ) -> Result<RawResult, CoreError> {
        let slot = self.slot(caller);
        // The copy, read and let go: one caller's calls are not queued behind
        // each other (a second meets `session_busy`, as on the REST API).
        let copy = slot.lock().await.chosen();
        let (call, seen) = match copy {
            // Sent only if the session is open when it gets there: no round
            // trip to ask first, and nothing ran when it was not.
            Some(chosen) => match routed::call_if_open(core, p, &chosen.session_id, call).await {
                IfOpen::Ran(answer) => return answer,
                IfOpen::NotOpen(standing, call) => (call, Some((chosen.session_id, standing))),
            },
            None => (call, None),
        };
        let chosen = {
            let mut choice = slot.lock().await;
            settle(core, p, caller, &mut choice, seen).await?
        };
        routed::call(core, p, &chosen.session_id, call).await
    }

    /// The caller's session, opened first if none is open, as [`Self::call`]
    /// opens one: for a tool that must know the browser before it acts.
    pub async fn session(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
    ) -> Result<Chosen, CoreError> {
        let slot = self.slot(caller);
        let mut choice = slot.lock().await;
        settle(core, p, caller, &mut choice, None).await
    }

    /// Pick `device_id`: the session on another browser ends, one opens on this.
    pub async fn select(
        &self,
        core: &Core,
        p: &Principal,
        caller: &Caller,
        device_id: &str,
        purpose: Option<String>,
    ) -> Result<Chosen, CoreError> {
        let slot = self.slot(caller);
        let mut choice = slot.lock().await;
        for _ in 0..ROUNDS {
            reload(core, caller, &mut choice).await?;
            if let Some(chosen) = choice.chosen()
                && routed::standing(core, p, &chosen.session_id).await? == Standing::Open
            {
                if chosen.device_id == device_id {
                    return Ok(chosen);
                }
                stop(core, p, &chosen.session_id).await?;
            }
            let wanted = Some(device_id.to_string());
            if let Some(chosen) =
                open(core, p, caller, &mut choice, wanted, purpose.clone()).await?
            {
                return Ok(chosen);
            }
        }
        Err(contended())
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
        reload(core, caller, &mut choice).await?;
        let Some(chosen) = choice.chosen() else {
            return Ok(None);
        };
        if routed::standing(core, p, &chosen.session_id).await? != Standing::Open {
            return Ok(None);
        }
        let stopped = routed::stop(core, Scope::Agent(p), &chosen.session_id).await;
        let next = Choice {
            session_id: None,
            ..choice.clone()
        };
        // Lost to another writer: its choice stands, and it no longer names
        // this session either way.
        write(core, caller, &mut choice, next).await?;
        stopped.map(Some)
    }
}

/// The caller's open session as the store has it, after a copy that named
/// none open: an open one is kept, one ended by a decision halts the caller,
/// otherwise one is opened on its browser. `seen`: a session already found
/// not open, and how, so it is not asked about again.
async fn settle(
    core: &Core,
    p: &Principal,
    caller: &Caller,
    choice: &mut Choice,
    mut seen: Option<(String, Standing)>,
) -> Result<Chosen, CoreError> {
    for _ in 0..ROUNDS {
        reload(core, caller, choice).await?;
        if let Some(reason) = choice.halted {
            return Err(CoreError::SessionEnded(reason));
        }
        if let Some(chosen) = choice.chosen() {
            let standing = match seen.take() {
                Some((id, standing)) if id == chosen.session_id => standing,
                _ => routed::standing(core, p, &chosen.session_id).await?,
            };
            match standing {
                Standing::Open => return Ok(chosen),
                // Ended by a decision whose record its replica could not
                // write (the store away at the end): written now.
                Standing::Ended(reason) if !reopens(reason) => {
                    let next = Choice {
                        session_id: None,
                        halted: Some(reason),
                        ..choice.clone()
                    };
                    if write(core, caller, choice, next).await? {
                        return Err(CoreError::SessionEnded(reason));
                    }
                    continue;
                }
                Standing::Ended(_) | Standing::Gone => {}
            }
        }
        let device_id = choice.device_id.clone();
        if let Some(chosen) = open(core, p, caller, choice, device_id, None).await? {
            return Ok(chosen);
        }
    }
    Err(contended())
}

/// The caller's choice as the store has it.
async fn reload(core: &Core, caller: &Caller, choice: &mut Choice) -> Result<(), CoreError> {
    *choice = core
        .store
        .mcp_choice(caller.store_key())
        .await?
        .map(Choice::from_record)
        .unwrap_or_default();
    Ok(())
}

/// Store `next` over the version `choice` was read at; on success `choice`
/// becomes it. False when another writer came first (`choice` is then stale).
async fn write(
    core: &Core,
    caller: &Caller,
    choice: &mut Choice,
    next: Choice,
) -> Result<bool, CoreError> {
    let read = choice.version;
    let written = core
        .store
        .put_mcp_choice(
            caller.store_key(),
            &next.record(),
            read,
            core.clock.now_ms(),
        )
        .await?;
    if written {
        *choice = Choice {
            version: Some(read.map_or(1, |v| v + 1)),
            ..next
        };
    }
    Ok(written)
}

/// Open a session on `device_id` (or the only browser online) and make it the
/// caller's choice; `None` when another client of the caller changed the
/// choice first, in which case the session opened here is stopped again.
async fn open(
    core: &Core,
    p: &Principal,
    caller: &Caller,
    choice: &mut Choice,
    device_id: Option<String>,
    purpose: Option<String>,
) -> Result<Option<Chosen>, CoreError> {
    let request = StartSessionRequest {
        browser_id: device_id,
        purpose,
        ..StartSessionRequest::default()
    };
    let session = start_stop::start(core, p, request).await?;
    let next = Choice {
        device_id: Some(session.device_id.clone()),
        session_id: Some(session.id.clone()),
        halted: None,
        version: choice.version,
    };
    match write(core, caller, choice, next).await {
        Ok(true) => {
            tokio::spawn(halt_when_decided(core.clone(), caller.clone(), session));
            Ok(choice.chosen())
        }
        not_written => {
            // Nobody's choice: never left open behind the caller's back.
            if let Err(e) = start_stop::stop(core, &session, EndReason::Stopped).await {
                tracing::debug!(error = ?e, "mcp: a session opened twice did not stop");
            }
            not_written.map(|_| None)
        }
    }
}

/// Stop the caller's session `id`; one that ended meanwhile is as good.
async fn stop(core: &Core, p: &Principal, id: &str) -> Result<(), CoreError> {
    match routed::stop(core, Scope::Agent(p), id).await {
        Ok(_) => Ok(()),
        // Ended or unknown, here or as its replica answered (served or not).
        Err(e) => match routed::standing_of(Err(e)) {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        },
    }
}

/// When `session` ends by a decision against the agent, say so in the caller's
/// choice at once, so that every replica answers its next call
/// `session_ended` rather than opening a new session.
async fn halt_when_decided(core: Core, caller: Caller, session: Arc<Session>) {
    session.ended().await;
    let Some(reason) = session.end_reason().filter(|r| !reopens(*r)) else {
        return;
    };
    for _ in 0..ROUNDS {
        let mut choice = Choice::default();
        let next = match reload(&core, &caller, &mut choice).await {
            Ok(()) if choice.session_id.as_deref() == Some(&session.id) => Choice {
                session_id: None,
                halted: Some(reason),
                ..choice.clone()
            },
            // No longer the caller's session, or the store is away (the
            // next call finds the end on the session's replica instead).
            _ => return,
        };
        match write(&core, &caller, &mut choice, next).await {
            Ok(false) => continue,
            _ => return,
        }
    }
}

/// Other clients of the caller changed its choice at every turn.
fn contended() -> CoreError {
    tracing::warn!("mcp: a caller's choice changed under every attempt; answered as contended");
    CoreError::StoreUnavailable
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

    #[test]
    fn a_choice_round_trips_through_its_record() {
        let choice = Choice {
            device_id: Some("d".into()),
            session_id: None,
            halted: Some(EndReason::UserStopped),
            version: Some(4),
        };
        let record = choice.record();
        assert_eq!(record.halted.as_deref(), Some("user_stopped"));
        assert_eq!(Choice::from_record(record), choice);
    }
}
