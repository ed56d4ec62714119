//! The committed TypeScript bindings in `protocol/bindings/` must equal what ts-rs
//! generates from the Rust types. Regenerate with:
//! `LATCHKEY_BLESS=1 cargo test -p latchkey-protocol --test bindings`.

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
        authorize::AuthorizeAction,
        authorize::AuthorizeRequest,
        authorize::AuthorizeGrant,
        authorize::AuthorizeErrorTag,
        authorize::AuthorizeErrorBody,
        api::Role,
        api::CreatePairingRequest,
        api::PairingCreated,
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
        agent::BrowserView,
        agent::BrowserList,
        agent::StartSessionRequest,
        agent::SessionView,
        agent::SessionList,
        agent::ReturnFailure,
        agent::StopSessionResult,
        agent::CallRequest,
        agent::CallResult,
        agent::SessionEvent,
    );
}

fn write_constants(dir: &Path) {
    let text = latchkey_protocol::ts_constants::typescript_constants();
    std::fs::write(dir.join("constants.ts"), text).expect("write constants");
}

fn read_dir(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".ts") {
                out.insert(
                    name,
                    std::fs::read_to_string(e.path()).expect("read binding"),
                );
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
            std::fs::write(committed_dir.join(name), text).expect("write binding");
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
