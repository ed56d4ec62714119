//! Native TLS: PEM files (read with `rustls-pki-types`) into a rustls server config.
//! ALPN is `http/1.1` only: WebSocket upgrades need HTTP/1.1.
//!
//! No session resumption. rustls' default keeps the last 256 sessions in memory
//! and sends two tickets for them after every handshake. A gateway holds thousands
//! of long-lived device connections, so a device's session is long gone from such a
//! cache by the time it reconnects, and one that reconnects after a restart or to
//! another node has nothing to resume anyway; the tickets only cost every handshake
//! two sealed messages, a cache insert under a lock and the resumption key
//! derivation. Without them a reconnect is one full handshake, as it was in effect.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsFiles;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate file {0}: {1}")]
    Cert(String, String),
    #[error("key file {0}: {1}")]
    Key(String, String),
    #[error("certificate and key do not form a usable TLS config: {0}")]
    Config(String),
}

pub fn load_server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_name = files.cert.display().to_string();
    let key_name = files.key.display().to_string();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| TlsError::Cert(cert_name.clone(), e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Cert(cert_name.clone(), e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Cert(cert_name, "no certificate found".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| TlsError::Key(key_name, e.to_string()))?;
    server_config(certs, key)
}

/// Build from DER material (tests hand rcgen output straight in).
pub fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.send_tls13_tickets = 0;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(Arc::new(config))
}
