//! Test certificates from rcgen: a CA and a `localhost`/`127.0.0.1` leaf, written
//! as PEM files so the server loads them exactly as it loads an operator's.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs::{self, cipher_suite, kx_group};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// PEM material for one test server.
#[derive(Debug, Clone)]
pub struct TestCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCerts {
    pub fn generate() -> anyhow::Result<Self> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Latchkey Test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let leaf_key = KeyPair::generate()?;
        let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?
            .signed_by(&leaf_key, &ca)?;
        Ok(Self {
            ca_pem: ca.pem(),
            cert_pem: leaf.pem(),
            key_pem: leaf_key.serialize_pem(),
        })
    }

    /// Write `cert.pem` and `key.pem` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, &self.cert_pem)?;
        std::fs::write(&key, &self.key_pem)?;
        Ok((cert, key))
    }

    /// A rustls client config trusting only the test CA, offering what Chromium
    /// offers (`chromium_offer`).
    pub fn client_config(&self) -> anyhow::Result<Arc<ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).context("CA PEM")?;
        roots.add(ca)?;
        let provider = Arc::new(chromium_offer());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

/// The TLS 1.3 cipher suites and key-exchange groups in the order Chromium (131
/// and later, on a CPU with AES instructions) lists them in its ClientHello. A
/// TLS 1.3 server that follows the client's order, as rustls does by default,
/// then negotiates with the fake extension and the load generator what it
/// negotiates with a real extension: X25519MLKEM768 and TLS_AES_128_GCM_SHA256.
/// rustls' own client default (AES-256/SHA-384 first, X25519 first) would
/// measure a handshake no browser makes; SHA-384 has no instructions of its own
/// on x86, SHA-256 has.
pub fn chromium_offer() -> CryptoProvider {
    let default = aws_lc_rs::default_provider();
    let tls13 = [
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let tls12 = default
        .cipher_suites
        .iter()
        .filter(|s| s.tls13().is_none())
        .copied();
    CryptoProvider {
        cipher_suites: tls13.into_iter().chain(tls12).collect(),
        kx_groups: vec![
            kx_group::X25519MLKEM768,
            kx_group::X25519,
            kx_group::SECP256R1,
            kx_group::SECP384R1,
        ],
        ..default
    }
}
