//! A session by its id, wherever it lives (docs/cluster.md, "Sessions by id on
//! any replica"). Every surface acts on a session by id through these: a
//! session here is acted on here; in cluster mode, one that is not here is
//! asked of the replica it lives on, with the same result and the same error
//! codes. On one node the second case never arises.

use std::sync::Arc;
use std::time::Duration;

use latchkey_protocol::additions::CONSENT_TIMEOUT_MS;
use latchkey_protocol::agent::{SessionEvent, SessionList, StopSessionResult};
use latchkey_protocol::cluster::session_route::{Asker, SessionOp};
use latchkey_protocol::effect::{CANCEL_GRACE_MS, SESSION_STOP_TIMEOUT_MS};
use latchkey_protocol::{EndReason, ErrorCode};
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::auth::principal::Principal;
use crate::cluster::session_client::RemoteEvents;
use crate::cluster::session_lists;
use crate::core::Core;
use crate::core_error::CoreError;
use crate::devices::link::RawResult;
use crate::sessions::SessionTable;
use crate::sessions::calls::{self, ToolCall};
use crate::sessions::start_stop;
use crate::sessions::table::Session;

/// Beyond the session's own deadlines, what the asking replica allows for
/// NATS and the other replica's scheduling before it calls that replica gone.
const RELAY_SLACK: Duration = Duration::from_secs(5);

/// Who acts on the session.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// An agent: only its token's sessions (or its delegator's, for a
    /// one-session delegation).
    Agent(&'a Principal),
    /// A team admin: any session of the team.
    Admin { tenant_id: &'a str },
}

impl Scope<'_> {
    fn asker(&self, id: &str) -> Asker {
        match self {
            Scope::Agent(p) => Asker {
                tenant_id: p.tenant_id.clone(),
                owner_token_id: Some(SessionTable::owner_of(p, id).to_string()),
            },
            Scope::Admin { tenant_id } => Asker {
                tenant_id: tenant_id.to_string(),
                owner_token_id: None,
            },
        }
    }

    /// The session here, or the answer a request for it gets here.
    fn local(&self, core: &Core, id: &str) -> Result<Arc<Session>, CoreError> {
        match self {
            Scope::Agent(p) => core.sessions.owned(p, id),
            Scope::Admin { tenant_id } => core
                .sessions
                .get_in_tenant(tenant_id, id)
                .ok_or(CoreError::SessionNotFound),
        }
    }
}

/// Where the session is.
enum Found {
    Here(Arc<Session>),
    /// Not here; in cluster mode, another replica may hold it.
    Elsewhere,
}

fn find(core: &Core, scope: Scope<'_>, id: &str) -> Result<Found, CoreError> {
    match scope.local(core, id) {
        Ok(session) => Ok(Found::Here(session)),
        // Not here at all (not merely another token's): ask the others.
        Err(CoreError::SessionNotFound)
            if core.peers.may_hold_session(id) && !core.sessions.holds(id) =>
        {
            Ok(Found::Elsewhere)
        }
        Err(e) => Err(e),
    }
}

/// The sessions `scope` may see, on every replica: an agent's own token's
/// (not its delegator's), an admin's the team's.
pub async fn list(core: &Core, scope: Scope<'_>) -> SessionList {
    let asker = match scope {
        Scope::Agent(p) => Asker {
            tenant_id: p.tenant_id.clone(),
            owner_token_id: Some(p.token_id.clone()),
        },
        Scope::Admin { tenant_id } => Asker {
            tenant_id: tenant_id.to_string(),
            owner_token_id: None,
        },
    };
    let mut sessions = session_lists::local(core, &asker);
    sessions.extend(core.peers.sessions_elsewhere(&asker).await);
    sessions.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    SessionList { sessions }
}

/// The sessions on member `member_id`'s own browsers, on every replica: what the
/// browser's person sees of who is using their browsers.
pub async fn list_for_owner(
    core: &Core,
    tenant_id: &str,
    member_id: &str,
) -> Result<SessionList, CoreError> {
    let mine: std::collections::HashSet<String> =
        crate::devices::owned::of_member(core.store.as_ref(), tenant_id, member_id)
            .await?
            .into_iter()
            .map(|d| d.id)
            .collect();
    let mut all = list(core, Scope::Admin { tenant_id }).await;
    all.sessions.retain(|s| mine.contains(&s.browser_id));
    Ok(all)
}

