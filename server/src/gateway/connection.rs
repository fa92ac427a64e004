//! One client connection: requests in, responses and notifications out, and the session
//! subscriptions with `since_seq` replay.
//!
//! The connection listens to the hub from its first moment, so an event committed while a
//! backlog is being read is queued, not lost; events are then deduplicated by sequence number.
//! When the connection falls behind the hub, it re-reads what it missed from the journal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_protocol::{
    ClientRequest, Envelope, ErrorCode, ErrorPayload, FrameError, Hello, MessageType, Notification, RequestFrame,
    RequestParseError, StateChanged, SubscribeResult, UnsubscribeResult, MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message as WsMessage, Utf8Bytes};

use super::dispatch::dispatch;
use super::Gateway;
use crate::hub::Published;

/// Frames queued for a client before the connection waits for it.
const OUTBOX_FRAMES: usize = 1024;
const READ_BUFFER_BYTES: usize = 8 * 1024;
const SLOW_CLIENT: Duration = Duration::from_secs(30);
const MAX_SUBSCRIPTIONS: usize = 256;
/// Events read from the journal per page when replaying.
const REPLAY_PAGE: usize = 1000;
/// Requests per second per connection (token bucket), and the burst allowed.
const RATE_PER_SECOND: f64 = 200.0;
const RATE_BURST: f64 = 400.0;

struct RateLimiter {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    fn allow(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * RATE_PER_SECOND).min(RATE_BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The connection is over (closed by the client, or the client is too slow).
struct Disconnect;

struct Connection {
    gateway: Arc<Gateway>,
    out: mpsc::Sender<WsMessage>,
    /// session id → sequence number of the last event sent.
    subscriptions: HashMap<String, u64>,
    limiter: RateLimiter,
}

/// Runs the WebSocket handshake on `stream` (an HTTP upgrade request, see `http::route`), then
/// the connection.
pub async fn handle<S>(gateway: Arc<Gateway>, stream: S, peer: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_FRAME_BYTES);
    config.max_frame_size = Some(MAX_FRAME_BYTES);
    // The connection polls its socket each time it sends a notification, and every read zeroes
    // the free part of the read buffer first: a small buffer keeps that cheap (requests are
    // small; a large one is read in several pieces). Nagle is off (`http::route`).
    config.read_buffer_size = READ_BUFFER_BYTES;
    let callback = gateway.security.callback();
    let ws = match tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config)).await {
        Ok(ws) => ws,
        Err(e) => {
            tracing::info!(%peer, "handshake refused: {e}");
            return;
        }
    };
    tracing::debug!(%peer, "client connected");
    // Subscribe before anything else: nothing committed from now on can be missed.
    let mut hub = gateway.hub.subscribe();
    let (mut sink, mut stream) = ws.split();
    let (out, mut out_rx) = mpsc::channel::<WsMessage>(OUTBOX_FRAMES);
    let writer = tokio::spawn(async move {
        // Frames already queued go out together: one flush (one write to the socket) per
        // burst instead of one per frame.
        'frames: while let Some(message) = out_rx.recv().await {
            if sink.feed(message).await.is_err() {
                break;
            }
            while let Ok(message) = out_rx.try_recv() {
                if sink.feed(message).await.is_err() {
                    break 'frames;
                }
            }
            if sink.flush().await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut connection = Connection {
        gateway,
        out,
        subscriptions: HashMap::new(),
        limiter: RateLimiter { tokens: RATE_BURST, last: Instant::now() },
    };
    let hello = Hello {
        protocol_version: PROTOCOL_VERSION,
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        capabilities: vec!["resume".into(), "since_seq".into(), "permissions".into(), "worktrees".into()],
    };
    let mut alive = connection.send_text(Utf8Bytes::from(Notification::Hello(hello).to_json())).await.is_ok();
    while alive {
        alive = tokio::select! {
            frame = stream.next() => match frame {
                Some(Ok(WsMessage::Text(text))) => connection.on_text(text.as_str()).await.is_ok(),
                Some(Ok(WsMessage::Binary(_))) => connection
                    .send(Envelope::error(None, "", &ErrorPayload::bad_request("binary frames are not accepted; send JSON text")))
                    .await
                    .is_ok(),
                Some(Ok(WsMessage::Close(_))) | None => false,
                Some(Ok(_)) => true,
                Some(Err(e)) => {
                    tracing::info!(%peer, "connection error: {e}");
                    if let Some(close) = close_frame_for(&e) {
                        let _ = connection.out.try_send(WsMessage::Close(Some(close)));
                    }
                    false
                }
            },
            notification = hub.recv() => match notification {
                Ok(notification) => connection.forward(&notification).await.is_ok(),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::info!(%peer, missed, "connection lagged; catching up from the journal");
                    connection.catch_up_all().await.is_ok() && connection.resync_states().await.is_ok()
                }
                Err(broadcast::error::RecvError::Closed) => false,
            },
        };
    }
    drop(connection);
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    tracing::debug!(%peer, "client disconnected");
}

