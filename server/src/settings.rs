//! The server's own tables of the config file (DATA_DIR/agents.toml or `--agents-config`),
//! beside its `[agents.*]`: `[tls]` and `[[notify.webhook]]`. Command-line flags win over them.
//!
//! ```toml
//! [tls]
//! cert = "/etc/baton/cert.pem"   # with key: a certificate of your own (PEM)
//! key = "/etc/baton/key.pem"
//! # or: self_signed = true       # a certificate made once, kept in the data dir
//!
//! [[notify.webhook]]              # see crate::webhook
//! url = "https://ntfy.sh/my-secret-topic"
//! format = "ntfy"                 # or "slack", or "json" (default) with an optional template
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::tls::TlsSource;

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    tls: Option<TlsTable>,
    #[serde(default)]
    notify: NotifyTable,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyTable {
    #[serde(default)]
    webhook: Vec<crate::webhook::Webhook>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsTable {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    #[serde(default)]
    self_signed: bool,
}

/// What the config file says about the server.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Settings {
    pub tls: Option<TlsSource>,
    pub webhooks: Vec<crate::webhook::Webhook>,
}

impl Settings {
    /// Reads `path`; a missing file says nothing. Relative certificate paths are taken from the
    /// file's folder.
    pub fn load(path: &Path) -> anyhow::Result<Settings> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
            Err(e) => bail!("cannot read the config file {}: {e}", path.display()),
        };
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .with_context(|| format!("the config file {} is invalid", path.display()))
    }

    fn parse(text: &str, base: &Path) -> anyhow::Result<Settings> {
        let file: File = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        let tls = match file.tls {
            None => None,
            Some(TlsTable { cert: None, key: None, self_signed: false }) => None,
            Some(TlsTable { cert: None, key: None, self_signed: true }) => Some(TlsSource::SelfSigned),
            Some(TlsTable { cert: Some(cert), key: Some(key), self_signed: false }) => {
                Some(TlsSource::Files { cert: base.join(cert), key: base.join(key) })
            }
            Some(TlsTable { self_signed: true, .. }) => {
                bail!("[tls] has self_signed = true and a cert or key: choose one")
            }
            Some(_) => bail!("[tls] needs both cert and key (PEM files), or self_signed = true"),
        };
        for (index, webhook) in file.notify.webhook.iter().enumerate() {
            webhook.check().with_context(|| format!("[[notify.webhook]] number {}", index + 1))?;
        }
        Ok(Settings { tls, webhooks: file.notify.webhook })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_table_names_files_or_asks_for_a_self_signed_certificate() {
        let base = Path::new("/etc/baton");
        assert_eq!(Settings::parse("[agents.x]\ncommand = \"x\"\n", base).unwrap(), Settings::default());
        assert_eq!(Settings::parse("[tls]\nself_signed = true\n", base).unwrap().tls, Some(TlsSource::SelfSigned));
        assert_eq!(
            Settings::parse("[tls]\ncert = \"c.pem\"\nkey = \"/k.pem\"\n", base).unwrap().tls,
            Some(TlsSource::Files { cert: base.join("c.pem"), key: PathBuf::from("/k.pem") })
        );
        let error = format!("{:#}", Settings::parse("[tls]\ncert = \"c.pem\"\n", base).unwrap_err());
        assert!(error.contains("both cert and key"), "{error}");
        assert!(Settings::parse("[tls]\nself_signed = true\ncert = \"c\"\nkey = \"k\"\n", base).is_err());
        assert!(Settings::parse("[tls]\ncertificate = \"c\"\n", base).is_err(), "unknown keys are refused");
        let hooks = "[[notify.webhook]]\nurl = \"https://ntfy.sh/t\"\nformat = \"ntfy\"\n[[notify.webhook]]\nurl = \"http://h/x\"\n";
        assert_eq!(Settings::parse(hooks, base).unwrap().webhooks.len(), 2);
        let error = format!("{:#}", Settings::parse("[[notify.webhook]]\nurl = \"ftp://x/y\"\n", base).unwrap_err());
        assert!(error.contains("number 1") && error.contains("not an http"), "{error}");
    }
}
