//! A typed async client over a real WebSocket: connect, typed requests with timeouts, and a
//! stream of notifications. Scripted protocol tests and the TUI use it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use crate::{
    Envelope, ErrorPayload, EventRecord, Hello, MessageAddParams, MessageType, Notification, Request, SessionEvent,
    SessionResumeParams, SessionState, SessionStatus, SessionStatusParams, StopReason,
};

/// How [`Client::connect_with`] connects. `ClientOptions::default()`: 120 s per request, 10 s to
/// connect, no token.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Bound on each request unless the call gives its own (default 120 s, above the server's
    /// 90 s bound on a lazy resume inside `message.add`).
    pub request_timeout: Duration,
    /// Bound on the WebSocket handshake and on the `server.hello` that follows (default 10 s).
    pub connect_timeout: Duration,
    /// Sent as `Authorization: Bearer <token>`. batond requires one on every connection
    /// unless started with `--no-token`.
    pub token: Option<String>,
    /// Where to read the token from when `token` is not set: a local server's `DATA_DIR/token`
    /// (see [`token_file`]). Read at each connect, so a client that starts the server itself
    /// picks up the token the server generates on its first start.
    pub token_file: Option<PathBuf>,
    /// For a `wss://` URL: the SHA-256 fingerprint of the server's certificate (as batond prints
    /// it at start and in `batond status`). When given, that certificate and no other is
    /// accepted, whoever issued it: the way to reach a server with a self-signed certificate.
    pub fingerprint: Option<String>,
    /// For a `wss://` URL without a fingerprint: a PEM file of CA certificates trusted besides
    /// the web's usual roots (a private CA that issued the server's certificate).
    pub ca_file: Option<PathBuf>,
}

impl ClientOptions {
    /// Options for a local server of `data_dir`: its token is read from `DATA_DIR/token`.
    pub fn for_data_dir(data_dir: &Path) -> ClientOptions {
        ClientOptions { token_file: Some(token_file(data_dir)), ..ClientOptions::default() }
    }
}

/// The file in a data dir holding the token a local batond requires (mode 0600, written by
/// batond on its first start).
pub fn token_file(data_dir: &Path) -> PathBuf {
    data_dir.join("token")
}

/// The words batond's log says, before it answers, when it upgrades the database of an existing
/// data dir (which may take a while); a launcher that started it waits on when it reads them.
pub const UPGRADING_DATABASE: &str = "upgrading the database";

/// The token in `path` (a data dir's token file): `None` when the file does not exist or is
/// empty; an error when it exists but cannot be read (e.g. it belongs to another user).
pub fn read_token(path: &Path) -> Result<Option<String>, ClientError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim().to_string()).filter(|token| !token.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ClientError::Connect(format!("cannot read the token file {}: {e}", path.display()))),
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            // Above the server's 90 s bound on a lazy resume, so message.add is not cut short.
            request_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            token: None,
            token_file: None,
            fingerprint: None,
            ca_file: None,
        }
    }
}

/// Why a call of the client failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be opened: refused (a 401 or 403 says why), no `server.hello`
    /// within the connect timeout, or a bad URL or token.
    #[error("could not connect: {0}")]
    Connect(String),
    /// The connection is gone (closed by either side); nothing more will arrive.
    #[error("the connection is closed")]
    Closed,
    /// No answer (or no awaited notification) within this bound.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The server answered with an error frame ([`ClientError::server_error`] gives it).
    #[error("server error {0}")]
    Server(ErrorPayload),
    /// The answer did not fit the expected result type.
    #[error("could not decode the server's answer: {0}")]
    Decode(String),
    /// A wait for a session's events on a connection that is not subscribed to the session
    /// (`session.subscribe`): nothing could arrive, so the wait fails at once.
    #[error("not subscribed to {0}: send session.subscribe on this connection first")]
    NotSubscribed(String),
}

/// How a turn ended and what it produced ([`Notifications::wait_turn`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The stop reason of its `turn_completed`: an ACP reason (`end_turn`, `cancelled`,
    /// `max_tokens`...) or `interrupted` / `error`.
    pub stop_reason: StopReason,
    /// The agent's reply: its `message_chunk` texts, concatenated.
    pub text: String,
    /// Every event of the session read while waiting, in order, `turn_completed` last.
    pub events: Vec<EventRecord>,
}

impl ClientError {
    /// The server's error payload, when the server answered with an error.
    pub fn server_error(&self) -> Option<&ErrorPayload> {
        match self {
            ClientError::Server(e) => Some(e),
            _ => None,
        }
    }
}

