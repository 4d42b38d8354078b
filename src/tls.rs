//! The TLS client configuration every outgoing HTTPS client of the
//! controller shares: rustls with ring (kube's provider, so no second
//! one), the system's roots, and a CA of the caller's besides.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Why a TLS client configuration could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("the CA is not PEM certificates: {0}")]
    Ca(String),
    #[error("the CA holds no certificate: give one or more PEM certificates")]
    NoCertificate,
    #[error("TLS: {0}")]
    Config(String),
}

/// A client configuration that trusts the system's roots and `ca`'s PEM
/// certificates.
pub fn client_config(ca: Option<&[u8]>) -> Result<rustls::ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    // A system root that does not parse is skipped, as hyper-rustls does.
    let (_added, _skipped) = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(pem) = ca {
        let certificates: Vec<CertificateDer> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Ca(e.to_string()))?;
        if certificates.is_empty() {
            return Err(TlsError::NoCertificate);
        }
        for certificate in certificates {
            roots.add(certificate).map_err(|e| TlsError::Ca(e.to_string()))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_that_is_no_certificate_is_refused_with_why() {
        assert_eq!(client_config(Some(b"not a certificate")).err(), Some(TlsError::NoCertificate));
        assert!(client_config(None).is_ok());
    }
}
