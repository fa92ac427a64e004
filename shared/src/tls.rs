//! TLS for `wss://` URLs: the client's side of batond's `--tls`. The server's certificate is
//! checked against the web's root certificates (webpki-roots) and the CA certificates of
//! [`ClientOptions::ca_file`], or, when [`ClientOptions::fingerprint`] is given, pinned: the
//! server's certificate must be exactly the one with that SHA-256 fingerprint (a self-signed
//! certificate has no authority to vouch for it; its fingerprint, printed by batond, does).
//!
//! rustls with the ring provider: no OpenSSL.
//!
//! [`ClientOptions::ca_file`]: crate::ClientOptions::ca_file
//! [`ClientOptions::fingerprint`]: crate::ClientOptions::fingerprint

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

/// The SHA-256 fingerprint of a certificate (its DER bytes), as browsers show it: 32 bytes in
/// upper-case hex separated by colons (`AB:CD:…`).
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    digest.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// The 32 bytes of a SHA-256 fingerprint written as hex, with or without colons (or spaces),
/// in either case, optionally after `sha256:` / `SHA256:`.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], String> {
    let trimmed = text.trim();
    let bare = trimmed
        .strip_prefix("sha256:")
        .or_else(|| trimmed.strip_prefix("SHA256:"))
        .or_else(|| trimmed.strip_prefix("SHA-256:"))
        .unwrap_or(trimmed);
    let hex: String = bare.chars().filter(|c| !matches!(c, ':' | ' ' | '-')).collect();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{text:?} is not a SHA-256 fingerprint: expected 64 hex digits, e.g. AB:CD:… as batond prints it"
        ));
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        // Checked above: two ASCII hex digits.
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(bytes)
}

/// The ring provider of rustls: pure Rust and assembly, built without the C toolchain and
/// CMake that aws-lc needs. rustls marks it deprecated because it lacks the post-quantum key
/// exchange; the classical ones it has are the ones browsers and phones all speak.
#[allow(deprecated)]
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS configuration of a client: pinned to `fingerprint` when given, else checked against
/// the web's roots and the certificates in `ca_file` (PEM).
pub(crate) fn client_config(fingerprint: Option<&str>, ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    let config = match fingerprint {
        Some(text) => {
            let pinned = parse_fingerprint(text)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Pinned { pinned, provider }))
                .with_no_client_auth()
        }
        None => {
            let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
            if let Some(path) = ca_file {
                let certificates = CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("cannot read the CA certificates in {}: {e}", path.display()))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("cannot read the CA certificates in {}: {e}", path.display()))?;
                if certificates.is_empty() {
                    return Err(format!("{} holds no PEM certificate", path.display()));
                }
                for certificate in certificates {
                    roots.add(certificate).map_err(|e| format!("a CA certificate in {}: {e}", path.display()))?;
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(Arc::new(config))
}

/// A client configuration for the web at large (the web's roots only), e.g. for webhooks.
pub fn web_client_config() -> Result<Arc<ClientConfig>, String> {
    client_config(None, None)
}

/// The name the TLS handshake asks for: the URL's host (an IP address or a DNS name).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|e| format!("{host:?} is not a host name for TLS: {e}"))
}

/// Accepts exactly the certificate with the pinned fingerprint, whatever its issuer, names or
/// dates (the pin is what the user checked); the handshake's signatures are still verified
/// with that certificate's key, so only the holder of its private key gets through.
#[derive(Debug)]
struct Pinned {
    pinned: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let offered: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        if offered == self.pinned {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate has the fingerprint {}, not the pinned one {}",
                fingerprint(end_entity.as_ref()),
                self.pinned.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_read_in_the_usual_spellings() {
        let der = b"not really a certificate";
        let printed = fingerprint(der);
        assert_eq!(printed.len(), 32 * 3 - 1);
        let bytes: [u8; 32] = Sha256::digest(der).into();
        assert_eq!(parse_fingerprint(&printed).unwrap(), bytes);
        assert_eq!(parse_fingerprint(&printed.replace(':', "").to_lowercase()).unwrap(), bytes);
        assert_eq!(parse_fingerprint(&format!("sha256:{printed}")).unwrap(), bytes);
        assert!(parse_fingerprint("AB:CD").unwrap_err().contains("64 hex digits"));
        assert!(parse_fingerprint(&"zz".repeat(32)).is_err());
    }
}
