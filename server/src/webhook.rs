//! Webhooks (`[[notify.webhook]]` in the config file): an HTTP POST when a session starts
//! needing the user (the same transitions as `--notify-command`, [`crate::notify::Transitions`]),
//! as ntfy, Slack-compatible or JSON (a template of the user's, or a fixed shape).
//!
//! Every delivery runs on its own task: a slow or dead endpoint never holds up a session or
//! another webhook. Each attempt is bounded by the webhook's timeout; a failed one (no answer,
//! a 5xx, a 429) is retried with a doubling pause; at most [`MAX_IN_FLIGHT`] deliveries per
//! webhook are under way (more are dropped, with a log line). Failures are logged and written to
//! `DATA_DIR/webhooks.status` for `batond status`, with the address cut to its host (a topic or
//! a Slack path is a secret) and never a header.
//!
//! The HTTP client is hyper's own connection API over TCP or rustls: one request per
//! connection, no pool, is all a notification needs, and it keeps another HTTP stack out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::Semaphore;

use crate::hub::Hub;
use crate::notify::{Notice, Transitions};

/// Deliveries under way per webhook; beyond it a notice is dropped (and logged).
pub const MAX_IN_FLIGHT: usize = 16;
/// The file `batond status` reads.
pub const STATUS_FILE: &str = "webhooks.status";

/// What is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// ntfy: the message as the body, `Title: Baton`.
    Ntfy,
    /// Slack-compatible (Slack, Mattermost, Discord's `/slack` endpoint): `{"text": message}`.
    Slack,
    /// `{"session_id", "task_id", "task_title", "attention", "message"}`, or the template.
    Json,
}

/// One `[[notify.webhook]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    pub url: String,
    #[serde(default = "default_format")]
    pub format: Format,
    /// JSON with `{{session_id}}`, `{{task_id}}`, `{{task_title}}`, `{{attention}}`,
    /// `{{message}}` inside its strings (replaced by the values, escaped for JSON).
    #[serde(default)]
    pub template: Option<String>,
    /// Extra headers (e.g. `Authorization`); never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Bound on each attempt, in seconds (default 10).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Attempts after the first (default 3), after 1 s, 2 s, 4 s...
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The first pause before a retry, in milliseconds (default 1000).
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
}

fn default_format() -> Format {
    Format::Json
}
fn default_timeout() -> u64 {
    10
}
fn default_retries() -> u32 {
    3
}
fn default_backoff() -> u64 {
    1000
}

impl Webhook {
    /// Refuses what could never be sent: a URL that is not http(s), a template that is not
    /// JSON once filled in, a header that is not one, a format and a template together.
    pub fn check(&self) -> anyhow::Result<()> {
        let uri: hyper::Uri = self.url.parse().with_context(|| format!("{:?} is not a URL", redact(&self.url)))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            bail!("{} is not an http:// or https:// URL", redact(&self.url));
        }
        if let Some(template) = &self.template {
            if self.format != Format::Json {
                bail!("a template is for format = \"json\" (the default)");
            }
            let sample = Notice {
                session_id: "s".into(),
                task_id: "t".into(),
                task_title: "\"quoted\"".into(),
                attention: baton_protocol::Attention::Input,
            };
            serde_json::from_str::<serde_json::Value>(&fill(template, &sample))
                .context("the template is not JSON once its {{…}} are filled in")?;
        }
        for (name, value) in &self.headers {
            hyper::header::HeaderName::from_bytes(name.as_bytes())
                .with_context(|| format!("{name:?} is not a header name"))?;
            hyper::header::HeaderValue::from_str(value)
                .with_context(|| format!("header {name}: not a header value"))?;
        }
        if self.timeout_secs == 0 {
            bail!("timeout_secs must be at least 1");
        }
        Ok(())
    }

    /// The request body and its content type.
    fn body(&self, notice: &Notice) -> (String, &'static str) {
        match (self.format, &self.template) {
            (Format::Ntfy, _) => (notice.message(), "text/plain; charset=utf-8"),
            (Format::Slack, _) => (serde_json::json!({ "text": notice.message() }).to_string(), "application/json"),
            (Format::Json, Some(template)) => (fill(template, notice), "application/json"),
            (Format::Json, None) => (
                serde_json::json!({
                    "session_id": notice.session_id,
                    "task_id": notice.task_id,
                    "task_title": notice.task_title,
                    "attention": notice.attention.as_str(),
                    "message": notice.message(),
                })
                .to_string(),
                "application/json",
            ),
        }
    }
}

/// The template with its placeholders replaced by the values, escaped as the inside of a JSON
/// string.
fn fill(template: &str, notice: &Notice) -> String {
    let escaped = |text: &str| {
        let quoted = serde_json::Value::String(text.to_string()).to_string();
        quoted[1..quoted.len() - 1].to_string()
    };
    template
        .replace("{{session_id}}", &escaped(&notice.session_id))
        .replace("{{task_id}}", &escaped(&notice.task_id))
        .replace("{{task_title}}", &escaped(&notice.task_title))
        .replace("{{attention}}", &escaped(notice.attention.as_str()))
        .replace("{{message}}", &escaped(&notice.message()))
}

