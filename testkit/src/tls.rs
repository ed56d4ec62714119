//! Test certificates from rcgen: a CA and a `localhost`/`127.0.0.1` leaf, written
//! as PEM files so the server loads them exactly as it loads an operator's.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::ClientConfig;
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

    /// A rustls client config trusting only the test CA.
    pub fn client_config(&self) -> anyhow::Result<Arc<ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).context("CA PEM")?;
        roots.add(ca)?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}
