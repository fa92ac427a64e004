//! Plain HTTP on the WebSocket's port: the reference web page (`/`, `/app.js`, `/style.css`),
//! its protocol client as an ES module (`/baton-client.js`, with `/baton-client.d.ts` and
//! `/protocol.d.ts`, and the JSON Schema at `/protocol.schema.json`), all embedded in the
//! binary; the exchange of the page's one-time login
//! code for the token (`POST /login`); the WebSocket upgrade at `/ws`; 404 for anything else.
//!
//! Requests are parsed by hyper (HTTP/1.1 only, one request per connection). An upgrade to
//! `/ws` is checked (tungstenite's handshake rules, then [`SecurityPolicy::check`]), answered
//! with 101, and the upgraded stream goes on as a WebSocket connection.
//!
//! [`SecurityPolicy::check`]: super::SecurityPolicy::check

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST, UPGRADE};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_tungstenite::tungstenite::handshake::server::create_response_with_body;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use super::devices::{Principal, Refused, Revocation};
use super::Gateway;

/// Largest request head accepted (request line and headers); a larger one is answered 431.
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A client must send its whole request head within this time, or the connection is closed.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

const INDEX_HTML: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const STYLE_CSS: &str = include_str!("../../web/style.css");
const CLIENT_JS: &str = include_str!("../../web/baton-client.js");
const SERVICE_WORKER_JS: &str = include_str!("../../web/sw.js");
const CLIENT_DTS: &str = include_str!("../../web/baton-client.d.ts");
const PROTOCOL_DTS: &str = include_str!("../../web/protocol.d.ts");
/// The protocol's JSON Schema (checked in, and checked against the crate's types by the suite).
const PROTOCOL_SCHEMA: &str = include_str!("../../../docs/protocol.schema.json");

const TEXT: &str = "text/plain; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

type Body = Full<Bytes>;

/// Serves one TCP connection: a page request is answered and the connection closed; an
/// upgrade goes on as a WebSocket connection.
pub async fn route<S>(gateway: Arc<Gateway>, stream: S, peer: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES)
        // A client that shuts down its sending side after its request still gets the answer.
        .half_close(true)
        .title_case_headers(true);
    let service = service_fn(move |request| {
        let gateway = gateway.clone();
        async move { Ok::<_, Infallible>(serve(&gateway, request, peer).await) }
    });
    if let Err(e) = http.serve_connection(TokioIo::new(stream), service).with_upgrades().await {
        tracing::debug!(%peer, "HTTP connection ended: {e}");
    }
}

/// The answer to one request; for an accepted upgrade, the WebSocket connection is started
/// once the 101 is out.
async fn serve(gateway: &Arc<Gateway>, mut request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    if !wants_websocket(&request) {
        tracing::debug!(%peer, method = %request.method(), path = %request.uri().path(), "http request");
        if request.uri().path() == "/login" {
            return login(gateway, &request, peer).await;
        }
        if request.uri().path() == "/push/answer" {
            return push_answer(gateway, &request, peer).await;
        }
        return answer(&request);
    }
    match accept_upgrade(gateway, &request) {
        Ok((response, principal, revoked)) => {
            let upgrade = hyper::upgrade::on(&mut request);
            let gateway = gateway.clone();
            tokio::spawn(async move {
                match upgrade.await {
                    Ok(upgraded) => {
                        let ws = WebSocketStream::from_raw_socket(
                            TokioIo::new(upgraded),
                            Role::Server,
                            Some(super::connection::websocket_config()),
                        )
                        .await;
                        super::connection::handle(gateway, ws, peer, principal, revoked).await;
                    }
                    Err(e) => tracing::info!(%peer, "upgrade failed after the handshake: {e}"),
                }
            });
            response
        }
        Err((status, reason)) => {
            tracing::info!(%peer, "refused a WebSocket handshake with {status}: {reason}");
            response(status, TEXT, Bytes::from(reason), host_of(&request))
        }
    }
}

