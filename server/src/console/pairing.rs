//! The Pair a browser page (docs/console.md, "Pair a browser"): a one-time link
//! for a member's browser (admins) or one's own (members), shown once with a copy
//! button and as a QR code, its expiry counting down; the links still pending,
//! each voidable.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

use super::human::{MemberChoice, When, person};
use super::page::{ConsoleError, Frame, render};
use super::posted::{CsrfForm, Posted, WithCsrf};
use super::signed_in::SignedIn;
use crate::admin::pairings::{create_link, void_one};
use crate::api_error::ApiError;
use crate::app::AppState;
use crate::store::PendingPairingRecord;

/// A member a link can be for.
/// A link not used yet.
pub struct PendingRow {
    pub id: String,
    pub label: String,
    pub member: String,
    pub expires: When,
    /// Ms since the epoch, for the countdown.
    pub expires_ms: i64,
}

/// A new link, shown once.
pub struct NewLink {
    pub link: String,
    /// The QR code as an SVG data URI.
    pub qr: String,
    pub expires: When,
    pub expires_ms: i64,
}

#[derive(Template)]
#[template(path = "console/pair.html")]
struct PairPage {
    frame: Option<Frame>,
    admin: bool,
    members: Vec<MemberChoice>,
    lifetimes: Vec<(u64, &'static str)>,
    pending: Vec<PendingRow>,
    created: Option<NewLink>,
}

/// Lifetimes offered, in seconds, as far as the server's maximum allows.
const LIFETIMES: [(u64, &str); 4] = [
    (300, "5 minutes"),
    (900, "15 minutes"),
    (1800, "30 minutes"),
    (3600, "1 hour"),
];

async fn page(
    state: &AppState,
    me: &SignedIn,
    created: Option<NewLink>,
) -> Result<Response, ConsoleError> {
    let tenant = &me.principal.tenant_id;
    let now = state.clock.now_ms();
    let all = state.store.list_members(tenant, false).await?;
    let name = |id: &str| {
        all.iter()
            .find(|m| m.id == id)
            .map(|m| person(&m.display_name, &m.email))
    };
    let pending: Vec<PendingRow> = visible(state, me)
        .await?
        .into_iter()
        .map(|r| PendingRow {
            member: r
                .owner_id
                .as_deref()
                .and_then(name)
                .unwrap_or_else(|| "no one in particular".into()),
            label: r.label.unwrap_or_else(|| "no label".into()),
            expires: When::of(now, r.expires_at),
            expires_ms: r.expires_at,
            id: r.id,
        })
        .collect();
    let members = if me.is_admin() {
        all.iter().map(MemberChoice::of).collect()
    } else {
        Vec::new()
    };
    let max = state.config.limits.pairing_ttl_max_secs;
    Ok(render(
        if created.is_some() {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        &PairPage {
            frame: Some(me.frame()),
            admin: me.is_admin(),
            members,
            lifetimes: LIFETIMES.into_iter().filter(|(s, _)| *s <= max).collect(),
            pending,
            created,
        },
    ))
}

/// The pending links `me` may see: the team's for an admin, their own for a member.
async fn visible(state: &AppState, me: &SignedIn) -> Result<Vec<PendingPairingRecord>, ApiError> {
    let now = state.clock.now_ms();
    let all = state
        .store
        .pending_pairings(&me.principal.tenant_id, now)
        .await?;
    if me.is_admin() {
        return Ok(all);
    }
    let mine = me.principal.member_id.as_deref();
    Ok(all
        .into_iter()
        .filter(|r| mine.is_some() && r.owner_id.as_deref() == mine)
        .collect())
}

pub async fn show(State(state): State<AppState>, me: SignedIn) -> Result<Response, ConsoleError> {
    page(&state, &me, None).await
}

#[derive(Deserialize)]
pub struct PairForm {
    csrf: String,
    #[serde(default)]
    label: String,
    /// A member id; empty for no one (admins only).
    #[serde(default)]
    member: String,
    ttl_secs: u64,
}

impl WithCsrf for PairForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn create(
    State(state): State<AppState>,
    Posted { me, form }: Posted<PairForm>,
) -> Result<Response, ConsoleError> {
    // A member's links are always for themselves, whatever the form says.
    let owner = if me.is_admin() {
        Some(form.member).filter(|m| !m.is_empty())
    } else {
        Some(
            me.principal
                .member_id
                .clone()
                .ok_or_else(|| ApiError::not_found("member"))?,
        )
    };
    let label = Some(form.label.trim().to_owned()).filter(|l| !l.is_empty());
    let created = create_link(&state, &me.principal, label, Some(form.ttl_secs), owner).await?;
    let expires_ms = crate::clock::parse_rfc3339(&created.expires_at).unwrap_or_default();
    let now = state.clock.now_ms();
    let shown = NewLink {
        qr: qr_data_uri(&created.link)?,
        link: created.link,
        expires: When::of(now, expires_ms),
        expires_ms,
    };
    page(&state, &me, Some(shown)).await
}

/// `link` as a QR code: an SVG, as a data URI for an `<img>`.
fn qr_data_uri(link: &str) -> Result<String, ApiError> {
    let code = qrcode::QrCode::new(link.as_bytes())
        .map_err(|_| ApiError::new(latchkey_protocol::ErrorCode::Internal, "QR code"))?;
    let svg = code
        .render::<qrcode::render::svg::Color<'_>>()
        .min_dimensions(220, 220)
        .quiet_zone(true)
        .build();
    Ok(format!(
        "data:image/svg+xml;base64,{}",
        STANDARD.encode(svg)
    ))
}

/// Void a pending link the signed-in person may see; anyone else's, used,
/// expired or unknown answers `not_found`.
pub async fn void(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { me, form: _ }: Posted<CsrfForm>,
) -> Result<Response, ConsoleError> {
    // A member may void only their own links; anyone else's answers as unknown.
    if !visible(&state, &me).await?.iter().any(|r| r.id == id) {
        return Err(ApiError::not_found("pending pairing link").into());
    }
    void_one(&state, &me.principal, &id).await?;
    Ok(Redirect::to("/console/pair").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qr_code_is_an_svg_data_uri() {
        let uri = qr_data_uri("wss://gateway.example/extension#abc").expect("qr");
        let b64 = uri
            .strip_prefix("data:image/svg+xml;base64,")
            .expect("prefix");
        let svg = String::from_utf8(STANDARD.decode(b64).expect("base64")).expect("utf8");
        assert!(svg.contains("<svg"), "{svg}");
    }
}