/// The close frame that tells a client why its connection ends: 1009 for a frame over
/// `MAX_FRAME_BYTES`, 1007 for a text frame that is not UTF-8, 1002 for other protocol errors.
fn close_frame_for(error: &tokio_tungstenite::tungstenite::Error) -> Option<CloseFrame> {
    use tokio_tungstenite::tungstenite::Error;
    let (code, reason) = match error {
        Error::Capacity(_) => (CloseCode::Size, format!("frame larger than {MAX_FRAME_BYTES} bytes")),
        Error::Utf8(_) => (CloseCode::Invalid, "text frame is not valid UTF-8".to_string()),
        Error::Protocol(e) => (CloseCode::Protocol, format!("protocol error: {e}")),
        _ => return None,
    };
    Some(CloseFrame { code, reason: reason.into() })
}

/// The shared JSON text of a published notification as a WebSocket text frame, without a copy.
/// The check that it is UTF-8 cannot fail (it was serialised from a `String`); were it to, the
/// notification is serialised again.
fn text_frame(published: &Published) -> Utf8Bytes {
    Utf8Bytes::try_from(published.json()).unwrap_or_else(|_| Utf8Bytes::from(published.notification.to_json()))
}

impl Connection {
    /// Queues a frame. A full queue makes this connection wait (only this one: agents and
    /// other clients go on, and what it misses meanwhile is re-read from the journal); a client
    /// that takes no frame for SLOW_CLIENT is disconnected and can resubscribe with since_seq.
    async fn send(&self, envelope: Envelope) -> Result<(), Disconnect> {
        self.send_text(Utf8Bytes::from(envelope.to_json())).await
    }