/// A request that asks for a WebSocket (an `Upgrade` header naming it), valid or not.
fn wants_websocket<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get_all(UPGRADE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|p| p.trim().eq_ignore_ascii_case("websocket")))
}

/// The 101 answer to a WebSocket upgrade, or the status and reason it is refused with: 400 for
/// a handshake that breaks RFC 6455 (checked by tungstenite, which also derives
/// `Sec-WebSocket-Accept`), then the security policy's 404, 403 or 401, then 400 for a
/// malformed `protocol_version`.
/// An accepted upgrade: the 101 answer, who the connection acts for, and for a device what
/// tells it was revoked.
type Accepted = (Response<Body>, Principal, Option<Revocation>);

/// Besides the server's token, a paired device's token is accepted (the connection then acts
/// for that device, and ends when it is revoked).
fn accept_upgrade<B>(gateway: &Gateway, request: &Request<B>) -> Result<Accepted, (StatusCode, String)> {
    let response = create_response_with_body(request, Body::default)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("not a valid WebSocket upgrade: {e}")))?;
    let (principal, revoked) = match gateway.security.check(request) {
        Ok(()) => (Principal::Owner, None),
        Err((StatusCode::UNAUTHORIZED, reason)) => {
            let offered = super::security::offered_token(request);
            let (principal, revoked) =
                gateway.devices.authenticate(&offered).ok_or((StatusCode::UNAUTHORIZED, reason))?;
            (principal, Some(revoked))
        }
        Err(refused) => return Err(refused),
    };
    super::security::client_version(request)?;
    Ok((response, principal, revoked))
}

fn host_of<B>(request: &Request<B>) -> Option<&str> {
    request.headers().get(HOST).and_then(|h| h.to_str().ok())
}

/// The `connect-src` sources that let the page open its WebSocket: `'self'` and, for browsers
/// that do not count `ws:` as self, the exact host the page was loaded from.
fn connect_sources(host: Option<&str>) -> String {
    let valid = |h: &&str| {
        !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
    };
    match host.filter(valid) {
        Some(host) => format!("'self' ws://{host} wss://{host}"),
        None => "'self'".to_string(),
    }
}

/// A 429 whose `Retry-After` (whole seconds, rounded up) and text say when an exchange is
/// admitted again.
fn too_many(what: &str, wait: Duration, host: Option<&str>) -> Response<Body> {
    let secs = wait.as_millis().div_ceil(1000).max(1);
    let body = format!("{what}; try again in {secs} s\n");
    let mut answer = response(StatusCode::TOO_MANY_REQUESTS, TEXT, Bytes::from(body), host);
    answer.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from(secs as u64));
    answer
}