/// Run one agent call on session `id`.
pub async fn call(
    core: &Core,
    caller: &Principal,
    id: &str,
    call: ToolCall,
) -> Result<RawResult, CoreError> {
    match find(core, Scope::Agent(caller), id)? {
        Found::Here(session) => calls::call(core, &session, call).await,
        Found::Elsewhere => call_elsewhere(core, caller, id, call).await,
    }
}

/// What became of a call sent only to an open session.
pub enum IfOpen {
    /// The session was open and took the call: its answer.
    Ran(Result<RawResult, CoreError>),
    /// The session was not open when the call came; nothing ran. The call is
    /// given back.
    NotOpen(Standing, ToolCall),
}

/// Run `call` on session `id` only if it is open when the call reaches it,
/// here or on its replica: what a surface that keeps a session for its caller
/// (MCP) does, so that it opens another in its place without ever resending a
/// call that ran, and without asking first.
pub async fn call_if_open(core: &Core, caller: &Principal, id: &str, call: ToolCall) -> IfOpen {
    let found = match find(core, Scope::Agent(caller), id) {
        Ok(found) => found,
        Err(e) => {
            return match standing_of(Err(e)) {
                Ok(standing) => IfOpen::NotOpen(standing, call),
                Err(e) => IfOpen::Ran(Err(e)),
            };
        }
    };
    match found {
        Found::Here(session) => match local_standing(&session) {
            Standing::Open => IfOpen::Ran(calls::call(core, &session, call).await),
            standing => IfOpen::NotOpen(standing, call),
        },
        Found::Elsewhere => match call_elsewhere(core, caller, id, call.clone()).await {
            // Refused before it reached the session, or nobody has it.
            Err(e @ (CoreError::Unserved(_) | CoreError::SessionNotFound)) => {
                match standing_of(Err(e)) {
                    Ok(Standing::Open) => IfOpen::Ran(Err(CoreError::Internal(
                        "a replica refused a call to an open session",
                    ))),
                    Ok(standing) => IfOpen::NotOpen(standing, call),
                    Err(e) => IfOpen::Ran(Err(e)),
                }
            }
            answer => IfOpen::Ran(answer),
        },
    }
}

/// `call` on the replica session `id` lives on.
async fn call_elsewhere(
    core: &Core,
    caller: &Principal,
    id: &str,
    call: ToolCall,
) -> Result<RawResult, CoreError> {
    // Checked here too, so a bad call is refused without a round trip.
    let wait =
        calls::deadline(&call)? + Duration::from_millis(CONSENT_TIMEOUT_MS + 2 * CANCEL_GRACE_MS);
    let op = SessionOp::Call {
        method: call.method,
        params: call.params,
        timeout_ms: call.timeout_ms,
        limit: call.limit.map(|l| Box::new((*l).clone())),
    };
    let raw = core
        .peers
        .ask_session(Scope::Agent(caller).asker(id), id, op, wait + RELAY_SLACK)
        .await?;
    Ok(RawResult::Owned(raw))
}

/// Stop session `id`: an agent's own stop, or an admin's.
pub async fn stop(core: &Core, scope: Scope<'_>, id: &str) -> Result<StopSessionResult, CoreError> {
    match find(core, scope, id)? {
        Found::Here(session) => {
            let reason = match scope {
                Scope::Agent(_) => EndReason::Stopped,
                Scope::Admin { .. } => EndReason::StoppedByAdmin,
            };
            start_stop::stop(core, &session, reason).await
        }
        Found::Elsewhere => stop_elsewhere(core, scope, id, SessionOp::Stop).await,
    }
}

/// Ask session `id`'s replica to stop it (`op` is a stop).
async fn stop_elsewhere(
    core: &Core,
    scope: Scope<'_>,
    id: &str,
    op: SessionOp,
) -> Result<StopSessionResult, CoreError> {
    // A stop waits up to 5 s for a call in flight, then the browser.
    let wait = Duration::from_secs(5) + Duration::from_millis(SESSION_STOP_TIMEOUT_MS);
    let raw = core
        .peers
        .ask_session(scope.asker(id), id, op, wait + RELAY_SLACK)
        .await?;
    serde_json::from_str(raw.get())
        .map_err(|_| CoreError::Internal("a replica's stop answer does not parse"))
}