/// A URL as logs and `batond status` show it: scheme and host only (the path of an ntfy topic
/// or a Slack hook, the query and any user info are secrets).
pub fn redact(url: &str) -> String {
    match url.parse::<hyper::Uri>() {
        Ok(uri) => {
            let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{}{port}/…", uri.scheme_str().unwrap_or("?"), uri.host().unwrap_or("?"))
        }
        Err(_) => "(not a URL)".to_string(),
    }
}

/// Why an attempt failed, and whether to try again.
struct Failure {
    reason: String,
    retry: bool,
}

/// One POST, bounded by the webhook's timeout.
async fn attempt(webhook: &Webhook, body: &str, content_type: &'static str) -> Result<u16, Failure> {
    let timeout = Duration::from_secs(webhook.timeout_secs);
    match tokio::time::timeout(timeout, post(webhook, body, content_type)).await {
        Err(_) => Err(Failure { reason: format!("no answer within {timeout:?}"), retry: true }),
        Ok(Err(e)) => Err(Failure { reason: format!("{e:#}"), retry: true }),
        Ok(Ok(status)) if (200..300).contains(&status) => Ok(status),
        Ok(Ok(status)) => Err(Failure { reason: format!("answered {status}"), retry: status >= 500 || status == 429 }),
    }
}

async fn post(webhook: &Webhook, body: &str, content_type: &'static str) -> anyhow::Result<u16> {
    let mut headers = vec![(hyper::header::CONTENT_TYPE.as_str().to_string(), content_type.to_string())];
    if webhook.format == Format::Ntfy {
        headers.push(("Title".to_string(), "Baton".to_string()));
    }
    headers.extend(webhook.headers.iter().map(|(name, value)| (name.clone(), value.clone())));
    http_post(&webhook.url, &headers, Bytes::from(body.to_string())).await
}

/// One POST of `body` to `url` with `headers` (one request per connection, over TCP or rustls
/// with the web's roots); the answer's status. Unbounded: the caller bounds it.
pub(crate) async fn http_post(url: &str, headers: &[(String, String)], body: Bytes) -> anyhow::Result<u16> {
    let uri: hyper::Uri = url.parse()?;
    let secure = uri.scheme_str() == Some("https");
    let host = uri.host().context("no host")?.to_string();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let tcp = tokio::net::TcpStream::connect((bare.as_str(), port)).await.context("cannot connect")?;
    let path = uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    let authority = uri.authority().map(|a| a.as_str().rsplit('@').next().unwrap_or_default().to_string());
    let mut request = Request::post(path)
        .header(hyper::header::HOST, authority.unwrap_or(host.clone()))
        .header(hyper::header::USER_AGENT, concat!("batond/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.body(Full::new(body))?;
    let status = if secure {
        let config = baton_protocol::tls::web_client_config().map_err(anyhow::Error::msg)?;
        let name = rustls::pki_types::ServerName::try_from(bare.clone()).context("not a host name for TLS")?;
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.context("TLS handshake")?;
        send(TokioIo::new(tls), request).await?
    } else {
        send(TokioIo::new(tcp), request).await?
    };
    Ok(status)
}

async fn send<I>(io: I, request: Request<Full<Bytes>>) -> anyhow::Result<u16>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.context("HTTP handshake")?;
    let driver = tokio::spawn(connection);
    let response = sender.send_request(request).await.context("no answer")?;
    let status = response.status().as_u16();
    // The body is read (bounded by the attempt's timeout) so that the connection ends cleanly.
    let _ = response.into_body().collect().await;
    driver.abort();
    Ok(status)
}

/// What `batond status` shows of each webhook.
#[derive(Default)]
struct Record {
    sent: u64,
    failed: u64,
    last_failure: Option<String>,
}

struct State {
    path: PathBuf,
    records: Mutex<Vec<(String, Record)>>,
}

impl State {
    fn update(&self, index: usize, change: impl FnOnce(&mut Record)) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, record)) = records.get_mut(index) {
            change(record);
        }
        let mut text = String::new();
        for (url, record) in records.iter() {
            text.push_str(&format!("webhook {url}: {} sent, {} failed", record.sent, record.failed));
            if let Some(last) = &record.last_failure {
                text.push_str(&format!("; last failure {last}"));
            }
            text.push('\n');
        }
        if let Err(e) = std::fs::write(&self.path, text) {
            tracing::warn!(path = %self.path.display(), "cannot write the webhooks' status: {e}");
        }
    }
}