/// A response with the page's security headers (also on errors: a browser may render them).
/// It closes the connection: one request per connection, as a page load or a refused upgrade
/// needs (keep-alive is left on in hyper, where it would also mark a 101 as closing).
fn response(status: StatusCode, content_type: &'static str, body: Bytes, host: Option<&str>) -> Response<Body> {
    let csp = format!(
        "default-src 'self'; connect-src {}; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        connect_sources(host)
    );
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The host is restricted to header-safe characters by `connect_sources`.
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        headers.insert("content-security-policy", csp);
    }
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    // Nothing is kept by the browser: a page's address may hold a login code (or a token).
    headers.insert("cache-control", HeaderValue::from_static("no-store"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// `POST /login` with the header `Baton-Login: CODE`: a token, as JSON `{"token": …}`, for a
/// one-time code, which it uses up: the server's token for a login code of the page's address
/// ([`Gateway::issue_login_code`]), a new device's own token for a pairing code
/// (`device.pair`). From a page, only one of an allowed origin (the same rule as the
/// WebSocket's); the answer is never stored by the browser. Failed exchanges are rate limited
/// (429 beyond [`super::devices::MAX_FAILURES`] a minute).
async fn login<B>(gateway: &Gateway, request: &Request<B>, peer: SocketAddr) -> Response<Body> {
    let host = host_of(request);
    if request.method() != Method::POST {
        return response(StatusCode::METHOD_NOT_ALLOWED, TEXT, Bytes::from_static(b"/login takes POST\n"), host);
    }
    if let Err((status, reason)) = gateway.security.check_origin(request) {
        tracing::info!(%peer, "refused a login with {status}: {reason}");
        return response(status, TEXT, Bytes::from(reason), host);
    }
    let offered = request.headers().get("baton-login").and_then(|v| v.to_str().ok()).unwrap_or("");
    let now = std::time::Instant::now();
    let token = if offered.starts_with("pair-") {
        gateway.devices.redeem(offered).await
    } else {
        match gateway.devices.admit_exchange(now) {
            Err(refused) => Err(refused),
            Ok(()) => gateway.redeem_login_code(offered).ok_or_else(|| {
                gateway.devices.failed_exchange(now);
                Refused::Unknown
            }),
        }
    };
    match token {
        Ok(token) => {
            tracing::info!(%peer, "a one-time link was exchanged for a token");
            let body = serde_json::json!({ "token": token }).to_string();
            response(StatusCode::OK, "application/json", Bytes::from(body), host)
        }
        Err(Refused::TooMany(wait)) => {
            tracing::warn!(%peer, "refused a login: too many failed ones in the last minute");
            too_many("too many wrong login or pairing links in the last minute", wait, host)
        }
        Err(Refused::Unknown) => {
            tracing::info!(%peer, "refused a login link that was used already, expired or never given");
            let reason = "this link was used already, has expired or is not one this server gave; type the token \
                          (the file DATA_DIR/token) instead, or pair the device again (batond pair)\n";
            response(StatusCode::UNAUTHORIZED, TEXT, Bytes::from_static(reason.as_bytes()), host)
        }
    }
}

/// `POST /push/answer` with the headers `Baton-Capability: CODE` and `Baton-Answer: allow` (or
/// `reject`): what a push notification's action sends (from the page's service worker, with no
/// token: the code, bound to one permission request, is the credential, and works once).
/// Refused codes count as failed exchanges (rate limited like the login codes).
async fn push_answer<B>(gateway: &Gateway, request: &Request<B>, peer: SocketAddr) -> Response<Body> {
    let host = host_of(request);
    let text = |status, body: String| response(status, TEXT, Bytes::from(body), host);
    if request.method() != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "/push/answer takes POST\n".into());
    }
    let Some(push) = &gateway.push else {
        return text(StatusCode::NOT_FOUND, "Web Push is not set up on this server\n".into());
    };
    let now = std::time::Instant::now();
    if let Err(Refused::TooMany(wait)) = gateway.devices.admit_exchange(now) {
        return too_many("too many wrong answers in the last minute", wait, host);
    }
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let (code, answer) = (header("baton-capability"), header("baton-answer"));
    match push.answer(&gateway.orchestrator, &code, &answer).await {
        Ok(option_id) => {
            let body = serde_json::json!({ "option_id": option_id }).to_string();
            response(StatusCode::OK, "application/json", Bytes::from(body), host)
        }
        Err(crate::push::AnswerRefused::Unknown) => {
            gateway.devices.failed_exchange(now);
            tracing::info!(%peer, "refused a push answer: its code was used already, expired or never given");
            text(StatusCode::GONE, "this answer was given already or has expired: open Baton to answer\n".into())
        }
        Err(crate::push::AnswerRefused::NoSuchAnswer) => {
            text(StatusCode::BAD_REQUEST, "Baton-Answer must be allow or reject (one the request offers)\n".into())
        }
        Err(crate::push::AnswerRefused::Refused(reason)) => text(StatusCode::CONFLICT, format!("{reason}\n")),
    }
}

