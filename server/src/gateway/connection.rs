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
    ClientRequest, DeviceListResult, DeviceRevokeResult, Envelope, ErrorPayload, FrameError, Hello, MessageType,
    Notification, RequestFrame, Shutdown, StateChanged, SubscribeResult, UnsubscribeResult, MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{broadcast, mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message as WsMessage, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::devices::{Principal, Revocation};
use super::dispatch::dispatch;
use super::Gateway;
use crate::hub::Published;

/// Bursts of frames queued for a client before the connection waits for it: at most
/// `OUTBOX_BURSTS * BURST_FRAMES` frames.
const OUTBOX_BURSTS: usize = 64;
/// Most frames in one burst. The notifications of a commit, or a page of replayed events, go
/// to the socket's writer as bursts: one hand-off (and, when the writer is idle, one wake and
/// one write to the socket) per burst instead of per frame.
const BURST_FRAMES: usize = 32;
const READ_BUFFER_BYTES: usize = 8 * 1024;
const MAX_SUBSCRIPTIONS: usize = 256;
/// Events read from the journal per page when replaying.
const REPLAY_PAGE: usize = 1000;
/// Notifications forwarded one after the other before the connection looks at its socket again.
const FORWARD_BURST: usize = 256;

/// What a connection may ask of the server: requests in flight, and, for connections from
/// another machine, a rate. Neither is ever answered with an error: over either, the connection
/// stops reading its socket until it is back under, and TCP slows the client down.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Requests read but not yet answered, per connection.
    pub max_in_flight: usize,
    /// Requests per second per connection from a non-loopback peer (`None`: no limit). A
    /// client on the same machine is not paced: it can already use the machine directly.
    pub remote_rate: Option<f64>,
    /// Connections accepted whose request head is not read and checked yet (no token shown);
    /// beyond it the oldest is closed (see `gateway/admission.rs`).
    pub max_unauthenticated: usize,
    /// How long a client may take no frame while frames wait for it; past it the connection is
    /// closed with 1008 (see [`slow_client_close`]), never left open with frames dropped.
    pub slow_client: Duration,
}

impl ConnectionLimits {
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
    pub const DEFAULT_REMOTE_RATE: f64 = 200.0;
    pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 128;
    pub const DEFAULT_SLOW_CLIENT: Duration = Duration::from_secs(30);
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            remote_rate: Some(Self::DEFAULT_REMOTE_RATE),
            max_unauthenticated: Self::DEFAULT_MAX_UNAUTHENTICATED,
            slow_client: Self::DEFAULT_SLOW_CLIENT,
        }
    }
}

/// Paces requests to `rate` per second with a burst of two seconds' worth (the generic cell
/// rate algorithm: one instant to keep, instead of a token count and a clock). Written here
/// because it is a few lines, and what it returns is when to read again, not a refusal.
struct Pacer {
    interval: Duration,
    burst: Duration,
    /// When the request after the last one would be on schedule.
    next: Instant,
}

impl Pacer {
    fn new(rate: f64, now: Instant) -> Option<Pacer> {
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        Some(Pacer { interval, burst: interval.mul_f64((2.0 * rate).max(1.0)), next: now })
    }

    /// Counts a request read at `now`; `Some(when)` if the next one must wait until `when`.
    fn take(&mut self, now: Instant) -> Option<Instant> {
        self.next = self.next.max(now) + self.interval;
        let earliest = self.next.checked_sub(self.burst)?;
        (earliest > now).then_some(earliest)
    }
}

/// The connection is over (closed by the client, or the client is too slow).
struct Disconnect;

/// The close frame of a client that took no frame for `bound` while frames waited for it.
/// Whatever was not handed to it by then (answers included) is dropped: the close tells the
/// client so, and it reconnects and asks again (PROTOCOL.md, 'Slow clients').
fn slow_client_close(bound: Duration) -> CloseFrame {
    let reason = format!("client took no frame for {bound:?}; frames not sent were dropped");
    CloseFrame { code: CloseCode::Policy, reason: reason.into() }
}

