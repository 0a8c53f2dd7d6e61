//! The server's TLS identity (`--tls-cert`, `--tls-key`): its certificate chain and private key,
//! checked when they are read so that a wrong file is named at start-up, not at the first
//! handshake.
//!
//! Owns: reading and checking the PEM files. Must not: print the key (its `Debug` does not).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Identity, ServerTlsConfig};

/// How long a connection may take to finish its TLS handshake before it is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What is wrong with a PEM file, without quoting it (a key's lines are secret).
fn problem(error: &rustls_pki_types::pem::Error) -> &'static str {
    use rustls_pki_types::pem::Error;
    match error {
        Error::MissingSectionEnd { .. } => "a section has no END line",
        Error::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        Error::Base64Decode(_) => "a section is not base64",
        Error::NoItemsFound => "no PEM section of that kind",
        Error::SectionTooLarge => "a section is too large",
        _ => "unreadable",
    }
}

/// A certificate chain (leaf first) and its private key, both PEM.
#[derive(Clone)]
pub struct TlsIdentity {
    chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
    certificates: usize,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("certificates", &self.certificates)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl TlsIdentity {
    /// The certificate chain, as PEM (a cluster node checks its advertised https:// URL
    /// trusting it).
    pub fn chain_pem(&self) -> &[u8] {
        &self.chain_pem
    }

    /// An identity from PEM text: at least one certificate, and one private key (PKCS#8,
    /// PKCS#1 or SEC1). Whether the key belongs to the certificate is checked by [`crate::run`]
    /// before it serves.
    ///
    /// # Errors
    /// When the chain has no certificate or one that does not parse, or there is no key.
    pub fn from_pem(
        chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> anyhow::Result<Self> {
        let chain_pem = chain_pem.into();
        let key_pem = key_pem.into();
        let certificates = CertificateDer::pem_slice_iter(&chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("the certificate chain does not parse: {}", problem(&e)))?
            .len();
        if certificates == 0 {
            bail!("the certificate file holds no PEM certificate");
        }
        PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| anyhow::anyhow!("the private key does not parse: {}", problem(&e)))?;
        Ok(TlsIdentity {
            chain_pem,
            key_pem,
            certificates,
        })
    }

    /// Reads the chain from `cert` and the key from `key`.
    ///
    /// # Errors
    /// A file that cannot be read, or what [`TlsIdentity::from_pem`] refuses, with its path.
    pub fn from_files(cert: &Path, key: &Path) -> anyhow::Result<Self> {
        let chain = std::fs::read(cert)
            .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?;
        let secret = std::fs::read(key)
            .with_context(|| format!("cannot read the TLS key {}", key.display()))?;
        TlsIdentity::from_pem(chain, secret)
            .with_context(|| format!("bad TLS files {} and {}", cert.display(), key.display()))
    }

    /// How many certificates the chain has.
    pub fn certificates(&self) -> usize {
        self.certificates
    }

    /// tonic's server configuration of this identity.
    pub(crate) fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.chain_pem, &self.key_pem))
            .timeout(HANDSHAKE_TIMEOUT)
    }
}
