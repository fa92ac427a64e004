//! HTTPS and WSS on the gateway's port: `--tls-cert`/`--tls-key` (a certificate and key the
//! user has, PEM), or `--tls self-signed` (a certificate made once with rcgen and kept in the
//! data dir, owner-only). The SHA-256 fingerprint of the certificate served is printed at start
//! and by `batond status`, for a client to pin (`--fingerprint`) and for a user to compare on a
//! phone's browser. rustls through tokio-rustls, with the ring provider: no OpenSSL.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The self-signed certificate of `--tls self-signed`, in the data dir.
pub const SELF_SIGNED_CERT: &str = "tls-self-signed.crt";
/// Its private key (mode 0600, like everything in the data dir).
pub const SELF_SIGNED_KEY: &str = "tls-self-signed.key";
/// Written while the server runs: the fingerprint of the certificate it serves, for
/// `batond status`.
pub const FINGERPRINT_FILE: &str = "batond.fingerprint";

/// Where the server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// A certificate chain and its private key, both PEM files.
    Files { cert: PathBuf, key: PathBuf },
    /// The data dir's self-signed certificate, made on the first start that asks for it.
    SelfSigned,
}

/// What the gateway serves TLS with.
#[derive(Clone)]
pub struct ServerTls {
    pub acceptor: TlsAcceptor,
    /// SHA-256 of the certificate served (the chain's first), `AB:CD:…`.
    pub fingerprint: String,
}

impl ServerTls {
    /// Loads (or for a self-signed certificate, makes on first use) the certificate and key.
    /// `listen` adds its address to a new self-signed certificate's names.
    pub fn load(source: &TlsSource, data_dir: &Path, listen: SocketAddr) -> anyhow::Result<ServerTls> {
        let (cert, key) = match source {
            TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
            TlsSource::SelfSigned => {
                ensure_self_signed(data_dir, listen)?;
                (data_dir.join(SELF_SIGNED_CERT), data_dir.join(SELF_SIGNED_KEY))
            }
        };
        let chain = CertificateDer::pem_file_iter(&cert)
            .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("the TLS certificate {} is not valid PEM", cert.display()))?;
        let Some(first) = chain.first() else {
            bail!("the TLS certificate file {} holds no certificate (expected PEM)", cert.display());
        };
        let fingerprint = baton_protocol::tls::fingerprint(first.as_ref());
        let private = PrivateKeyDer::from_pem_file(&key)
            .with_context(|| format!("cannot read a PEM private key from {}", key.display()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(baton_protocol::tls::provider())
            .with_safe_default_protocol_versions()
            .context("cannot set up TLS")?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .with_context(|| {
                format!("the TLS certificate {} and key {} do not go together", cert.display(), key.display())
            })?;
        // HTTP/1.1 only, as the gateway speaks (the WebSocket upgrade needs it).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls { acceptor: TlsAcceptor::from(Arc::new(config)), fingerprint })
    }
}

/// Makes the data dir's self-signed certificate unless it is there: valid for `localhost`, the
/// loopback addresses, this machine's name and the listening address (a phone that reaches the
/// server by another address sees a name mismatch; the fingerprint is what to check). The key
/// is written first and both files appear whole (written aside, then renamed), owner-only.
fn ensure_self_signed(data_dir: &Path, listen: SocketAddr) -> anyhow::Result<()> {
    let cert = data_dir.join(SELF_SIGNED_CERT);
    let key = data_dir.join(SELF_SIGNED_KEY);
    match (cert.exists(), key.exists()) {
        (true, true) => return Ok(()),
        (true, false) => bail!(
            "{} exists without its key {}: remove it to have a new self-signed certificate made",
            cert.display(),
            key.display()
        ),
        _ => {}
    }
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if let Some(host) = host_name() {
        names.push(host);
    }
    if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
        names.push(listen.ip().to_string());
    }
    let made = rcgen::generate_simple_self_signed(names).context("cannot make a self-signed certificate")?;
    write_private(&key, made.signing_key.serialize_pem().as_bytes())?;
    write_private(&cert, made.cert.pem().as_bytes())?;
    tracing::info!(path = %cert.display(), "made a self-signed TLS certificate");
    Ok(())
}

/// This machine's name, when it has a usable one.
fn host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if status != 0 {
        return None;
    }
    let end = buffer.iter().position(|b| *b == 0)?;
    let name = std::str::from_utf8(&buffer[..end]).ok()?.to_string();
    let valid = !name.is_empty()
        && name.parse::<IpAddr>().is_err()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'));
    valid.then_some(name)
}

fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let aside = path.with_extension(format!("new.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&aside)
        .and_then(|mut file| file.write_all(contents).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&aside, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        bail!("cannot write {}: {e}", path.display());
    }
    Ok(())
}

/// For `batond status` when no server runs: the fingerprint of the data dir's self-signed
/// certificate, if one was made.
pub fn self_signed_fingerprint(data_dir: &Path) -> Option<String> {
    let chain = CertificateDer::pem_file_iter(data_dir.join(SELF_SIGNED_CERT)).ok()?;
    let first = chain.into_iter().next()?.ok()?;
    Some(baton_protocol::tls::fingerprint(first.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_self_signed_certificate_is_made_once_and_kept_private() {
        let dir = tempfile::tempdir().unwrap();
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let first = ServerTls::load(&TlsSource::SelfSigned, dir.path(), listen).unwrap();
        for file in [SELF_SIGNED_CERT, SELF_SIGNED_KEY] {
            let mode = std::fs::metadata(dir.path().join(file)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{file}");
        }
        let again = ServerTls::load(&TlsSource::SelfSigned, dir.path(), listen).unwrap();
        assert_eq!(first.fingerprint, again.fingerprint, "the same certificate on the next start");
        assert_eq!(self_signed_fingerprint(dir.path()).as_deref(), Some(first.fingerprint.as_str()));
        std::fs::remove_file(dir.path().join(SELF_SIGNED_KEY)).unwrap();
        let error = ServerTls::load(&TlsSource::SelfSigned, dir.path(), listen).err().unwrap().to_string();
        assert!(error.contains("without its key"), "{error}");
    }

    #[test]
    fn bad_certificate_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&cert, "not a certificate\n").unwrap();
        std::fs::write(&key, "not a key\n").unwrap();
        let source = TlsSource::Files { cert: cert.clone(), key: key.clone() };
        let error = format!("{:#}", ServerTls::load(&source, dir.path(), listen).err().unwrap());
        assert!(error.contains("cert.pem") && error.contains("no certificate"), "{error}");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(&cert, made.cert.pem()).unwrap();
        let error = format!("{:#}", ServerTls::load(&source, dir.path(), listen).err().unwrap());
        assert!(error.contains("key.pem"), "{error}");
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&key, other.serialize_pem()).unwrap();
        let error = format!("{:#}", ServerTls::load(&source, dir.path(), listen).err().unwrap());
        assert!(error.contains("do not go together"), "{error}");
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        assert!(ServerTls::load(&source, dir.path(), listen).is_ok());
    }
}
