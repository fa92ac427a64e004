//! Plain HTTP on the WebSocket's port: the reference web page (`/`, `/app.js`, `/style.css`),
//! its protocol client as an ES module (`/baton-client.js`, with `/baton-client.d.ts` and
//! `/protocol.d.ts`), all embedded in the binary; the WebSocket upgrade at `/ws`; 404 for
//! anything else.
//!
//! The request head is read here; an upgrade to `/ws` goes on to the WebSocket handshake with
//! the bytes already read put back in front of the stream.

use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Gateway;

/// Largest request head accepted (request line and headers).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A client must send its whole request head within this time.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

const INDEX_HTML: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const STYLE_CSS: &str = include_str!("../../web/style.css");
const CLIENT_JS: &str = include_str!("../../web/baton-client.js");
const CLIENT_DTS: &str = include_str!("../../web/baton-client.d.ts");
const PROTOCOL_DTS: &str = include_str!("../../web/protocol.d.ts");

/// What the router needs from a request head.
#[derive(Debug, PartialEq)]
struct Head {
    method: String,
    path: String,
    host: Option<String>,
    upgrade_websocket: bool,
}

fn parse_head(bytes: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let target = request_line.next()?;
    if !request_line.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    let mut host = None;
    let mut upgrade_websocket = false;
    for line in lines.take_while(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("host") {
            host = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("upgrade") {
            upgrade_websocket = value.split(',').any(|p| p.trim().eq_ignore_ascii_case("websocket"));
        }
    }
    Some(Head { method, path, host, upgrade_websocket })
}

enum ReadHead {
    /// Every byte read (the head and whatever followed it) and the length of the head.
    Complete(Vec<u8>, usize),
    TooLarge,
    Closed,
}

/// Reads until the end of the request head.
async fn read_head<R: AsyncRead + Unpin>(stream: &mut R) -> ReadHead {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return ReadHead::Closed,
            Ok(n) => n,
        };
        let searched_from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer[searched_from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let head_len = searched_from + end + 4;
            return ReadHead::Complete(buffer, head_len);
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return ReadHead::TooLarge;
        }
    }
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

