//! The WebSocket gateway: `ws://HOST:PORT/ws`, one task per connection, and the reference web
//! page on the same port (`http://HOST:PORT/`).

mod admission;
mod connection;
pub mod devices;
mod dispatch;
mod http;
pub mod security;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::hub::Hub;
use crate::orchestrator::Orchestrator;
pub use connection::ConnectionLimits;
pub use security::SecurityPolicy;

/// How often the server pings a connection (a WebSocket ping frame); a connection that sends
/// nothing back (not even the pong every WebSocket client answers with) for two of these is
/// closed as dead.
pub const PING_INTERVAL: Duration = Duration::from_secs(20);

/// How long shutdown waits for connections to take their `server.shutdown` and close frame.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(3);

/// What every connection shares.
pub struct Gateway {
    pub orchestrator: Arc<Orchestrator>,
    pub hub: Hub,
    pub security: SecurityPolicy,
    pub limits: ConnectionLimits,
    /// Interval of the WebSocket pings ([`PING_INTERVAL`] unless configured).
    pub ping_interval: Duration,
    /// Set to true at shutdown: every connection says goodbye (1001 "going away").
    shutting_down: watch::Sender<bool>,
    /// Connections whose request head is not checked yet (bounded: [`admission`]).
    admission: Arc<admission::Admission>,
    /// One-time codes of the page's login links, not used yet (see [`Gateway::issue_login_code`]).
    login_codes: std::sync::Mutex<Vec<String>>,
    /// HTTPS and WSS instead of plain HTTP and WS, when set (`--tls`).
    tls: Option<crate::tls::ServerTls>,
    /// Paired devices and their pairing codes.
    pub devices: Arc<devices::Devices>,
    /// Web Push (`push.*`, `POST /push/answer`), when it could be set up.
    pub push: Option<Arc<crate::push::Push>>,
}

impl Gateway {
    pub fn new(
        orchestrator: Arc<Orchestrator>,
        hub: Hub,
        security: SecurityPolicy,
        limits: ConnectionLimits,
        ping_interval: Duration,
        devices: devices::Devices,
    ) -> Self {
        let admission = admission::Admission::new(limits.max_unauthenticated);
        Gateway {
            orchestrator,
            hub,
            security,
            limits,
            ping_interval,
            shutting_down: watch::Sender::new(false),
            admission,
            login_codes: std::sync::Mutex::new(Vec::new()),
            tls: None,
            devices: Arc::new(devices),
            push: None,
        }
    }

    /// Answers `push.*` and `POST /push/answer` with this.
    pub fn with_push(mut self, push: Option<Arc<crate::push::Push>>) -> Self {
        self.push = push;
        self
    }

    /// Serves HTTPS and WSS with this certificate.
    pub fn with_tls(mut self, tls: Option<crate::tls::ServerTls>) -> Self {
        self.tls = tls;
        self
    }

    /// A new one-time code for the web page's address (`/?login=CODE`), which the page
    /// exchanges for the token (`POST /login`) on its first load: the address a browser keeps in
    /// its history, cache and sessions then holds a code that no longer opens anything, never
    /// the token. None when the server needs no token.
    pub fn issue_login_code(&self) -> Option<String> {
        self.security.token.as_ref()?;
        let code = format!("login-{}", uuid::Uuid::new_v4().simple());
        self.login_codes.lock().ok()?.push(code.clone());
        Some(code)
    }

    /// The token, for a login code issued and not used yet; the code is used up.
    pub(super) fn redeem_login_code(&self, offered: &str) -> Option<String> {
        let mut codes = self.login_codes.lock().ok()?;
        let at = codes.iter().position(|code| crate::secret::constant_time_eq(code.as_bytes(), offered.as_bytes()))?;
        codes.swap_remove(at);
        self.security.token.clone()
    }

    /// Accepts connections until `shutdown` resolves, then closes every connection with 1001
    /// "going away" after a `server.shutdown` notification, waiting a little for them.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
        self.accept(listener, shutdown).await;
        self.shutting_down.send_replace(true);
        // Each connection holds a receiver until its last frame is flushed.
        if tokio::time::timeout(GOODBYE_TIMEOUT, self.shutting_down.closed()).await.is_err() {
            tracing::info!("some connections did not close in time");
        }
    }

    async fn accept(self: &Arc<Self>, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut backoff = crate::accept::AcceptBackoff::default();
        // After a failed accept, when to try again (shutdown is still heard meanwhile).
        let mut paused: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = async { tokio::time::sleep_until(paused.unwrap_or_else(tokio::time::Instant::now)).await }, if paused.is_some() => {
                    paused = None;
                }
                accepted = listener.accept(), if paused.is_none() => match accepted {
                    Ok((stream, peer)) => {
                        backoff.succeeded("gateway");
                        let gateway = self.clone();
                        let mut ticket = self.admission.admit();
                        // Small frames (events, responses) go out at once instead of waiting
                        // for Nagle's algorithm.
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(async move {
                            // Dropping the request's future closes the connection. The TLS
                            // handshake counts as part of the request: it is bounded by the
                            // same head timeout and the same admission ticket.
                            let serve = async {
                                match gateway.tls.clone() {
                                    None => http::route(gateway, stream, peer).await,
                                    Some(tls) => {
                                        let handshake = tls.acceptor.accept(stream);
                                        match tokio::time::timeout(http::HEAD_TIMEOUT, handshake).await {
                                            Ok(Ok(stream)) => http::route(gateway, stream, peer).await,
                                            Ok(Err(e)) => tracing::info!(%peer, "TLS handshake failed: {e}"),
                                            Err(_) => tracing::debug!(%peer, "closed: no TLS handshake in time"),
                                        }
                                    }
                                }
                            };
                            tokio::select! {
                                () = serve => {}
                                () = ticket.evicted() => tracing::debug!(%peer, "closed: no request in time for the room it took"),
                            }
                        });
                    }
                    Err(e) => paused = Some(tokio::time::Instant::now() + backoff.failed("gateway", &e)),
                },
            }
        }
    }
}