/// What arrives on the connection besides responses.
// Nearly every event is a notification, the large variant: boxing it would cost an allocation
// per frame to save memory only on the rare error or close.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// A notification from the server.
    Notification(Notification),
    /// An error the server could not tie to a request (a malformed frame has no id).
    Error(ErrorPayload),
    /// The connection ended; nothing follows.
    Closed,
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Answer>>>>;

/// The sessions a connection is subscribed to, shared by the client and its notifications.
type Subscribed = Arc<Mutex<HashSet<String>>>;

/// A response or error frame for a waiting request, decoded by the waiter into its own type.
struct Answer {
    kind: MessageType,
    text: String,
}

/// A frame as the reader splits it, in one pass: what routes it, and its payload's text, decoded
/// once, straight into its type, by whoever receives the frame.
#[derive(serde::Deserialize)]
struct Header<'a> {
    #[serde(default, borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "type")]
    kind: MessageType,
    #[serde(default, borrow)]
    action: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    payload: Option<&'a serde_json::value::RawValue>,
}

/// The payload of a frame, as `T`.
#[derive(serde::Deserialize)]
struct PayloadOf<T> {
    #[serde(default = "Option::default")]
    payload: Option<T>,
}

fn decode_payload<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    match serde_json::from_str::<PayloadOf<T>>(text)?.payload {
        Some(payload) => Ok(payload),
        // An absent or null payload decodes as JSON null, as an `Envelope` would hold it.
        None => serde_json::from_value(Value::Null),
    }
}

struct Inner {
    out: mpsc::UnboundedSender<WsMessage>,
    pending: Pending,
    next_id: AtomicU64,
    closed: Arc<AtomicBool>,
    hello: Hello,
    options: ClientOptions,
    subscribed: Subscribed,
}

/// The byte stream a WebSocket runs over: plain TCP (`ws://`) or TLS over TCP (`wss://`).
trait Transport: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Transport for T {}

/// Opens the TCP connection (and for `wss://` the TLS session, see [`crate::tls`]) and makes
/// the WebSocket handshake over it.
async fn open_websocket(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
    options: &ClientOptions,
) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Transport>>, ClientError> {
    let uri = request.uri();
    let secure = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        _ => return Err(ClientError::Connect(format!("{uri} is not a ws:// or wss:// URL"))),
    };
    let host = uri.host().ok_or_else(|| ClientError::Connect(format!("no host in {uri}")))?.to_string();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let bare = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let tcp = tokio::net::TcpStream::connect((bare.as_str(), port))
        .await
        .map_err(|e| ClientError::Connect(format!("cannot reach {host}:{port}: {e}")))?;
    // Nagle's algorithm would hold small request frames back for up to ~40 ms.
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Transport> = if secure {
        let config = crate::tls::client_config(options.fingerprint.as_deref(), options.ca_file.as_deref())
            .map_err(ClientError::Connect)?;
        let name = crate::tls::server_name(&host).map_err(ClientError::Connect)?;
        let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.map_err(|e| {
            let hint = if options.fingerprint.is_none() && e.to_string().contains("UnknownIssuer") {
                " (a self-signed certificate: pin its fingerprint, which batond prints at start and in \
                 `batond status`, or trust the CA that issued it)"
            } else {
                ""
            };
            ClientError::Connect(format!("TLS handshake with {host}:{port} failed: {e}{hint}"))
        })?;
        Box::new(tls)
    } else {
        if options.fingerprint.is_some() {
            return Err(ClientError::Connect(format!(
                "a certificate fingerprint was given for {uri}, which is not a wss:// URL: nothing would check it"
            )));
        }
        Box::new(tcp)
    };
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, None)
        .await
        .map_err(|e| ClientError::Connect(e.to_string()))?;
    Ok(ws)
}

/// A connection to `batond`. Cheap to clone; all clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// The stream of notifications of one connection.
pub struct Notifications {
    rx: mpsc::UnboundedReceiver<ClientEvent>,
    subscribed: Subscribed,
}

impl Notifications {
    /// Whether this connection is subscribed to `session_id`: its `session.subscribe` was
    /// answered and no `session.unsubscribe` was sent since.
    pub fn is_subscribed(&self, session_id: &str) -> bool {
        self.subscribed.lock().is_ok_and(|set| set.contains(session_id))
    }

    /// The next event; `None` once the connection is gone and everything was read.
    pub async fn recv(&mut self) -> Option<ClientEvent> {
        self.rx.recv().await
    }