fn response(status: &str, content_type: &str, body: &str, host: Option<&str>, head_only: bool) -> Vec<u8> {
    let csp = format!(
        "default-src 'self'; connect-src {}; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        connect_sources(host)
    );
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Content-Security-Policy: {csp}\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
         Referrer-Policy: no-referrer\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The answer to a request that is not a WebSocket upgrade.
fn answer(head: &Head) -> Vec<u8> {
    let host = head.host.as_deref();
    let head_only = head.method == "HEAD";
    if head.method != "GET" && !head_only {
        return response("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET is served\n", host, false);
    }
    match head.path.as_str() {
        "/" | "/index.html" => response("200 OK", "text/html; charset=utf-8", INDEX_HTML, host, head_only),
        "/app.js" => response("200 OK", "text/javascript; charset=utf-8", APP_JS, host, head_only),
        "/style.css" => response("200 OK", "text/css; charset=utf-8", STYLE_CSS, host, head_only),
        "/baton-client.js" => response("200 OK", "text/javascript; charset=utf-8", CLIENT_JS, host, head_only),
        "/baton-client.d.ts" => response("200 OK", "text/plain; charset=utf-8", CLIENT_DTS, host, head_only),
        "/protocol.d.ts" => response("200 OK", "text/plain; charset=utf-8", PROTOCOL_DTS, host, head_only),
        "/ws" => response(
            "426 Upgrade Required",
            "text/plain; charset=utf-8",
            "/ws is the Baton WebSocket endpoint: connect with a WebSocket client\n",
            host,
            head_only,
        ),
        _ => response(
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: the Baton web page is at / and the WebSocket endpoint at /ws\n",
            host,
            head_only,
        ),
    }
}

/// Serves one TCP connection: a page request is answered and the connection closed; an
/// upgrade goes on as a WebSocket connection.
pub async fn route(gateway: Arc<Gateway>, mut stream: TcpStream, peer: SocketAddr) {
    // Small frames (events, responses) go out at once instead of waiting for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    let (bytes, head_len) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(ReadHead::Complete(bytes, head_len)) => (bytes, head_len),
        Ok(ReadHead::TooLarge) => {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
        Ok(ReadHead::Closed) | Err(_) => {
            tracing::debug!(%peer, "no complete HTTP request head; closing");
            return;
        }
    };
    let Some(head) = parse_head(&bytes[..head_len]) else {
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
        return;
    };
    if head.upgrade_websocket {
        // The handshake (path, Origin and token checks) reads the head again from the bytes
        // already taken off the socket.
        let (reader, writer) = stream.into_split();
        let replayed = Cursor::new(bytes).chain(reader);
        super::connection::handle(gateway, tokio::io::join(replayed, writer), peer).await;
        return;
    }
    tracing::debug!(%peer, method = %head.method, path = %head.path, "http request");
    let _ = stream.write_all(&answer(&head)).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_parsed_leniently_and_refused_when_not_http() {
        let head =
            parse_head(b"GET /ws?token=x HTTP/1.1\r\nHost: 127.0.0.1:7777\r\nUpgrade: WebSocket\r\n\r\n").unwrap();
        assert_eq!(
            head,
            Head {
                method: "GET".into(),
                path: "/ws".into(),
                host: Some("127.0.0.1:7777".into()),
                upgrade_websocket: true
            }
        );
        assert!(!parse_head(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap().upgrade_websocket);
        assert_eq!(parse_head(b"hello\r\n\r\n"), None);
        assert_eq!(parse_head(b"GET / SPDY/3\r\n\r\n"), None);
    }

    /// Hands out its pieces one read at a time (at most what the reader has room for), as a
    /// socket may.
    struct Pieces(Vec<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(piece) = self.0.first_mut() {
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                piece.drain(..n);
                if piece.is_empty() {
                    self.0.remove(0);
                }
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    fn pieces(parts: &[&[u8]]) -> Pieces {
        Pieces(parts.iter().map(|p| p.to_vec()).collect())
    }

    #[tokio::test]
    async fn a_head_split_across_reads_is_read_whole_with_what_follows_it() {
        let mut stream = pieces(&[b"GET /ws HTTP/1.1\r\nHost: h\r", b"\n\r", b"\nframe"]);
        let ReadHead::Complete(bytes, head_len) = read_head(&mut stream).await else { panic!("no head") };
        assert_eq!(&bytes[..head_len], b"GET /ws HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(&bytes[head_len..], b"frame", "bytes after the head are kept for the WebSocket");
        assert!(matches!(read_head(&mut pieces(&[b"GET / HTTP/1.1\r\n"])).await, ReadHead::Closed));
        let endless = vec![b'a'; MAX_HEAD_BYTES + 1];
        assert!(matches!(read_head(&mut pieces(&[&endless])).await, ReadHead::TooLarge));
    }

    #[test]
    fn pages_carry_a_strict_policy_and_unknown_paths_are_404() {
        let get = |path: &str| {
            let head = Head {
                method: "GET".into(),
                path: path.into(),
                host: Some("127.0.0.1:7777".into()),
                upgrade_websocket: false,
            };
            String::from_utf8(answer(&head)).unwrap()
        };
        let page = get("/");
        assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
        assert!(page.contains(
            "Content-Security-Policy: default-src 'self'; connect-src 'self' ws://127.0.0.1:7777 wss://127.0.0.1:7777;"
        ));
        assert!(page.contains("Referrer-Policy: no-referrer"));
        assert!(get("/app.js").contains("Content-Type: text/javascript"));
        assert!(get("/baton-client.js").contains("export class BatonClient"));
        assert!(get("/protocol.d.ts").contains("export interface Actions"));
        assert!(get("/nope").starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(get("/ws").starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
        assert_eq!(connect_sources(Some("evil\r\nX: y")), "'self'");
    }
}