/// The answer to a request that is not a WebSocket upgrade (hyper leaves out the body of an
/// answer to `HEAD`).
fn answer<B>(request: &Request<B>) -> Response<Body> {
    let host = host_of(request);
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return response(StatusCode::METHOD_NOT_ALLOWED, TEXT, Bytes::from_static(b"only GET is served\n"), host);
    }
    let page = |content_type, body: &'static str| {
        response(StatusCode::OK, content_type, Bytes::from_static(body.as_bytes()), host)
    };
    match request.uri().path() {
        "/" | "/index.html" => page("text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => page(JAVASCRIPT, APP_JS),
        "/style.css" => page("text/css; charset=utf-8", STYLE_CSS),
        "/baton-client.js" => page(JAVASCRIPT, CLIENT_JS),
        "/sw.js" => page(JAVASCRIPT, SERVICE_WORKER_JS),
        "/baton-client.d.ts" => page(TEXT, CLIENT_DTS),
        "/protocol.d.ts" => page(TEXT, PROTOCOL_DTS),
        "/protocol.schema.json" => page("application/schema+json", PROTOCOL_SCHEMA),
        "/ws" => response(
            StatusCode::UPGRADE_REQUIRED,
            TEXT,
            Bytes::from_static(b"/ws is the Baton WebSocket endpoint: connect with a WebSocket client\n"),
            host,
        ),
        _ => response(
            StatusCode::NOT_FOUND,
            TEXT,
            Bytes::from_static(b"not found: the Baton web page is at / and the WebSocket endpoint at /ws\n"),
            host,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn get(path: &str) -> Response<Body> {
        answer(&Request::get(path).header("host", "127.0.0.1:7777").body(()).unwrap())
    }

    async fn text(response: Response<Body>) -> String {
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    fn header<'a>(response: &'a Response<Body>, name: &str) -> &'a str {
        response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    #[tokio::test]
    async fn pages_carry_a_strict_policy_and_unknown_paths_are_404() {
        let page = get("/");
        assert_eq!(page.status(), StatusCode::OK);
        assert!(header(&page, "content-security-policy")
            .starts_with("default-src 'self'; connect-src 'self' ws://127.0.0.1:7777 wss://127.0.0.1:7777;"));
        assert_eq!(header(&page, "referrer-policy"), "no-referrer");
        assert_eq!(header(&page, "x-frame-options"), "DENY");
        assert!(header(&get("/app.js?v=1"), "content-type").starts_with("text/javascript"));
        assert!(text(get("/baton-client.js")).await.contains("export class BatonClient"));
        assert!(header(&get("/sw.js"), "content-type").starts_with("text/javascript"));
        assert!(text(get("/sw.js")).await.contains("/push/answer"));
        assert!(text(get("/protocol.d.ts")).await.contains("export interface Actions"));
        let schema = get("/protocol.schema.json");
        assert_eq!(header(&schema, "content-type"), "application/schema+json");
        let schema: serde_json::Value = serde_json::from_str(&text(schema).await).expect("the schema is JSON");
        assert_eq!(schema, baton_protocol::protocol_schema(), "the served schema is the protocol's");
        let missing = get("/nope");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert!(header(&missing, "content-security-policy").starts_with("default-src 'self'"));
        assert_eq!(get("/ws").status(), StatusCode::UPGRADE_REQUIRED);
        let post = answer(&Request::post("/").body(()).unwrap());
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(connect_sources(Some("evil\r\nX: y")), "'self'");
        assert_eq!(connect_sources(None), "'self'");
    }

    #[test]
    fn only_an_upgrade_header_naming_websocket_asks_for_one() {
        let with = |value: &str| wants_websocket(&Request::get("/ws").header("upgrade", value).body(()).unwrap());
        assert!(with("websocket") && with("WebSocket") && with("h2c, websocket"));
        assert!(!with("h2c"));
        assert!(!wants_websocket(&Request::get("/ws").body(()).unwrap()));
    }
}