    /// An event that is already here, without waiting.
    pub fn try_recv(&mut self) -> Option<ClientEvent> {
        self.rx.try_recv().ok()
    }

    /// Reads events until `pick` returns `Some`, for at most `timeout`. Events passed over are
    /// dropped.
    pub async fn wait_for<T>(
        &mut self,
        timeout: Duration,
        mut pick: impl FnMut(&ClientEvent) -> Option<T>,
    ) -> Result<T, ClientError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let event =
                tokio::time::timeout_at(deadline, self.rx.recv()).await.map_err(|_| ClientError::Timeout(timeout))?;
            let Some(event) = event else {
                return Err(ClientError::Closed);
            };
            if let Some(found) = pick(&event) {
                return Ok(found);
            }
            if event == ClientEvent::Closed {
                return Err(ClientError::Closed);
            }
        }
    }
}

impl Notifications {
    /// Reads until `session_id`'s next `turn_completed` and returns the turn: its stop reason,
    /// the agent's text and every event of the session on the way. The session must be
    /// subscribed (`session.subscribe`), or this fails at once with `Err(NotSubscribed)`; other
    /// notifications are dropped. `Err(Timeout)` after `timeout`, `Err(Closed)` when the
    /// connection ends first.
    pub async fn wait_turn(&mut self, session_id: &str, timeout: Duration) -> Result<TurnOutcome, ClientError> {
        if !self.is_subscribed(session_id) {
            return Err(ClientError::NotSubscribed(session_id.to_string()));
        }
        let mut events = Vec::new();
        let stop_reason = self
            .wait_for(timeout, |event| match event {
                ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                    events.push(record.clone());
                    match &record.event {
                        SessionEvent::TurnCompleted { stop_reason, .. } => Some(stop_reason.clone()),
                        _ => None,
                    }
                }
                _ => None,
            })
            .await?;
        let text = events
            .iter()
            .filter_map(|r| match &r.event {
                SessionEvent::MessageChunk { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        Ok(TurnOutcome { stop_reason, text, events })
    }
}

impl Client {
    /// Resumes `session_id` when the server says it needs resuming (PROTOCOL.md §8) and waits,
    /// at most `timeout`, until the launch settles; returns the session's status after it.
    /// Nothing is done for a session that does not need resuming. A status with `needs_resume`
    /// still set means the restore failed (`last_error` says why). `notes` must be this
    /// client's notifications; notifications read while waiting are dropped.
    pub async fn resume_and_wait(
        &self,
        notes: &mut Notifications,
        session_id: &str,
        timeout: Duration,
    ) -> Result<SessionStatus, ClientError> {
        let status = self.request(SessionStatusParams::new(session_id)).await?;
        if !(status.needs_resume && status.is_resumable) {
            return Ok(status);
        }
        let resumed = self.request(SessionResumeParams::new(session_id)).await?;
        if resumed.launched {
            notes
                .wait_for(timeout, |event| match event {
                    ClientEvent::Notification(Notification::StateChanged(change))
                        if change.session_id == session_id && change.previous_state == Some(SessionState::Starting) =>
                    {
                        Some(())
                    }
                    _ => None,
                })
                .await?;
        }
        self.request(SessionStatusParams::new(session_id)).await
    }

    /// Sends `content` to the session's agent (`message.add`, which resumes a session that needs
    /// it) and waits for the turn, at most `timeout`: see [`Notifications::wait_turn`]. The
    /// session must be subscribed.
    pub async fn prompt_and_wait(
        &self,
        notes: &mut Notifications,
        session_id: &str,
        content: &str,
        timeout: Duration,
    ) -> Result<TurnOutcome, ClientError> {
        self.request_with_timeout(MessageAddParams::new(session_id, content), timeout).await?;
        notes.wait_turn(session_id, timeout).await
    }

    /// Connects to `url` (e.g. `ws://127.0.0.1:7777/ws`) and waits for `server.hello`.
    pub async fn connect(url: &str) -> Result<(Client, Notifications), ClientError> {
        Self::connect_with(url, ClientOptions::default()).await
    }

    /// Connects to `url` with these options (token, timeouts) and waits for `server.hello`.
    pub async fn connect_with(url: &str, options: ClientOptions) -> Result<(Client, Notifications), ClientError> {
        let mut request = url.into_client_request().map_err(|e| ClientError::Connect(e.to_string()))?;
        // The protocol this client speaks and its name, for the server's log.
        request.headers_mut().insert("baton-protocol-version", HeaderValue::from(crate::PROTOCOL_VERSION));
        request
            .headers_mut()
            .insert("baton-client", HeaderValue::from_static(concat!("baton-protocol/", env!("CARGO_PKG_VERSION"))));
        let token = match (&options.token, &options.token_file) {
            (Some(token), _) => Some(token.clone()),
            (None, Some(path)) => read_token(path)?,
            (None, None) => None,
        };
        if let Some(token) = &token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| ClientError::Connect(format!("bad token: {e}")))?;
            request.headers_mut().insert("authorization", value);
        }
        let connect = open_websocket(request, &options);
        let ws = tokio::time::timeout(options.connect_timeout, connect)
            .await
            .map_err(|_| ClientError::Connect(format!("no connection within {:?}", options.connect_timeout)))??;
        let (mut sink, mut stream) = ws.split();

        let hello = tokio::time::timeout(options.connect_timeout, read_hello(&mut stream))
            .await
            .map_err(|_| ClientError::Connect("no server.hello".into()))??;

        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<WsMessage>();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));

        tokio::spawn(async move {
            while let Some(msg) = out_rx.recv().await {
                let is_close = matches!(msg, WsMessage::Close(_));
                if sink.send(msg).await.is_err() || is_close {
                    break;
                }
            }
        });

        let reader_pending = pending.clone();
        let reader_closed = closed.clone();
        tokio::spawn(async move {
            while let Some(frame) = stream.next().await {
                let text = match frame {
                    Ok(WsMessage::Text(text)) => text,
                    Ok(WsMessage::Close(_)) | Err(_) => break,
                    Ok(_) => continue,
                };
                let Ok(header) = serde_json::from_str::<Header>(text.as_str()) else {
                    tracing::warn!("undecodable frame from server");
                    continue;
                };
                route(header, text.as_str(), &reader_pending, &event_tx);
            }
            reader_closed.store(true, Ordering::SeqCst);
            // Dropping the senders fails every request still waiting, with Closed.
            reader_pending.lock().map(|mut p| p.clear()).ok();
            let _ = event_tx.send(ClientEvent::Closed);
        });

        let subscribed = Subscribed::default();
        let inner = Inner {
            out: out_tx,
            pending,
            next_id: AtomicU64::new(1),
            closed,
            hello,
            options,
            subscribed: subscribed.clone(),
        };
        Ok((Client { inner: Arc::new(inner) }, Notifications { rx: event_rx, subscribed }))
    }

    /// The `server.hello` the server greeted this connection with.
    pub fn hello(&self) -> &Hello {
        &self.inner.hello
    }

    /// Whether this connection is subscribed to `session_id` (see [`Notifications::is_subscribed`]).
    pub fn is_subscribed(&self, session_id: &str) -> bool {
        self.inner.subscribed.lock().is_ok_and(|set| set.contains(session_id))
    }

    /// The connection has ended; requests fail from now on.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Sends a typed request and waits for its typed result.
    pub async fn request<R: Request>(&self, params: R) -> Result<R::Response, ClientError> {
        self.request_with_timeout(params, self.inner.options.request_timeout).await
    }

    /// Like [`Client::request`], waiting at most `timeout` for the answer.
    pub async fn request_with_timeout<R: Request>(
        &self,
        params: R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        let payload = serde_json::to_value(&params).map_err(|e| ClientError::Decode(e.to_string()))?;
        let answer = self.exchange(R::ACTION, payload, timeout).await?;
        decode_payload(&answer).map_err(|e| ClientError::Decode(format!("{}: {e}", R::ACTION)))
    }

    /// Sends any action with any payload; for actions this crate does not know yet, and for
    /// protocol tests.
    pub async fn request_raw(&self, action: &str, payload: Value) -> Result<Value, ClientError> {
        self.request_raw_with_timeout(action, payload, self.inner.options.request_timeout).await
    }

    /// Like [`Client::request_raw`], waiting at most `timeout` for the answer.
    pub async fn request_raw_with_timeout(
        &self,
        action: &str,
        payload: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let answer = self.exchange(action, payload, timeout).await?;
        decode_payload(&answer).map_err(|e| ClientError::Decode(format!("{action}: {e}")))
    }

    /// Sends a request and returns the text of its response frame (an error frame is decoded
    /// into `ClientError::Server`).
    async fn exchange(&self, action: &str, payload: Value, timeout: Duration) -> Result<String, ClientError> {
        // Which sessions this connection follows, for the waits that need a subscription.
        let session = payload.get("session_id").and_then(Value::as_str).map(str::to_string);
        let (subscribing, unsubscribing) =
            (action == crate::SubscribeParams::ACTION, action == crate::UnsubscribeParams::ACTION);
        if let (true, Some(session), Ok(mut set)) = (unsubscribing, &session, self.inner.subscribed.lock()) {
            set.remove(session);
        }
        let answer = self.exchange_frames(action, payload, timeout).await?;
        if let (true, Some(session), Ok(mut set)) = (subscribing, session, self.inner.subscribed.lock()) {
            set.insert(session);
        }
        Ok(answer)
    }

    async fn exchange_frames(&self, action: &str, payload: Value, timeout: Duration) -> Result<String, ClientError> {
        let id = format!("c{}", self.inner.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = oneshot::channel();
        self.inner.pending.lock().map_err(|_| ClientError::Closed)?.insert(id.clone(), tx);
        let envelope = Envelope::request(id.clone(), action, payload);
        if self.is_closed() || self.inner.out.send(WsMessage::text(envelope.to_json())).is_err() {
            self.forget(&id);
            return Err(ClientError::Closed);
        }
        let answer = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => return Err(ClientError::Closed),
            Err(_) => {
                self.forget(&id);
                return Err(ClientError::Timeout(timeout));
            }
        };
        match answer.kind {
            MessageType::Error => {
                let error = decode_payload(&answer.text).unwrap_or_else(|_| {
                    let header = serde_json::from_str::<Header>(&answer.text).ok();
                    undecodable_error(header.and_then(|h| h.payload))
                });
                Err(ClientError::Server(error))
            }
            _ => Ok(answer.text),
        }
    }

    /// Sends a raw text frame as is (for protocol tests of malformed input).
    pub fn send_text(&self, text: impl Into<String>) -> Result<(), ClientError> {
        self.inner.out.send(WsMessage::text(text.into())).map_err(|_| ClientError::Closed)
    }

    /// Closes the connection politely.
    pub fn close(&self) {
        let _ = self.inner.out.send(WsMessage::Close(None));
    }

    fn forget(&self, id: &str) {
        if let Ok(mut pending) = self.inner.pending.lock() {
            pending.remove(id);
        }
    }
}