/// Ends a connection whose client stopped reading: the socket's writer stops taking frames
/// from the outbox and sends this close frame instead, and the connection stops.
#[derive(Clone)]
struct Closer(watch::Sender<Option<CloseFrame>>);

impl Closer {
    /// Closes as too slow (the first reason given wins).
    fn too_slow(&self, bound: Duration) {
        tracing::warn!("client took no frame for {bound:?}; closing its connection");
        self.0.send_if_modified(|close| {
            let first = close.is_none();
            if first {
                *close = Some(slow_client_close(bound));
            }
            first
        });
    }
}

/// Resolves with the close frame once the connection is closed by a [`Closer`].
async fn closed(closing: &mut watch::Receiver<Option<CloseFrame>>) -> Option<CloseFrame> {
    let close = closing.wait_for(Option::is_some).await.ok().and_then(|close| close.clone());
    if close.is_none() {
        std::future::pending::<()>().await; // no closer left: nothing will close it
    }
    close
}

/// Writes the outbox to the socket until the outbox or the socket closes. Frames already
/// queued go out together: one flush (one write to the socket) for all the bursts waiting,
/// not one per frame.
async fn write_outbox<S>(sink: &mut S, out_rx: &mut mpsc::Receiver<Vec<WsMessage>>)
where
    S: futures_util::Sink<WsMessage> + Unpin,
{
    while let Some(burst) = out_rx.recv().await {
        let mut bytes = 0;
        for message in burst {
            bytes += message.len();
            if sink.feed(message).await.is_err() {
                return;
            }
        }
        while let Ok(burst) = out_rx.try_recv() {
            for message in burst {
                bytes += message.len();
                if sink.feed(message).await.is_err() {
                    return;
                }
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
        // A frame of megabytes (a long message listed) was built, copied and sent: freed now.
        crate::memory::give_back_after(bytes, "sending large frames");
    }
}

struct Connection {
    gateway: Arc<Gateway>,
    out: mpsc::Sender<Vec<WsMessage>>,
    closer: Closer,
    /// Frames held for the next burst (see [`Connection::hold`]); always queued before any other
    /// frame and before the connection waits for anything but its outbox.
    burst: Vec<WsMessage>,
    /// session id → sequence number of the last event sent.
    /// Looked up for every frame sent: hashed with foldhash, not SipHash (a client subscribes
    /// to at most MAX_SUBSCRIPTIONS existing sessions, so there is no flooding to resist).
    subscriptions: HashMap<String, u64, foldhash::fast::RandomState>,
    /// Who the connection acts for: a limited device may only watch and answer.
    principal: Principal,
}

/// The WebSocket limits of every connection: frames up to `MAX_FRAME_BYTES`.
pub(super) fn websocket_config() -> WebSocketConfig {
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_FRAME_BYTES);
    config.max_frame_size = Some(MAX_FRAME_BYTES);
    // The connection polls its socket each time it sends a notification, and every read zeroes
    // the free part of the read buffer first: a small buffer keeps that cheap (requests are
    // small; a large one is read in several pieces). Nagle is off (`http::route`).
    config.read_buffer_size = READ_BUFFER_BYTES;
    config
}

/// Runs a connection whose WebSocket handshake is done (see `http::route`).
/// A device's connection (`revoked` set) ends when the device is revoked.
pub async fn handle<S>(
    gateway: Arc<Gateway>,
    ws: WebSocketStream<S>,
    peer: SocketAddr,
    principal: Principal,
    mut revoked: Option<Revocation>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tracing::debug!(%peer, "client connected");
    if let Principal::Device { id, .. } = &principal {
        tracing::info!(%peer, device_id = %id, "a paired device connected");
        let devices = gateway.devices.clone();
        let (id, address) = (id.clone(), peer.ip().to_string());
        tokio::spawn(async move { devices.seen(&id, &address).await });
    }
    // Subscribe before anything else: nothing committed from now on can be missed.
    let mut hub = gateway.hub.subscribe();
    let (mut sink, mut stream) = ws.split();
    let (out, mut out_rx) = mpsc::channel::<Vec<WsMessage>>(OUTBOX_BURSTS);
    let limits = gateway.limits;
    let (closing_tx, mut closing) = watch::channel(None);
    let mut writer_closing = closing_tx.subscribe();
    let writer = tokio::spawn(async move {
        let close = tokio::select! {
            biased;
            close = closed(&mut writer_closing) => close,
            () = write_outbox(&mut sink, &mut out_rx) => None,
        };
        match close {
            // The frames not written yet are dropped; the close frame goes after the bytes
            // already in the socket, if the client reads them within the bound.
            Some(close) => {
                let _ = tokio::time::timeout(limits.slow_client, sink.send(WsMessage::Close(Some(close)))).await;
            }
            None => {
                let _ = sink.close().await;
            }
        }
    });
    let closer = Closer(closing_tx);
    let mut connection =
        Connection { gateway, out, closer, burst: Vec::new(), subscriptions: HashMap::default(), principal };
    // A request is read only with a place in flight (held until its answer is queued) and, for a
    // paced connection, once its time has come: otherwise the socket is left unread.
    let in_flight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let mut place: Option<OwnedSemaphorePermit> = None;
    let mut pacer =
        if peer.ip().is_loopback() { None } else { limits.remote_rate.and_then(|r| Pacer::new(r, Instant::now())) };
    let mut paused_until: Option<Instant> = None;
    let hello = Hello {
        protocol_version: PROTOCOL_VERSION,
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        capabilities: vec!["resume".into(), "since_seq".into(), "permissions".into(), "worktrees".into()],
    };
    let mut alive = connection.send_text(Utf8Bytes::from(Notification::Hello(hello).to_json())).await.is_ok();
    // Joining while the disk is full: told now (a change from here on comes from the hub).
    if let Some(reason) = connection.gateway.orchestrator.store().storage_full() {
        let full = Notification::StorageChanged(baton_protocol::StorageChanged { writable: false, reason });
        alive = alive && connection.send_text(Utf8Bytes::from(full.to_json())).await.is_ok();
    }
    // Held until the last frame is flushed: shutdown waits for every connection to let go.
    let mut shutting_down = connection.gateway.shutting_down.subscribe();
    let ping_interval = connection.gateway.ping_interval;
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_interval, ping_interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whether anything came from the client since the last ping (a pong at least).
    let mut heard = true;
    // Whether the socket went unread (backpressure) at some point since the last ping.
    let mut reading_held = false;
    while alive {
        reading_held |= place.is_none() || paused_until.is_some();
        alive = tokio::select! {
            _ = closed(&mut closing) => false,
            _ = async {
                let gone = match revoked.as_mut() {
                    Some(revoked) => revoked.wait_for(|r| *r).await.is_ok(),
                    None => false,
                };
                if !gone {
                    std::future::pending::<()>().await;
                }
            } => {
                tracing::info!(%peer, "closing the connection of a revoked device");
                let close = CloseFrame { code: CloseCode::Policy, reason: "this device was revoked".into() };
                let _ = connection.out.try_send(vec![WsMessage::Close(Some(close))]);
                false
            }
            _ = async {
                if shutting_down.wait_for(|down| *down).await.is_err() {
                    std::future::pending::<()>().await; // no gateway, no shutdown to wait for
                }
            } => {
                connection.goodbye().await;
                false
            }
            _ = ping.tick() => {
                // Silence counts only while the socket was being read: a connection this
                // server holds back (requests in flight, pacing) may have a pong waiting.
                if heard || reading_held {
                    reading_held = false;
                    // A full outbox (a client busy reading a backlog) skips this ping: the
                    // slow-client bound covers a client that reads nothing.
                    match connection.out.try_send(vec![WsMessage::Ping(Default::default())]) {
                        Ok(()) => {
                            heard = false;
                            true
                        }
                        Err(mpsc::error::TrySendError::Full(_)) => true,
                        Err(mpsc::error::TrySendError::Closed(_)) => false,
                    }
                } else {
                    tracing::info!(%peer, "no answer to two pings; closing the connection as dead");
                    let reason = format!("no answer to ping within {:?}", ping_interval * 2);
                    let _ = connection.out.try_send(vec![WsMessage::Close(Some(CloseFrame { code: CloseCode::Policy, reason: reason.into() }))]);
                    false
                }
            }
            acquired = in_flight.clone().acquire_owned(), if place.is_none() => {
                place = acquired.ok();
                place.is_some()
            }
            _ = sleep_until(paused_until), if place.is_some() && paused_until.is_some() => {
                paused_until = None;
                true
            }
            frame = stream.next(), if place.is_some() && paused_until.is_none() => {
                heard = true;
                match frame {
                    Some(Ok(WsMessage::Text(text))) => {
                        if let Some(pacer) = &mut pacer {
                            paused_until = pacer.take(Instant::now());
                        }
                        let place = place.take();
                        connection.on_text(text.as_str(), place).await.is_ok()
                    }
                    Some(Ok(WsMessage::Binary(_))) => connection
                        .send(Envelope::error(None, "", &ErrorPayload::bad_request("binary frames are not accepted; send JSON text")))
                        .await
                        .is_ok(),
                    Some(Ok(WsMessage::Close(_))) | None => false,
                    Some(Ok(_)) => true,
                    Some(Err(e)) => {
                        tracing::info!(%peer, "connection error: {e}");
                        if let Some(close) = close_frame_for(&e) {
                            let _ = connection.out.try_send(vec![WsMessage::Close(Some(close))]);
                        }
                        false
                    }
                }
            },
            notification = hub.recv() => match notification {
                // What else is published already goes out before the next `select!`: one
                // round of polling the socket, the ping and the shutdown per burst, not per frame.
                Ok(notification) => {
                    connection.forward(&notification).await.is_ok() && connection.forward_queued(&mut hub, peer).await.is_ok()
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => connection.lagged(peer, missed).await.is_ok(),
                Err(broadcast::error::RecvError::Closed) => false,
            },
        };
    }
    drop(connection);
    if closing.borrow().is_some() {
        // Closed as too slow: the client's requests still coming are read and dropped until
        // it answers the close frame, so that the socket is not reset (which would discard
        // the frames it has not read yet, the close frame among them).
        let drained = async { while let Some(Ok(_)) = stream.next().await {} };
        let _ = tokio::time::timeout(limits.slow_client, drained).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    drop(shutting_down);
    tracing::debug!(%peer, "client disconnected");
}

/// Resolves at `when` (never without one).
async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when.into()).await,
        None => std::future::pending().await,
    }
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

impl Connection {
    /// At shutdown: `server.shutdown`, then the close frame 1001 "going away", so that a client
    /// can tell a restart from a network failure (which closes with 1006, without a frame).
    async fn goodbye(&mut self) {
        let shutdown = Shutdown { reason: "the server is shutting down".into() };
        let close = CloseFrame { code: CloseCode::Away, reason: "server shutting down".into() };
        let mut frames = std::mem::take(&mut self.burst);
        frames.push(WsMessage::Text(Utf8Bytes::from(Notification::Shutdown(shutdown).to_json())));
        frames.push(WsMessage::Close(Some(close)));
        let _ = self.out.try_send(frames);
    }

    /// Queues a frame. A full queue makes this connection wait (only this one: agents and
    /// other clients go on, and what it misses meanwhile is re-read from the journal); a client
    /// that takes no frame for the slow-client bound is closed with 1008 and can resubscribe
    /// with since_seq.
    async fn send(&mut self, envelope: Envelope) -> Result<(), Disconnect> {
        self.send_text(Utf8Bytes::from(envelope.to_json())).await
    }

    /// Queues a frame now (after the frames held for the burst).
    async fn send_text(&mut self, text: Utf8Bytes) -> Result<(), Disconnect> {
        self.hold(text).await?;
        self.send_burst().await
    }

    /// Holds a frame for the burst being gathered; a full burst is queued.
    async fn hold(&mut self, text: Utf8Bytes) -> Result<(), Disconnect> {
        self.burst.push(WsMessage::Text(text));
        if self.burst.len() >= BURST_FRAMES {
            self.send_burst().await?;
        }
        Ok(())
    }

    /// Queues the frames held, if any.
    async fn send_burst(&mut self) -> Result<(), Disconnect> {
        if self.burst.is_empty() {
            return Ok(());
        }
        let burst = std::mem::replace(&mut self.burst, Vec::with_capacity(BURST_FRAMES));
        // With room in the queue (the usual case) no timer is armed.
        let burst = match self.out.try_send(burst) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(Disconnect),
            Err(mpsc::error::TrySendError::Full(burst)) => burst,
        };
        let bound = self.gateway.limits.slow_client;
        match tokio::time::timeout(bound, self.out.send(burst)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Disconnect),
            Err(_) => {
                self.closer.too_slow(bound);
                Err(Disconnect)
            }
        }
    }

    async fn reply(
        &mut self,
        id: Option<String>,
        action: &str,
        result: Result<Value, ErrorPayload>,
    ) -> Result<(), Disconnect> {
        match result {
            Ok(payload) => self.send(Envelope::response(id, action, payload)).await,
            Err(error) => self.send(Envelope::error(id, action, &error)).await,
        }
    }

    /// Answers one request. `place` is its place in flight: released once the answer is queued.
    /// `push.key`, `push.subscribe` (for this connection's device) and `push.unsubscribe`.
    async fn push_request(&self, request: ClientRequest) -> Result<serde_json::Value, ErrorPayload> {
        let Some(push) = &self.gateway.push else {
            return Err(ErrorPayload::new(
                baton_protocol::ErrorCode::Unavailable,
                "Web Push is not set up on this server (see its log)",
            ));
        };
        let store = self.gateway.orchestrator.store();
        let internal = |e: serde_json::Error| ErrorPayload::internal(e.to_string());
        match request {
            ClientRequest::PushKey(_) => {
                serde_json::to_value(baton_protocol::PushKeyResult { public_key: push.public_key() }).map_err(internal)
            }
            ClientRequest::PushSubscribe(p) => {
                let device_id = match &self.principal {
                    Principal::Device { id, .. } => Some(id.clone()),
                    Principal::Owner => None,
                };
                let subscription = crate::store::PushSubscription {
                    id: format!("push-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
                    device_id,
                    endpoint: p.endpoint,
                    p256dh: p.p256dh,
                    auth: p.auth,
                };
                let subscription_id =
                    store.add_push_subscription(subscription, &baton_protocol::now_timestamp()).await?;
                serde_json::to_value(baton_protocol::PushSubscribeResult { subscription_id }).map_err(internal)
            }
            ClientRequest::PushUnsubscribe(p) => {
                let removed = store.remove_push_subscription(&p.endpoint).await?;
                serde_json::to_value(baton_protocol::PushUnsubscribeResult { removed }).map_err(internal)
            }
            _ => Err(ErrorPayload::internal("not a push action")),
        }
    }

    async fn on_text(&mut self, text: &str, place: Option<OwnedSemaphorePermit>) -> Result<(), Disconnect> {
        let RequestFrame { id, action, payload } = match Envelope::decode_request(text) {
            Ok(frame) => frame,
            Err(FrameError { id, action, error }) => return self.reply(id, &action, Err(error)).await,
        };
        let request = match ClientRequest::parse(&action, payload) {
            Ok(request) => request,
            Err(e) => return self.reply(Some(id), &action, Err(e.to_error())).await,
        };
        if let Err(error) = request.validate().and_then(|()| self.principal.may(request.action())) {
            return self.reply(Some(id), &action, Err(error)).await;
        }
        match request {
            ClientRequest::DevicePair(p) => {
                let result = serde_json::to_value(self.gateway.devices.pair(&p));
                self.reply(Some(id), &action, result.map_err(|e| ErrorPayload::internal(e.to_string()))).await
            }
            ClientRequest::DeviceList(_) => {
                let result = serde_json::to_value(DeviceListResult { devices: self.gateway.devices.list() });
                self.reply(Some(id), &action, result.map_err(|e| ErrorPayload::internal(e.to_string()))).await
            }
            ClientRequest::DeviceRevoke(p) => {
                let result = self.gateway.devices.revoke(&p.device_id).await.and_then(|closed_connections| {
                    serde_json::to_value(DeviceRevokeResult { device_id: p.device_id, closed_connections })
                        .map_err(|e| ErrorPayload::internal(e.to_string()))
                });
                self.reply(Some(id), &action, result).await
            }
            ClientRequest::PushKey(_) | ClientRequest::PushSubscribe(_) | ClientRequest::PushUnsubscribe(_) => {
                let result = self.push_request(request).await;
                self.reply(Some(id), &action, result).await
            }
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
                let closer = self.closer.clone();
                let bound = self.gateway.limits.slow_client;
                tokio::spawn(async move {
                    let frame = match dispatch(orchestrator, request).await {
                        Ok(payload) => Envelope::frame_json(MessageType::Response, Some(&id), &action, &payload),
                        Err(error) => Envelope::error(Some(id), action, &error).to_json(),
                    };
                    // An answer that cannot be queued is never dropped with the connection left
                    // open: the connection closes (1008) and the client knows to ask again.
                    if tokio::time::timeout(bound, out.send(vec![WsMessage::text(frame)])).await.is_err() {
                        closer.too_slow(bound);
                    }
                    drop(place);
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
            let error = ErrorPayload::unavailable_until_changed(format!(
                "at most {MAX_SUBSCRIPTIONS} subscriptions per connection; unsubscribe from one first"
            ));
            return self.reply(Some(id), action, Err(error)).await;
        }
        let store = self.gateway.orchestrator.store().clone();
        let current_seq = match store.current_seq(&session_id).await {
            Ok(seq) => seq,
            Err(e) => return self.reply(Some(id), action, Err(e.into())).await,
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
                    // Never silence: the client learns that its event stream has a hole.
                    tracing::error!(session_id, after_seq = last, "cannot replay events: {e}");
                    let error = ErrorPayload::internal(format!(
                        "cannot read the events of session {session_id} after seq {last}: {e}"
                    ));
                    let frame = Envelope::error(None, Notification::EVENT, &error).to_json();
                    return self.send_text(Utf8Bytes::from(frame)).await;
                }
            };
            let Some(newest) = page.events.last().map(|e| e.seq) else {
                return Ok(());
            };
            for record in page.events {
                self.hold(Utf8Bytes::from(Notification::Event(record).to_json())).await?;
            }
            self.send_burst().await?;
            self.subscriptions.insert(session_id.to_string(), newest);
        }
    }

    /// After falling behind, state changes may have been missed: send every session's
    /// current state (as `session.state_changed` without a previous state).
    async fn resync_states(&mut self) -> Result<(), Disconnect> {
        let mut params = baton_protocol::SessionListParams {
            archived: Some(baton_protocol::ArchivedFilter::Include),
            limit: Some(baton_protocol::MAX_SESSION_PAGE),
            ..Default::default()
        };
        loop {
            let Ok(page) = self.gateway.orchestrator.list_sessions(params.clone()).await else { return Ok(()) };
            self.send_states(page.sessions).await?;
            match page.next_cursor {
                Some(cursor) => params.cursor = Some(cursor),
                None => return Ok(()),
            }
        }
    }

    async fn send_states(&mut self, rows: Vec<baton_protocol::SessionInfo>) -> Result<(), Disconnect> {
        for row in rows {
            let status = row.status;
            let changed = StateChanged {
                session_id: status.session_id,
                task_id: status.task_id,
                task_title: row.task_title,
                state: status.state,
                previous_state: None,
                task_state: status.task_state,
                needs_resume: status.needs_resume,
                last_seq: row.last_seq,
                updated_at: row.updated_at,
                attention: status.attention,
                attention_since: status.attention_since,
                change_seq: status.change_seq,
            };
            self.hold(Utf8Bytes::from(Notification::StateChanged(changed).to_json())).await?;
        }
        self.send_burst().await
    }

    async fn catch_up_all(&mut self) -> Result<(), Disconnect> {
        let sessions: Vec<String> = self.subscriptions.keys().cloned().collect();
        for session_id in sessions {
            self.catch_up(&session_id).await?;
        }
        Ok(())
    }

    /// Sends the notifications the hub holds already (at most a burst of them), without
    /// waiting for more, and queues what is held for the burst.
    async fn forward_queued(&mut self, hub: &mut crate::hub::Receiver, peer: SocketAddr) -> Result<(), Disconnect> {
        for _ in 0..FORWARD_BURST {
            match hub.try_recv() {
                Ok(notification) => self.forward(&notification).await?,
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Lagged(missed)) => return self.lagged(peer, missed).await,
                Err(broadcast::error::TryRecvError::Closed) => return Err(Disconnect),
            }
        }
        self.send_burst().await
    }

    /// Fell behind the hub: re-reads the missed events from the journal and resends states.
    async fn lagged(&mut self, peer: SocketAddr, missed: u64) -> Result<(), Disconnect> {
        tracing::info!(%peer, missed, "connection lagged; catching up from the journal");
        self.catch_up_all().await?;
        self.resync_states().await?;
        self.send_burst().await
    }

    async fn forward(&mut self, published: &Published) -> Result<(), Disconnect> {
        match &published.notification {
            Notification::Event(record) => {
                let Some(last) = self.subscriptions.get_mut(&record.session_id) else {
                    return Ok(());
                };
                if record.seq <= *last {
                    Ok(()) // already sent from the journal
                } else if record.seq == *last + 1 {
                    // Counted as sent once queued: the queue only fails for a closed connection.
                    *last = record.seq;
                    self.hold(published.frame()).await
                } else {
                    self.catch_up(&record.session_id.clone()).await
                }
            }
            Notification::StateChanged(_)
            | Notification::TaskUpdated(_)
            | Notification::AttentionChanged(_)
            | Notification::PermissionQueueChanged(_)
            | Notification::StorageChanged(_) => self.hold(published.frame()).await,
            Notification::TaskDeleted(deleted) => {
                for session_id in &deleted.session_ids {
                    self.subscriptions.remove(session_id);
                }
                self.hold(published.frame()).await
            }
            Notification::Hello(_) | Notification::Shutdown(_) | Notification::Unknown { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds from `start` to `when`, rounded (the interval is a float conversion).
    fn ms(start: Instant, when: Instant) -> u128 {
        (when.duration_since(start).as_micros() + 500) / 1000
    }

    #[test]
    fn the_pacer_lets_a_burst_through_then_spaces_requests_out() {
        let start = Instant::now();
        let mut pacer = Pacer::new(100.0, start).expect("a pacer");
        // Two seconds' worth (200 requests) pass at once.
        for i in 0..200 {
            assert_eq!(pacer.take(start), None, "request {i} of the burst");
        }
        let wait = pacer.take(start).expect("the burst is used up");
        assert_eq!(ms(start, wait), 10);
        // Once waited for, the next request is read; the one after waits one interval more.
        let again = pacer.take(wait).expect("still over");
        assert_eq!(ms(wait, again), 10);
        // After a quiet second, about a hundred requests pass again.
        let later = wait + Duration::from_secs(1);
        let passed = (0..200).take_while(|_| pacer.take(later).is_none()).count();
        assert!((98..=100).contains(&passed), "{passed}");
    }

    #[test]
    fn no_rate_means_no_pacer() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Pacer::new(rate, Instant::now()).is_none(), "{rate}");
        }
    }
}