/// Stop session `id` of tenant `tenant_id` for member `member_id`, the person
/// whose browser it is (the console's End for a member), wherever it lives; a
/// session on anyone else's browser answers as an unknown one.
pub async fn stop_for_owner(
    core: &Core,
    tenant_id: &str,
    member_id: &str,
    id: &str,
) -> Result<StopSessionResult, CoreError> {
    let scope = Scope::Admin { tenant_id };
    match find(core, scope, id)? {
        Found::Here(session) => start_stop::stop_for_owner(core, &session, member_id).await,
        Found::Elsewhere => {
            let op = SessionOp::StopForOwner {
                member_id: member_id.to_owned(),
            };
            stop_elsewhere(core, scope, id, op).await
        }
    }
}

/// What became of a session, as the agent that owns it can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Open: calls are taken.
    Open,
    /// Ended recently, for this reason.
    Ended(EndReason),
    /// Unknown here and on every replica (ended long ago, or never this
    /// agent's).
    Gone,
}

/// Whether session `id` is still open, here or on its replica, without acting
/// on it: what a surface that keeps a session for its caller (MCP) asks when
/// it has no call to send ([`call_if_open`] needs no question first).
pub async fn standing(core: &Core, caller: &Principal, id: &str) -> Result<Standing, CoreError> {
    let scope = Scope::Agent(caller);
    let answer = match find(core, scope, id) {
        Ok(Found::Here(session)) => return Ok(local_standing(&session)),
        Ok(Found::Elsewhere) => core.peers.watch_session(scope.asker(id), id).await,
        Err(e) => Err(e),
    };
    standing_of(answer)
}

fn local_standing(session: &Session) -> Standing {
    match session.end_reason() {
        None if !session.is_ended() => Standing::Open,
        Some(reason) => Standing::Ended(reason),
        None => Standing::Gone,
    }
}

/// A session's standing from the answer to a request for it: `Ok` is open; a
/// refusal that says it ended or is unknown says so; anything else is an
/// error of its own.
pub fn standing_of(answer: Result<(), CoreError>) -> Result<Standing, CoreError> {
    match answer {
        Ok(()) => Ok(Standing::Open),
        Err(CoreError::SessionEnded(reason)) => Ok(Standing::Ended(reason)),
        Err(CoreError::SessionNotFound) => Ok(Standing::Gone),
        // The session's replica mapped its condition to a body; read it back.
        Err(CoreError::Replica(body) | CoreError::Unserved(body)) => match body.code {
            ErrorCode::SessionEnded => Ok(body
                .data
                .as_ref()
                .and_then(|d| d.get("reason"))
                .and_then(|r| EndReason::deserialize(r).ok())
                .map_or(Standing::Gone, Standing::Ended)),
            ErrorCode::NotFound => Ok(Standing::Gone),
            _ => Err(CoreError::Replica(body)),
        },
        Err(e) => Err(e),
    }
}

/// A session's events, from here or from its replica.
pub enum Events {
    Here(broadcast::Receiver<SessionEvent>),
    Elsewhere(Box<RemoteEvents>),
}

impl Events {
    /// The next event; an error when the session can no longer be followed;
    /// `None` when the stream is over.
    pub async fn next(&mut self) -> Option<Result<SessionEvent, CoreError>> {
        match self {
            Events::Here(rx) => loop {
                match rx.recv().await {
                    Ok(event) => return Some(Ok(event)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            },
            Events::Elsewhere(remote) => remote.next().await,
        }
    }
}

/// Follow session `id`'s events, as the agent that owns it.
pub async fn events(core: &Core, caller: &Principal, id: &str) -> Result<Events, CoreError> {
    let scope = Scope::Agent(caller);
    match find(core, scope, id)? {
        Found::Here(session) => Ok(Events::Here(session.subscribe())),
        Found::Elsewhere => Ok(Events::Elsewhere(Box::new(
            core.peers.follow_session(scope.asker(id), id).await?,
        ))),
    }
}