async fn read_hello<S>(stream: &mut S) -> Result<Hello, ClientError>
where
    S: futures_util::Stream<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    while let Some(frame) = stream.next().await {
        match frame {
            Ok(WsMessage::Text(text)) => {
                let envelope: Envelope =
                    serde_json::from_str(text.as_str()).map_err(|e| ClientError::Connect(e.to_string()))?;
                return match Notification::from_envelope(&envelope) {
                    Ok(Notification::Hello(hello)) => Ok(hello),
                    _ if envelope.kind == MessageType::Error => {
                        let error: ErrorPayload = serde_json::from_value(envelope.payload)
                            .map_err(|e| ClientError::Connect(e.to_string()))?;
                        Err(ClientError::Server(error))
                    }
                    _ => Err(ClientError::Connect(format!("expected server.hello, got {}", envelope.action))),
                };
            }
            Ok(WsMessage::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        }
    }
    Err(ClientError::Connect("connection closed before server.hello".into()))
}

/// An error frame whose payload is not an error payload (a server that breaks the protocol):
/// its code as sent when it has a string `code`, its `message` when it has one, otherwise the
/// payload's text as the message, so that what the server said is not lost.
fn undecodable_error(payload: Option<&serde_json::value::RawValue>) -> ErrorPayload {
    let text = payload.map_or("null", |p| p.get());
    let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let code = value.get("code").and_then(Value::as_str).unwrap_or("");
    let message = value.get("message").and_then(Value::as_str).map_or_else(|| text.to_string(), str::to_string);
    ErrorPayload::new(crate::ErrorCode::parse(code), message)
}

