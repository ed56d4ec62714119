//! The committed TypeScript bindings in `protocol/bindings/` must equal what ts-rs
//! generates from the Rust types. Regenerate with:
//! `LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test bindings`.

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use latchkey_protocol::tools::{failures, params, results};
use latchkey_protocol::{CloseCode, ErrorCode, agent, api, authorize, frame, handshake};
use ts_rs::{Config, TS};

fn export_all(dir: &Path) {
    let cfg = Config::new().with_out_dir(dir).with_large_int("number");
    macro_rules! export {
        ($($t:ty),* $(,)?) => { $( <$t as TS>::export_all(&cfg).expect(stringify!($t)); )* };
    }
    export!(
        frame::Frame,
        frame::RequestFrame,
        frame::SuccessFrame,
        frame::ErrorFrame,
        frame::EventFrame,
        ErrorCode,
        latchkey_protocol::ErrorBody,
        latchkey_protocol::error_code::ApiErrorBody,
        CloseCode,
        latchkey_protocol::close_code::AfterClose,
        handshake::HandshakeParams,
        handshake::HandshakeResult,
        handshake::BrowserInfo,
        handshake::VersionTooOldData,
        latchkey_protocol::additions::SiteRules,
        latchkey_protocol::additions::ConsentRequest,
        latchkey_protocol::additions::ConsentGiven,
        latchkey_protocol::additions::SiteBlocked,
        latchkey_protocol::additions::SessionAgent,
        latchkey_protocol::additions::DeviceInfo,
        latchkey_protocol::EndReason,
        authorize::AuthorizeAction,
        authorize::AuthorizeRequest,
        authorize::AuthorizeGrant,
        authorize::AuthorizeErrorTag,
        authorize::AuthorizeErrorBody,
        api::Role,
        api::CreatePairingRequest,
        api::PairingCreated,
        api::PendingPairingView,
        api::PairingList,
        api::DeviceStatus,
        api::DeviceView,
        api::DeviceList,
        api::RenameDeviceRequest,
        api::RevokeAllResult,
        api::ForgetResult,
        api::CreateTokenRequest,
        api::TokenView,
        api::TokenCreated,
        api::TokenList,
        api::AuditEventView,
        api::AuditList,
        api::AuditRetention,
        api::SetAuditRetention,
        latchkey_protocol::webhooks::CreateWebhookRequest,
        latchkey_protocol::webhooks::WebhookStatus,
        latchkey_protocol::webhooks::WebhookView,
        latchkey_protocol::webhooks::WebhookCreated,
        latchkey_protocol::webhooks::WebhookList,
        latchkey_protocol::webhooks::WebhookDeliveryView,
        latchkey_protocol::webhooks::WebhookDeliveryList,
        latchkey_protocol::webhooks::RedeliverRequest,
        latchkey_protocol::webhooks::WebhookPayload,
        latchkey_protocol::webhooks::WebhookEventData,
        api::MemberRole,
        api::CreateOwnPairingRequest,
        api::CreateMemberRequest,
        api::UpdateMemberRequest,
        api::MemberView,
        api::MemberRef,
        api::MemberList,
        api::MemberRemovedView,
        api::PolicyView,
        latchkey_protocol::delegation::CreateDelegationRequest,
        latchkey_protocol::delegation::DelegationView,
        latchkey_protocol::delegation::DelegationList,
        latchkey_protocol::delegation::DelegationRevoked,
        latchkey_protocol::policy::Policy,
        latchkey_protocol::policy::Consent,
        latchkey_protocol::policy::PolicyReason,
        latchkey_protocol::policy::EffectivePolicy,
        agent::BrowserView,
        agent::BrowserList,
        agent::StartSessionRequest,
        agent::SessionView,
        agent::SessionPhase,
        agent::SessionList,
        agent::ReturnFailure,
        agent::StopSessionResult,
        agent::CallRequest,
        agent::CallResult,
        agent::SessionEvent,
    );
    // The tool catalogue's params and results (protocol/bindings/tools/), each
    // with the types it is made of.
    export!(
        params::TabList,
        params::TabCreate,
        params::TabRequired,
        params::TabBorrow,
        params::WindowResize,
        params::Emulate,
        params::Navigate,
        params::History,
        params::Reload,
        params::WaitMs,
        params::Click,
        params::Hover,
        params::Fill,
        params::Press,
        params::Select,
        params::Snapshot,
        params::Observe,
        params::GetHtml,
        params::Screenshot,
        params::LogRead,
        params::Evaluate,
        params::RequestHelp,
        params::RecordStart,
        params::RecordAwait,
        params::Nothing,
        results::SessionStartResult,
        results::SessionStopResult,
        results::TabListResult,
        results::TabCreateResult,
        results::TabCloseResult,
        results::TabSelectResult,
        results::TabBorrowResult,
        results::TabReturnResult,
        results::WindowResizeResult,
        results::EmulateResult,
        results::NavigateResult,
        results::HistoryResult,
        results::WaitForNavigationResult,
        results::WaitMsResult,
        results::PointerResult,
        results::FillResult,
        results::PressResult,
        results::SelectResult,
        results::SnapshotResult,
        results::ObserveResult,
        results::GetHtmlResult,
        results::ScreenshotResult,
        results::ConsoleResult,
        results::NetworkResult,
        results::EvaluateResult,
        results::RequestHelpResult,
        results::RecordStartResult,
        results::RecordResult,
        failures::FailureReason,
        latchkey_protocol::tools::capability::Capability,
    );
    let index = latchkey_protocol::tools::typescript_index(&cfg);
    std::fs::write(dir.join("tools").join("index.ts"), index).expect("write tools/index.ts");
}

fn write_constants(dir: &Path) {
    let text = latchkey_protocol::ts_constants::typescript_constants();
    std::fs::write(dir.join("constants.ts"), text).expect("write constants");
}

/// Every `.ts` file under `dir`, by its path relative to `dir`.
fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|x| x == "ts") {
                let name = path
                    .strip_prefix(dir)
                    .expect("under dir")
                    .to_string_lossy()
                    .into_owned();
                out.insert(name, std::fs::read_to_string(&path).expect("read binding"));
            }
        }
    }
    out
}

#[test]
fn typescript_bindings_are_current() {
    let committed_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bindings");
    let fresh = tempfile::tempdir().expect("tempdir");
    export_all(fresh.path());
    write_constants(fresh.path());
    let generated = read_dir(fresh.path());
    assert!(
        generated.len() >= 30,
        "expected every exported type, got {}",
        generated.len()
    );

    if std::env::var_os("LATCHKEY_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&committed_dir);
        std::fs::create_dir_all(&committed_dir).expect("create bindings dir");
        for (name, text) in &generated {
            let path = committed_dir.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("create dir");
            std::fs::write(path, text).expect("write binding");
        }
        return;
    }

    let committed = read_dir(&committed_dir);
    let stale: Vec<&String> = generated
        .iter()
        .filter(|(name, text)| committed.get(*name) != Some(text))
        .map(|(name, _)| name)
        .chain(committed.keys().filter(|n| !generated.contains_key(*n)))
        .collect();
    assert!(
        stale.is_empty(),
        "protocol/bindings is stale ({stale:?}); regenerate with \
         LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test bindings"
    );
}
