//! The people of a team (docs/people.md): list, add, remove. Removing a member ends
//! what is theirs at once: their browsers are revoked (live sockets closed 4001),
//! the API tokens behind them revoked (live agent sockets closed 4006), and their
//! unused pairing links voided, in one transaction.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use latchkey_protocol::ErrorCode;
use latchkey_protocol::api::{
    CreateMemberRequest, MemberList, MemberRef, MemberRemovedView, MemberRole, MemberView,
    UpdateMemberRequest,
};

use crate::api_error::{ApiError, ApiJson};
use crate::app::AppState;
use crate::audit::{Event, action, member_ref};
use crate::auth::principal::AdminPrincipal;
use crate::clock::rfc3339;
use crate::store::{MemberRecord, StoreError};

/// Longest email address (RFC 5321's path limit).
const MAX_EMAIL_CHARS: usize = 254;

pub(crate) fn view(m: MemberRecord) -> MemberView {
    MemberView {
        role: MemberRole::parse(&m.role).unwrap_or_default(),
        id: m.id,
        display_name: m.display_name,
        email: m.email,
        created_at: rfc3339(m.created_at),
    }
}

/// The team's members by id, removed ones too (a removed member's revoked browser
/// and voided links still show whose they were): read once, and not at all when
/// none of `wanted` names a member.
pub(crate) async fn references<'a>(
    state: &AppState,
    tenant_id: &str,
    mut wanted: impl Iterator<Item = Option<&'a str>>,
) -> Result<std::collections::HashMap<String, MemberRef>, ApiError> {
    if !wanted.any(|id| id.is_some()) {
        return Ok(std::collections::HashMap::new());
    }
    let members = state.store.list_members(tenant_id, true).await?;
    Ok(members
        .into_iter()
        .map(|m| (m.id.clone(), reference(m)))
        .collect())
}

pub(crate) fn reference(m: MemberRecord) -> MemberRef {
    MemberRef {
        id: m.id,
        display_name: m.display_name,
        email: m.email,
    }
}

/// An email address as stored: trimmed and lower case, one `@` between a local
/// part and a domain, no spaces or control characters; `invalid_params` naming
/// `email` otherwise.
pub(crate) fn clean_email(raw: &str) -> Result<String, ApiError> {
    let refuse =
        |why: &str| ApiError::at_field(ErrorCode::InvalidParams, "email", format!("email {why}"));
    let email = raw.trim().to_lowercase();
    if email.chars().count() > MAX_EMAIL_CHARS {
        return Err(refuse("must be at most 254 characters"));
    }
    if email
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || latchkey_protocol::text::is_unsafe(c))
    {
        return Err(refuse("must not contain spaces or control characters"));
    }
    match email.split_once('@') {
        Some((local, domain))
            if !local.is_empty() && !domain.is_empty() && !domain.contains('@') =>
        {
            Ok(email)
        }
        _ => Err(refuse("must look like name@example.com")),
    }
}

#[utoipa::path(
    get,
    operation_id = "members_list",
    path = "/v1/admin/members",
    tag = "members",
    summary = "List members",
    responses((status = 200, description = "The team's members.", body = MemberList), crate::openapi::refusals::Read),
)]
pub async fn list(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
) -> Result<Json<MemberList>, ApiError> {
    let members = state.store.list_members(&p.tenant_id, false).await?;
    Ok(Json(MemberList {
        members: members.into_iter().map(view).collect(),
    }))
}

#[utoipa::path(
    post,
    operation_id = "members_create",
    path = "/v1/admin/members",
    tag = "members",
    summary = "Add a member",
    request_body = CreateMemberRequest,
    responses((status = 201, description = "The member.", body = MemberView), crate::openapi::refusals::Create),
)]
pub async fn create(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    ApiJson(body): ApiJson<CreateMemberRequest>,
) -> Result<(StatusCode, Json<MemberView>), ApiError> {
    Ok((StatusCode::CREATED, Json(add(&state, &p, &body).await?)))
}

/// Add a member to `p`'s team as `body` asks; audited as `p`'s act. Also the
/// console's.
pub(crate) async fn add(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    body: &CreateMemberRequest,
) -> Result<MemberView, ApiError> {
    let display_name = super::clean_name(
        &body.display_name,
        "display_name",
        latchkey_protocol::text::MAX_LABEL_CHARS,
    )?;
    let email = clean_email(&body.email)?;
    let record = MemberRecord {
        id: crate::ids::MEMBER.mint(),
        tenant_id: p.tenant_id.clone(),
        display_name,
        email,
        role: body.role.as_str().to_string(),
        created_at: state.clock.now_ms(),
        removed_at: None,
    };
    match state.store.insert_member(&record).await {
        Ok(()) => {}
        Err(StoreError::Conflict(_)) => {
            return Err(ApiError::at_field(
                ErrorCode::InvalidRequest,
                "email",
                "the team already has a member with this email",
            ));
        }
        Err(e) => return Err(e.into()),
    }
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::MEMBER_ADD,
            target: member_ref(&record.id),
            outcome: "ok",
            detail: Some(format!("role {}", record.role)),
        })
        .await;
    Ok(view(record))
}

#[utoipa::path(
    patch,
    operation_id = "members_update",
    path = "/v1/admin/members/{id}",
    tag = "members",
    summary = "Change a member's role",
    params(("id" = String, Path, description = "Member id")),
    request_body = UpdateMemberRequest,
    responses((status = 200, description = "The member, as they are now.", body = MemberView), crate::openapi::refusals::WriteOne),
)]
pub async fn update(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<UpdateMemberRequest>,
) -> Result<Json<MemberView>, ApiError> {
    Ok(Json(set_role(&state, &p, &id, body.role).await?))
}