fn route(header: Header, text: &str, pending: &Pending, events: &mpsc::UnboundedSender<ClientEvent>) {
    match header.kind {
        MessageType::Response | MessageType::Error => {
            let waiter = header.id.as_ref().and_then(|id| pending.lock().ok().and_then(|mut p| p.remove(id.as_ref())));
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send(Answer { kind: header.kind, text: text.to_string() });
                }
                // Not dropped, whatever it holds: a payload that is not an error payload is
                // passed on as the message of one, with the code as sent (or none).
                None if header.kind == MessageType::Error => {
                    let error = decode_payload(text).unwrap_or_else(|_| undecodable_error(header.payload));
                    let _ = events.send(ClientEvent::Error(error));
                }
                None => {}
            }
        }
        MessageType::Notification => match Notification::from_payload_json(
            &header.action,
            header.payload.map_or("null", |payload| payload.get()),
        ) {
            Ok(notification) => {
                let _ = events.send(ClientEvent::Notification(notification));
            }
            Err(e) => tracing::debug!("ignoring notification: {e}"),
        },
        MessageType::Request => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bound_nesting, ErrorCode, EventRecord, Message, MessageKind, MessageListResult, MAX_NESTING};
    use serde_json::json;

    /// A value that nests 124 levels (what an agent's line can hold), cut as the server cuts
    /// values from agents.
    fn bounded_deep() -> Value {
        let mut value = (0..124).fold(json!("core"), |inner, _| json!([inner]));
        assert_eq!(bound_nesting(&mut value, MAX_NESTING), 1);
        value
    }

    #[test]
    fn frames_around_values_at_the_nesting_bound_decode() {
        // The deepest a stored message's data can be: MAX_NESTING levels in all.
        let mut data = json!({"raw_input": bounded_deep()});
        bound_nesting(&mut data, MAX_NESTING);
        let message = Message {
            seq: 3,
            kind: MessageKind::ToolCall,
            text: "Deep".into(),
            message_id: None,
            tool_call_id: Some("t@1".into()),
            status: None,
            data: Some(data),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
        };
        let result = MessageListResult { messages: vec![message.clone()], has_more: false, cut: Vec::new() };
        let frame = Envelope::response(Some("c1".into()), "message.list", serde_json::to_value(&result).unwrap());
        let text = serde_json::to_string(&frame).unwrap();
        let decoded: MessageListResult = decode_payload(&text).expect("a message.list answer decodes");
        assert_eq!(decoded.messages, vec![message]);

        let record = EventRecord {
            session_id: "s".into(),
            seq: 3,
            event: SessionEvent::ToolCall {
                tool_call_id: "t@1".into(),
                title: "Deep".into(),
                tool_kind: None,
                status: None,
                content: None,
                raw_input: Some(bounded_deep()),
            },
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        let frame = Envelope::notification(Notification::EVENT, serde_json::to_value(&record).unwrap());
        let text = serde_json::to_string(&frame).unwrap();
        let header: Header = serde_json::from_str(&text).expect("the header decodes");
        let Ok(Notification::Event(decoded)) = Notification::from_json(&header.action, &text) else {
            panic!("the event notification decodes")
        };
        assert_eq!(decoded, record);
    }

    /// An error frame no request waits for is passed on, whatever it holds: an unknown code with
    /// its message, or a payload that is not an error payload at all.
    #[test]
    fn unmatched_error_frames_are_never_dropped() {
        let pending: Pending = Arc::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let frames = [
            (
                json!({"type": "error", "action": "", "payload": {"code": "NEW_CODE", "message": "a new thing"}}),
                ErrorCode::Other("NEW_CODE".into()),
                "a new thing",
            ),
            (
                json!({"id": "c9", "type": "error", "action": "x", "payload": {"code": "BAD_REQUEST", "message": "late", "retryable": false}}),
                ErrorCode::BadRequest,
                "late",
            ),
            (
                json!({"type": "error", "action": "", "payload": "the server broke"}),
                ErrorCode::Other(String::new()),
                "\"the server broke\"",
            ),
            (
                json!({"type": "error", "action": "", "payload": {"code": 7, "message": "odd"}}),
                ErrorCode::Other(String::new()),
                "odd",
            ),
        ];
        for (frame, code, message) in frames {
            let text = frame.to_string();
            route(serde_json::from_str(&text).unwrap(), &text, &pending, &tx);
            let Ok(ClientEvent::Error(error)) = rx.try_recv() else { panic!("{text} was dropped") };
            assert_eq!((error.code, error.message.as_str()), (code, message), "{text}");
        }
    }

    #[test]
    fn without_the_bound_the_same_frame_does_not_decode() {
        // Why the bound exists: 124 levels inside a message.list answer pass serde_json's limit.
        let deep = (0..124).fold(json!("core"), |inner, _| json!([inner]));
        let text = json!({"id": "c1", "type": "response", "action": "message.list",
            "payload": {"messages": [{"data": {"raw_input": deep}}], "has_more": false}})
        .to_string();
        let error = decode_payload::<MessageListResult>(&text).expect_err("too deep");
        assert!(error.to_string().contains("recursion limit"), "{error}");
    }
}
