//! Live updates (docs/console.md, "Live updates"): the Devices and Sessions pages
//! follow a server-sent event stream that sends their list again, rendered,
//! whenever it changed: a device came online or went offline here, a session
//! started or ended here, or, every 15 s, anything else (another replica's
//! devices and sessions, a revocation made elsewhere, "2 min ago" turning into
//! "3 min ago").
//!
//! The stream ends when the sign-in ends and when the node drains; the page then
//! stays as it was. The token's revocation or expiry (which a member's removal
//! includes) ends it at once through the token's lease, a sign-out here at once
//! too, and a sign-out on another replica at its next look.

use std::convert::Infallible;
use std::time::Duration;

use askama::Template;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, stream};

use super::devices::{DeviceRow, device_rows};
use super::page::{ConsoleError, Frame};
use super::sessions::{SessionRow, session_rows};
use super::signed_in::SignedIn;
use crate::app::AppState;

/// How often the list is redrawn with no change seen here.
const REFRESH: Duration = Duration::from_secs(15);
/// Changes this close together are drawn once.
const SETTLE: Duration = Duration::from_millis(250);

#[derive(Template)]
#[template(path = "console/device_list.html")]
struct DeviceList {
    admin: bool,
    rows: Vec<DeviceRow>,
}

#[derive(Template)]
#[template(path = "console/session_list.html")]
struct SessionList {
    frame: Option<Frame>,
    rows: Vec<SessionRow>,
}

/// Which list a stream follows.
#[derive(Debug, Clone, Copy)]
enum Listing {
    Devices,
    Sessions,
}

/// What the stream holds between events.
struct Follow {
    listing: Listing,
    state: AppState,
    me: SignedIn,
    devices: tokio::sync::watch::Receiver<u64>,
    sessions: tokio::sync::watch::Receiver<u64>,
    /// Sign-outs here: the stream looks whether its own sign-in is gone.
    sign_outs: tokio::sync::watch::Receiver<u64>,
    /// The list last sent, so an unchanged one is not sent again.
    last: String,
    first: bool,
}

impl Follow {
    /// Wait for a reason to look again; false when the stream should end.
    async fn wait(&mut self) -> bool {
        if std::mem::take(&mut self.first) {
            return true;
        }
        let woke = tokio::select! {
            r = self.devices.changed() => r.is_ok(),
            r = self.sessions.changed() => r.is_ok(),
            r = self.sign_outs.changed() => r.is_ok(),
            () = tokio::time::sleep(REFRESH) => true,
            _ = self.me.principal.lease.ended() => false,
            () = self.state.closing.cancelled() => false,
        };
        if woke {
            tokio::time::sleep(SETTLE).await;
            self.devices.mark_unchanged();
            self.sessions.mark_unchanged();
            self.sign_outs.mark_unchanged();
        }
        woke
    }

    /// The list as it is now, if it differs from the last one sent; `Err` when
    /// the stream should end.
    async fn draw(&mut self) -> Result<Option<String>, ()> {
        if !self.me.still_signed_in(&self.state).await {
            return Err(());
        }
        let (state, me) = (&self.state, &self.me);
        let html = match self.listing {
            Listing::Devices => DeviceList {
                admin: me.is_admin(),
                rows: device_rows(state, me).await.map_err(|_| ())?,
            }
            .render(),
            Listing::Sessions => SessionList {
                frame: Some(me.frame()),
                rows: session_rows(state, me).await.map_err(|_| ())?,
            }
            .render(),
        }
        .map_err(|_| ())?;
        if html == self.last {
            return Ok(None);
        }
        self.last.clone_from(&html);
        Ok(Some(html))
    }
}

/// `/console/devices/live`.
pub async fn devices(
    State(state): State<AppState>,
    me: SignedIn,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ConsoleError> {
    Ok(follow(Listing::Devices, state, me))
}

/// `/console/sessions/live`.
pub async fn sessions(
    State(state): State<AppState>,
    me: SignedIn,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ConsoleError> {
    Ok(follow(Listing::Sessions, state, me))
}

/// The stream of `listing` for `me`: an event `list` with `{"html": …}` each time
/// the list differs from the last one sent, the first one at once.
fn follow(
    listing: Listing,
    state: AppState,
    me: SignedIn,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let follow = Follow {
        listing,
        devices: state.registry.changes(),
        sessions: state.sessions.changes(),
        sign_outs: state.console_sign_outs.subscribe(),
        state,
        me,
        last: String::new(),
        first: true,
    };
    let events = stream::unfold(follow, |mut follow| async move {
        loop {
            if !follow.wait().await {
                return None;
            }
            match follow.draw().await {
                Err(()) => return None,
                Ok(None) => continue,
                Ok(Some(html)) => {
                    let data = serde_json::json!({ "html": html }).to_string();
                    return Some((Ok(Event::default().event("list").data(data)), follow));
                }
            }
        }
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