/// Delivers one notice to one webhook, with its retries.
async fn deliver(webhook: Arc<Webhook>, index: usize, notice: Notice, state: Arc<State>) {
    let (body, content_type) = webhook.body(&notice);
    let shown = redact(&webhook.url);
    let mut pause = Duration::from_millis(webhook.backoff_ms);
    for attempt_number in 0..=webhook.retries {
        match attempt(&webhook, &body, content_type).await {
            Ok(status) => {
                tracing::debug!(webhook = %shown, status, session_id = %notice.session_id, "webhook delivered");
                state.update(index, |r| r.sent += 1);
                return;
            }
            Err(failure) => {
                let last = !failure.retry || attempt_number == webhook.retries;
                tracing::warn!(
                    webhook = %shown,
                    session_id = %notice.session_id,
                    attempt = attempt_number + 1,
                    "webhook failed: {}{}",
                    failure.reason,
                    if last { "; giving up" } else { "; trying again" }
                );
                if last {
                    let at = baton_protocol::now_timestamp();
                    state.update(index, |r| {
                        r.failed += 1;
                        r.last_failure = Some(format!("at {at}: {}", failure.reason));
                    });
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = pause.saturating_mul(2);
            }
        }
    }
}

/// Sends every session's transitions to needing the user to the webhooks, until the hub closes.
pub fn spawn(hub: &Hub, webhooks: Vec<Webhook>, data_dir: &Path) -> tokio::task::JoinHandle<()> {
    let mut receiver = hub.subscribe();
    let state = Arc::new(State {
        path: data_dir.join(STATUS_FILE),
        records: Mutex::new(webhooks.iter().map(|w| (redact(&w.url), Record::default())).collect()),
    });
    state.update(usize::MAX, |_| {});
    let webhooks: Vec<(Arc<Webhook>, Arc<Semaphore>)> =
        webhooks.into_iter().map(|w| (Arc::new(w), Arc::new(Semaphore::new(MAX_IN_FLIGHT)))).collect();
    tokio::spawn(async move {
        let mut transitions = Transitions::default();
        loop {
            let published = match receiver.recv().await {
                Ok(published) => published,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "the webhooks missed notifications (the server was too busy)");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let change = match &published.notification {
                baton_protocol::Notification::StateChanged(change) => change,
                baton_protocol::Notification::TaskDeleted(deleted) => {
                    transitions.forget(&deleted.session_ids);
                    continue;
                }
                _ => continue,
            };
            let Some(notice) = transitions.notice(change) else { continue };
            for (index, (webhook, room)) in webhooks.iter().enumerate() {
                let Ok(place) = room.clone().try_acquire_owned() else {
                    tracing::warn!(webhook = %redact(&webhook.url), "too many webhook deliveries under way: dropped one");
                    state.update(index, |r| r.failed += 1);
                    continue;
                };
                let (webhook, notice, state) = (webhook.clone(), notice.clone(), state.clone());
                tokio::spawn(async move {
                    deliver(webhook, index, notice, state).await;
                    drop(place);
                });
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice() -> Notice {
        Notice {
            session_id: "sess-1".into(),
            task_id: "task-1".into(),
            task_title: "Fix \"login\"".into(),
            attention: baton_protocol::Attention::Permission,
        }
    }

    fn webhook(toml_text: &str) -> Webhook {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn bodies_follow_the_format() {
        let ntfy = webhook("url = \"https://ntfy.sh/secret-topic\"\nformat = \"ntfy\"");
        assert_eq!(ntfy.body(&notice()).0, "Fix \"login\": the agent asks for a permission");
        let slack = webhook("url = \"https://hooks.slack.com/services/T/B/X\"\nformat = \"slack\"");
        let body: serde_json::Value = serde_json::from_str(&slack.body(&notice()).0).unwrap();
        assert_eq!(body["text"], "Fix \"login\": the agent asks for a permission");
        let templated = webhook("url = \"http://h/x\"\ntemplate = '{\"msg\": \"{{task_title}} ({{attention}})\"}'");
        templated.check().unwrap();
        let body: serde_json::Value = serde_json::from_str(&templated.body(&notice()).0).unwrap();
        assert_eq!(body["msg"], "Fix \"login\" (permission)");
        let plain = webhook("url = \"http://h/x\"");
        let body: serde_json::Value = serde_json::from_str(&plain.body(&notice()).0).unwrap();
        assert_eq!((body["session_id"].as_str(), body["attention"].as_str()), (Some("sess-1"), Some("permission")));
    }

    #[test]
    fn bad_entries_are_refused_and_secrets_are_not_shown() {
        assert!(webhook("url = \"ftp://h/x\"").check().is_err());
        assert!(webhook("url = \"http://h/x\"\ntemplate = '{\"a\": {{message}}'").check().is_err());
        assert!(webhook("url = \"http://h/x\"\nformat = \"slack\"\ntemplate = '{}'").check().is_err());
        assert!(webhook("url = \"http://h/x\"\nheaders = { \"bad name\" = \"v\" }").check().is_err());
        assert!(toml::from_str::<Webhook>("url = \"http://h/x\"\nformat = \"pager\"").is_err());
        assert_eq!(redact("https://ntfy.sh/secret-topic?auth=x"), "https://ntfy.sh/…");
        assert_eq!(redact("http://user:pw@127.0.0.1:9000/hook"), "http://127.0.0.1:9000/…");
    }
}