    async fn send_text(&self, text: Utf8Bytes) -> Result<(), Disconnect> {
        match tokio::time::timeout(SLOW_CLIENT, self.out.send(WsMessage::Text(text))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Disconnect),
            Err(_) => {
                tracing::warn!("client took no frame for {SLOW_CLIENT:?}; disconnecting it");
                Err(Disconnect)
            }
        }
    }

    async fn reply(
        &self,
        id: Option<String>,
        action: &str,
        result: Result<Value, ErrorPayload>,
    ) -> Result<(), Disconnect> {
        match result {
            Ok(payload) => self.send(Envelope::response(id, action, payload)).await,
            Err(error) => self.send(Envelope::error(id, action, &error)).await,
        }
    }

    async fn on_text(&mut self, text: &str) -> Result<(), Disconnect> {
        let RequestFrame { id, action, payload } = match Envelope::decode_request(text) {
            Ok(frame) => frame,
            Err(FrameError { id, action, error }) => return self.reply(id, &action, Err(error)).await,
        };
        if !self.limiter.allow() {
            return self.reply(Some(id), &action, Err(ErrorPayload::unavailable("too many requests; slow down"))).await;
        }
        let request = match ClientRequest::parse(&action, payload) {
            Ok(request) => request,
            Err(RequestParseError::UnknownAction(name)) => {
                let error = ErrorPayload::new(ErrorCode::UnknownAction, format!("unknown action {name:?}"))
                    .with_details(serde_json::json!({"actions": ClientRequest::ACTIONS}));
                return self.reply(Some(id), &action, Err(error)).await;
            }
            Err(e @ RequestParseError::InvalidPayload { .. }) => {
                return self.reply(Some(id), &action, Err(ErrorPayload::bad_request(e.to_string()))).await;
            }
        };
        if let Err(error) = request.validate() {
            return self.reply(Some(id), &action, Err(error)).await;
        }
        match request {
            ClientRequest::Subscribe(p) => self.subscribe(id, &action, p.session_id, p.since_seq).await,
            ClientRequest::Unsubscribe(p) => {
                self.subscriptions.remove(&p.session_id);
                let result = serde_json::to_value(UnsubscribeResult { session_id: p.session_id })
                    .map_err(|e| ErrorPayload::internal(e.to_string()));
                self.reply(Some(id), &action, result).await
            }
            request => {
                let orchestrator = self.gateway.orchestrator.clone();
                let out = self.out.clone();
                tokio::spawn(async move {
                    let frame = match dispatch(orchestrator, request).await {
                        Ok(payload) => Envelope::frame_json(MessageType::Response, Some(&id), &action, &payload),
                        Err(error) => Envelope::error(Some(id), action, &error).to_json(),
                    };
                    let _ = tokio::time::timeout(SLOW_CLIENT, out.send(WsMessage::text(frame))).await;
                });
                Ok(())
            }
        }
    }

    async fn subscribe(
        &mut self,
        id: String,
        action: &str,
        session_id: String,
        since_seq: Option<u64>,
    ) -> Result<(), Disconnect> {
        if !self.subscriptions.contains_key(&session_id) && self.subscriptions.len() >= MAX_SUBSCRIPTIONS {
            let error = ErrorPayload::unavailable(format!("at most {MAX_SUBSCRIPTIONS} subscriptions per connection"));
            return self.reply(Some(id), action, Err(error)).await;
        }
        let store = self.gateway.orchestrator.store().clone();
        let current_seq = match store.current_seq(&session_id).await {
            Ok(seq) => seq,
            Err(e) => return self.reply(Some(id), action, Err(crate::orchestrator::store_error(e))).await,
        };
        if since_seq.is_some_and(|since| since > current_seq) {
            let error = ErrorPayload::validation(format!(
                "since_seq {} is ahead of the session's journal (last seq {current_seq})",
                since_seq.unwrap_or_default()
            ));
            return self.reply(Some(id), action, Err(error)).await;
        }
        let result = serde_json::to_value(SubscribeResult { session_id: session_id.clone(), current_seq })
            .map_err(|e| ErrorPayload::internal(e.to_string()));
        self.reply(Some(id), action, result).await?;
        // Without since_seq the client starts from now; with it, from right after since_seq.
        self.subscriptions.insert(session_id.clone(), since_seq.unwrap_or(current_seq));
        self.catch_up(&session_id).await
    }

    /// Sends every journaled event after the last one sent for `session_id`.
    async fn catch_up(&mut self, session_id: &str) -> Result<(), Disconnect> {
        let store = self.gateway.orchestrator.store().clone();
        loop {
            let Some(&last) = self.subscriptions.get(session_id) else {
                return Ok(());
            };
            let page = match store.events_after(session_id, last, REPLAY_PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(session_id, "cannot replay events: {e}");
                    return Ok(());
                }
            };
            let Some(newest) = page.events.last().map(|e| e.seq) else {
                return Ok(());
            };
            for record in page.events {
                self.send_text(Utf8Bytes::from(Notification::Event(record).to_json())).await?;
            }
            self.subscriptions.insert(session_id.to_string(), newest);
        }
    }

    /// After falling behind, state changes may have been missed: send every session's
    /// current state (as `session.state_changed` without a previous state).
    async fn resync_states(&mut self) -> Result<(), Disconnect> {
        let Ok(list) =
            self.gateway.orchestrator.list_sessions(None, Some(baton_protocol::ArchivedFilter::Include)).await
        else {
            return Ok(());
        };
        for row in list.sessions {
            let status = row.status;
            let changed = StateChanged {
                session_id: status.session_id,
                task_id: status.task_id,
                state: status.state,
                previous_state: None,
                task_state: status.task_state,
                needs_resume: status.needs_resume,
            };
            self.send_text(Utf8Bytes::from(Notification::StateChanged(changed).to_json())).await?;
        }
        Ok(())
    }

    async fn catch_up_all(&mut self) -> Result<(), Disconnect> {
        let sessions: Vec<String> = self.subscriptions.keys().cloned().collect();
        for session_id in sessions {
            self.catch_up(&session_id).await?;
        }
        Ok(())
    }

    async fn forward(&mut self, published: &Published) -> Result<(), Disconnect> {
        match &published.notification {
            Notification::Event(record) => {
                let Some(&last) = self.subscriptions.get(&record.session_id) else {
                    return Ok(());
                };
                if record.seq <= last {
                    Ok(()) // already sent from the journal
                } else if record.seq == last + 1 {
                    self.send_text(text_frame(published)).await?;
                    self.subscriptions.insert(record.session_id.clone(), record.seq);
                    Ok(())
                } else {
                    self.catch_up(&record.session_id.clone()).await
                }
            }
            Notification::StateChanged(_) | Notification::TaskUpdated(_) => self.send_text(text_frame(published)).await,
            Notification::TaskDeleted(deleted) => {
                for session_id in &deleted.session_ids {
                    self.subscriptions.remove(session_id);
                }
                self.send_text(text_frame(published)).await
            }
            Notification::Hello(_) => Ok(()),
        }
    }
}