/// Give the member `id` of `p`'s team the role `role`; audited as `p`'s act
/// when it changed. The team's last owner stays an owner. Also the console's.
pub(crate) async fn set_role(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    id: &str,
    role: MemberRole,
) -> Result<MemberView, ApiError> {
    let members = state.store.list_members(&p.tenant_id, false).await?;
    let before = members
        .iter()
        .find(|m| m.id == id)
        .ok_or_else(|| ApiError::not_found("member"))?;
    let owners = members
        .iter()
        .filter(|m| MemberRole::parse(&m.role) == Some(MemberRole::Owner))
        .count();
    let was = MemberRole::parse(&before.role).unwrap_or_default();
    if was == role {
        return Ok(view(before.clone()));
    }
    if was == MemberRole::Owner && owners == 1 {
        return Err(ApiError::at_field(
            ErrorCode::InvalidRequest,
            "role",
            "this is the team's only owner: make another member an owner first",
        ));
    }
    let after = state
        .store
        .set_member_role(&p.tenant_id, id, role.as_str())
        .await?
        .ok_or_else(|| ApiError::not_found("member"))?;
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::MEMBER_ROLE,
            target: member_ref(id),
            outcome: "ok",
            detail: Some(format!("{} to {}", was.as_str(), role.as_str())),
        })
        .await;
    Ok(view(after))
}

/// Remove a member and end what is theirs. As for one device or one token, what
/// runs here is ended before the commit (what the store holds of theirs now) and
/// again after it (what the commit revoked, which includes a browser paired in
/// between).
#[utoipa::path(
    delete,
    operation_id = "members_remove",
    path = "/v1/admin/members/{id}",
    tag = "members",
    summary = "Remove a member",
    params(("id" = String, Path, description = "Member id")),
    responses((status = 200, description = "The member, removed, with what was revoked with them.", body = MemberRemovedView), crate::openapi::refusals::ReadOne),
)]
pub async fn remove(
    State(state): State<AppState>,
    AdminPrincipal(p): AdminPrincipal,
    Path(id): Path<String>,
) -> Result<Json<MemberRemovedView>, ApiError> {
    Ok(Json(remove_one(&state, &p, &id).await?))
}

/// Remove the member `id` of `p`'s team and end what is theirs (see [`remove`]);
/// audited as `p`'s act. Also the console's.
pub(crate) async fn remove_one(
    state: &AppState,
    p: &crate::auth::principal::Principal,
    id: &str,
) -> Result<MemberRemovedView, ApiError> {
    let id = id.to_owned();
    if !crate::ids::MEMBER.holds(&id) {
        return Err(ApiError::not_found("member"));
    }
    let now = state.clock.now_ms();
    let their_devices: Vec<String> =
        crate::devices::owned::of_member(state.store.as_ref(), &p.tenant_id, &id)
            .await?
            .into_iter()
            .map(|d| d.id)
            .collect();
    crate::devices::revocation::close_revoked(state, &p.tenant_id, &their_devices);
    let their_tokens: Vec<String> = state
        .store
        .list_api_tokens(&p.tenant_id)
        .await?
        .into_iter()
        .filter(|t| t.member_id.as_deref() == Some(id.as_str()))
        .map(|t| t.id)
        .collect();
    crate::auth::revoked::end_revoked(state, &p.tenant_id, &their_tokens);
    let removed = state
        .store
        .remove_member(&p.tenant_id, &id, now)
        .await?
        .ok_or_else(|| ApiError::not_found("member"))?;
    crate::devices::revocation::close_revoked(state, &p.tenant_id, &removed.device_ids);
    crate::auth::revoked::end_revoked(state, &p.tenant_id, &removed.token_ids);
    // Their console sign-ins end with their tokens; the rows go now too, and
    // their live streams here look again at once (a sign-in through single
    // sign-on has no token to end them).
    state
        .store
        .delete_member_console_sessions(&p.tenant_id, &id)
        .await?;
    state
        .console_sign_outs
        .send_modify(|n| *n = n.wrapping_add(1));
    for token in &removed.token_ids {
        crate::delegation::mint::end_under_token(state, &p.tenant_id, token).await;
    }
    tracing::info!(
        tenant = %p.tenant_id,
        member = %id,
        devices = removed.device_ids.len(),
        tokens = removed.token_ids.len(),
        "member removed"
    );
    state
        .audit
        .record(Event {
            tenant_id: &p.tenant_id,
            actor: p.actor(),
            action: action::MEMBER_REMOVE,
            target: member_ref(&id),
            outcome: "ok",
            detail: Some(format!(
                "{} devices and {} tokens revoked, {} pairing links voided",
                removed.device_ids.len(),
                removed.token_ids.len(),
                removed.pairings_voided
            )),
        })
        .await;
    Ok(MemberRemovedView {
        id,
        revoked_devices: removed.device_ids,
        revoked_tokens: removed.token_ids,
        voided_pairings: removed.pairings_voided,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_stored_lower_case_and_odd_ones_refused() {
        assert_eq!(
            clean_email("  Alice@Example.COM ").ok(),
            Some("alice@example.com".into())
        );
        for bad in [
            "alice",
            "@example.com",
            "alice@",
            "a@b@c",
            "al ice@x.io",
            "a\u{202e}@x.io",
        ] {
            assert!(clean_email(bad).is_err(), "{bad:?}");
        }
        assert!(clean_email(&format!("{}@x.io", "a".repeat(250))).is_err());
    }
}
