//! The reference web page batond serves at `/`, driven in headless Chromium over
//! WebDriver (Debian's `chromium` and `chromium-driver`, installed here when missing), and the
//! HTTP side of the port: the page, 404s, the Origin policy, and `batond schema`.

//! The browser harness is `common/chromium.rs`.

use crate::common;
use crate::common::chromium;

use std::path::Path;

use baton_protocol::*;
use chromium::*;
use common::*;
use fantoccini::Locator;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

/// Sends one raw HTTP request and returns the response head (and body, unless it upgrades).
async fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(WAIT, stream.read(&mut chunk)).await.expect("response in time").expect("read");
        response.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&response);
        // A 101 keeps the connection open: its head is all there is to read.
        if n == 0 || (text.starts_with("HTTP/1.1 101") && text.contains("\r\n\r\n")) {
            return text.into_owned();
        }
    }
}

fn upgrade(addr: &str, token: &str, origin: Option<&str>) -> String {
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    format!(
        "GET /ws?token={token} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{origin}\r\n"
    )
}

#[tokio::test]
async fn the_port_serves_the_page_and_refuses_other_origins() {
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = address(&server);
    let token = server.token.clone().expect("the server's token");

    let page = http(&addr, &format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
    assert!(page.contains("Content-Type: text/html"), "{page}");
    assert!(page.contains("Content-Security-Policy: default-src 'self'; connect-src 'self'"), "{page}");
    assert!(page.contains("<script type=\"module\" src=\"/app.js\""), "{page}");
    let script = http(&addr, &format!("GET /app.js HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(script.contains("task.session.resume"), "the page's script is served");
    assert!(script.contains("import { BatonClient } from \"/baton-client.js\""), "the page uses the client module");
    let module = http(&addr, &format!("GET /baton-client.js HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(module.starts_with("HTTP/1.1 200 OK\r\n") && module.contains("Content-Type: text/javascript"), "{module}");
    assert!(module.contains("export class BatonClient"), "the client module is served");
    for declarations in ["/baton-client.d.ts", "/protocol.d.ts"] {
        let text = http(&addr, &format!("GET {declarations} HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{declarations}: {text}");
    }
    let missing = http(&addr, &format!("GET /secrets HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"), "{missing}");

    // Same origin (a page this server served) may open the WebSocket; no Origin (the TUI,
    // scripts) too; any other origin, another local port included, gets 403.
    let own = http(&addr, &upgrade(&addr, &token, Some(&format!("http://{addr}")))).await;
    assert!(own.starts_with("HTTP/1.1 101"), "{own}");
    assert!(http(&addr, &upgrade(&addr, &token, None)).await.starts_with("HTTP/1.1 101"));
    // Without the token (or with a wrong one), loopback or not: 401.
    for wrong in ["", "guess"] {
        assert!(http(&addr, &upgrade(&addr, wrong, None)).await.starts_with("HTTP/1.1 401"), "token {wrong:?}");
    }
    for origin in ["http://127.0.0.1:1", "http://localhost:5173", "https://evil.example"] {
        let refused = http(&addr, &upgrade(&addr, &token, Some(origin))).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{origin}: {refused}");
        assert!(refused.contains(&format!("origin {origin} is not allowed")), "{refused}");
    }
    // The typed client still works on the shared port.
    let (client, _notes) = server.client().await;
    client.request(TaskListParams::default()).await.expect("task.list");
}

/// Sends `parts` one write at a time (a pause after each, as a slow client would) and returns
/// everything the server says until it closes the connection.
async fn http_in_pieces(addr: &str, parts: &[&[u8]]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    for part in parts {
        stream.write_all(part).await.expect("write");
        stream.flush().await.expect("flush");
        tokio::task::yield_now().await;
    }
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response)).await.expect("closed in time").expect("read");
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn the_port_answers_malformed_oversized_and_slow_requests_with_http_errors() {
    let env = TestEnv::new();
    let server = env.start().await;
    let addr = address(&server);
    let token = server.token.clone().expect("the server's token");

    // A head over 16 KiB, or with more header lines than a browser sends: 431, nothing served.
    let huge = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Pad: {}\r\n\r\n", "a".repeat(20 * 1024));
    let answer = http(&addr, &huge).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert!(!answer.contains("<html"), "{answer}");
    let many: String = (0..200).map(|i| format!("X-{i}: y\r\n")).collect();
    let answer = http(&addr, &format!("GET / HTTP/1.1\r\nHost: {addr}\r\n{many}\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    // Not HTTP: 400. Another method: 405. HEAD: the head alone, with the page's length.
    assert!(http(&addr, "hello there\r\n\r\n").await.starts_with("HTTP/1.1 400 "));
    let post = http(&addr, &format!("POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\n\r\n{{}}")).await;
    assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("only GET is served"), "{post}");
    let head = http(&addr, &format!("HEAD / HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.contains("Content-Security-Policy: "), "{head}");
    assert!(head.ends_with("\r\n\r\n") && !head.contains("<html"), "HEAD has no body: {head}");
    let length = format!("Content-Length: {}\r\n", include_str!("../../server/web/index.html").len());
    assert!(head.contains(&length), "{head}");
    // An upgrade that breaks RFC 6455 (no Sec-WebSocket-Key) is told why, even with the token.
    let keyless = format!(
        "GET /ws?token={token} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    let refused = http(&addr, &keyless).await;
    assert!(refused.starts_with("HTTP/1.1 400 ") && refused.contains("Sec-WebSocket-Key"), "{refused}");
    // One request per connection: a second one pipelined behind the first is not answered.
    let two = format!("GET /style.css HTTP/1.1\r\nHost: {addr}\r\n\r\nGET /app.js HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let answer = http(&addr, &two).await;
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
    assert!(answer.contains("Connection: close\r\n"), "{answer}");

    // A head that arrives in pieces is read whole, and so is an upgrade's.
    let page = http_in_pieces(&addr, &[b"GET /app.js HT", b"TP/1.1\r\nHost: x\r", b"\n\r", b"\n"]).await;
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n") && page.contains("BatonClient"), "{page}");
    let request = upgrade(&addr, &token, None);
    let (first, rest) = request.split_at(request.len() - 3);
    let mut stream = TcpStream::connect(&addr).await.expect("connect");
    stream.write_all(first.as_bytes()).await.expect("write");
    tokio::task::yield_now().await;
    stream.write_all(rest.as_bytes()).await.expect("write");
    let mut buffer = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut buffer)).await.expect("answered in time").expect("read");
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 101"), "{}", String::from_utf8_lossy(&buffer));

    // A client that never finishes its head is cut off (after 10 s) without an answer.
    let mut slow = TcpStream::connect(&addr).await.expect("connect");
    slow.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\n").as_bytes()).await.expect("write");
    let mut said = Vec::new();
    let closed = tokio::time::timeout(3 * WAIT, slow.read_to_end(&mut said)).await;
    assert!(closed.is_ok(), "a connection with an unfinished head stayed open");
    assert!(said.is_empty(), "{}", String::from_utf8_lossy(&said));

    // The server is unharmed.
    let (client, _notes) = server.client().await;
    client.request(TaskListParams::default()).await.expect("task.list");
}

#[tokio::test]
async fn batond_schema_prints_the_checked_in_schema() {
    let output = Command::new(batond()).arg("schema").output().await.expect("run batond schema");
    assert!(output.status.success());
    let printed: Value = serde_json::from_slice(&output.stdout).expect("batond schema prints JSON");
    assert_eq!(printed, protocol_schema());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.schema.json");
    let checked_in: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    assert_eq!(
        printed, checked_in,
        "docs/protocol.schema.json is out of date: cargo run -p baton-server -- schema > docs/protocol.schema.json"
    );
}

/// A page on another origin (another loopback port) whose script opens batond's WebSocket
/// and reports in `#result`: "refused", or how many sessions it could read.
async fn foreign_site() -> String {
    const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>Another site</title>
<p id="result">pending</p>
<script>
const params = new URLSearchParams(location.search);
const result = document.getElementById("result");
const finish = (text) => { if (!result.dataset.done) { result.textContent = text; result.dataset.done = "1"; } };
const token = params.get("token") ? "?token=" + params.get("token") : "";
const ws = new WebSocket("ws://127.0.0.1:" + params.get("port") + "/ws" + token);
ws.onmessage = (m) => {
  const frame = JSON.parse(m.data);
  if (frame.action === "server.hello") {
    ws.send(JSON.stringify({ id: "x1", type: "request", action: "task.session.list", payload: {} }));
  } else if (frame.id === "x1") {
    finish("read " + frame.payload.sessions.length + " sessions");
  }
};
ws.onclose = () => finish("refused");
</script>"#;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn web_page_resumes_a_session_streams_its_answer_catches_up_after_a_restart_and_other_origins_are_refused() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = {
        let (client, mut notes) = server.client().await;
        let created =
            client.request(env.task("Paint the door", "remember the blue door", "mock", true)).await.expect("create");
        let session_id = created.session.status.session_id;
        subscribe(&client, &session_id, Some(0)).await;
        collect_events(&mut notes, &session_id, is_turn_end).await;
        wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
        session_id
    };
    server.kill9().await;
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.expect("status");
    assert!(status.needs_resume && status.is_resumable && !status.is_agent_running, "{status:?}");

    let chromium = Chromium::start().await;
    let browser = &chromium.browser;

    // The page lists the session under its task with a NEEDS RESUME badge.
    // The page's address as batond prints it: the token in its query.
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let row = format!("button.session[data-session-id='{session_id}']");
    chromium.wait_text(&format!("{row} .badge"), "needs resume", true).await;
    chromium.wait_text("nav .task", "Paint the door", true).await;

    // Selecting it shows the history and resumes it once: the badge becomes the ready state.
    browser.find(Locator::Css(&row)).await.expect("session row").click().await.expect("select");
    chromium.wait_text("#transcript li.user", "remember the blue door", true).await;
    chromium.wait_text(&format!("{row} .badge"), "waiting for you", true).await;
    chromium.wait_text("#transcript li.status", "Session resumed", false).await;
    chromium.wait_text("#session-status", "ready", true).await;
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.expect("status");
    assert!(status.is_agent_running && !status.needs_resume, "the page resumed the session: {status:?}");

    // A prompt typed into the page is answered by the resumed agent, streamed into the page.
    let prompt_box = browser.find(Locator::Css("#prompt")).await.expect("prompt box");
    prompt_box.send_keys("What did I ask you to remember?").await.expect("type");
    browser.find(Locator::Css("#send")).await.expect("send button").click().await.expect("send");
    chromium.wait_text("#transcript li.user", "What did I ask you to remember?", true).await;
    chromium.wait_text("#transcript li.agent", "You asked me to remember the blue door.", true).await;
    let shown = client.request(MessageListParams::all(&session_id)).await.expect("message.list").messages;
    let answer = shown.iter().rev().find(|m| m.kind == MessageKind::Agent).expect("an answer");
    assert_eq!(answer.text, "You asked me to remember the blue door.");

    // batond restarts on the same port while the page is open; meanwhile another client has
    // the agent remember something else. The page reconnects, resubscribes from the last event
    // it applied and shows what it missed, once: nothing is lost or repeated.
    let addr = address(&server);
    server.kill9().await;
    let server = env.start_with(&["--listen", &addr]).await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "remember the red window").await;
    assert_eq!(reply, "OK, I will remember the red window.");
    chromium.wait_text("#transcript li.agent", "OK, I will remember the red window.", true).await;
    chromium.wait_text("#connection", "connected", true).await;
    let count = |text: &str| {
        let script = "return [...document.querySelectorAll('#transcript li')].filter(li => li.textContent === arguments[0]).length";
        browser.execute(script, vec![json!(text)])
    };
    for shown_once in ["remember the blue door", "You asked me to remember the blue door.", "remember the red window"] {
        assert_eq!(count(shown_once).await.expect("count"), json!(1), "{shown_once:?} is shown once");
    }

    // A page from another origin (another local port) cannot open a session: batond refuses
    // its handshake with 403 and the page sees the connection fail.
    let site = foreign_site().await;
    let port = address(&server).rsplit(':').next().expect("port").to_string();
    browser.goto(&format!("http://{site}/?port={port}")).await.expect("open the other site");
    chromium.wait_text("#result[data-done]", "refused", true).await;
    wait_log(&env.data_dir, &format!("403 Forbidden: origin http://{site} is not allowed")).await;

    // The same page may connect once its origin is allowed (with the token the server wants),
    // so the refusal above is the origin check and not a broken page.
    server.stop().await;
    let server = env.start_with(&["--allow-origin", &format!("http://{site}"), "--token", "s3cret-token"]).await;
    let port = address(&server).rsplit(':').next().expect("port").to_string();
    browser.goto(&format!("http://{site}/?port={port}&token=s3cret-token")).await.expect("reload the other site");
    chromium.wait_text("#result[data-done]", "read 1 sessions", true).await;

    // batond's own page takes the token from its URL and drops it from the address bar.
    browser.goto(&format!("http://{}/?token=s3cret-token", address(&server))).await.expect("open with token");
    chromium.wait_text("#connection", "connected", true).await;
    chromium.wait_text(&format!("{row} .badge"), "needs resume", true).await;
    let url = browser.current_url().await.expect("url");
    assert!(!url.as_str().contains("s3cret"), "the token stays out of the address bar: {url}");

    chromium.browser.clone().close().await.expect("close the browser");
}

/// An agent that cannot restore its sessions, on screen while batond restarts: the page
/// reconnects, resumes it and says "Agent restarted…" once (the live event and the history it
/// reads are the same entry), and once after a reload; the next answer has the conversation.
#[tokio::test]
async fn web_page_shows_an_agent_restart_once() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = {
        let (client, mut notes) = server.client().await;
        started_session(&env, &client, &mut notes, "mock-fresh", "remember the green gate").await
    };
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let row = format!("button.session[data-session-id='{session_id}']");
    chromium.click(&row).await;
    chromium.wait_text("#transcript li.user", "remember the green gate", false).await;
    let addr = address(&server);
    server.kill9().await;
    let server = env.start_with(&["--listen", &addr]).await;
    chromium.wait_text("#transcript li.status", "Agent restarted", false).await;
    chromium.wait_text(&format!("{row} .badge"), "waiting for you", true).await;
    const RESTARTS: &str = "return [...document.querySelectorAll('#transcript li.status')]\
        .filter(li => li.textContent.includes('Agent restarted')).length";
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "[resume context received] You asked me to remember the green gate.");
    chromium.wait_text("#transcript li.agent", "You asked me to remember the green gate.", false).await;
    assert_eq!(browser.execute(RESTARTS, vec![]).await.expect("count"), json!(1), "said once");
    browser.refresh().await.expect("reload");
    chromium.click(&row).await;
    chromium.wait_text("#transcript li.agent", "You asked me to remember the green gate.", false).await;
    assert_eq!(browser.execute(RESTARTS, vec![]).await.expect("count"), json!(1), "said once after a reload");
}

/// Answers and notifications are not ordered on the wire: a status the page asked for, read while
/// the agent worked, arrives only after the notification that the turn ended (the page's socket
/// holds it back until then, as a busy server or network may). The page keeps the newer state:
/// the session waits for the user, it is not shown working for good.
#[tokio::test]
async fn web_page_keeps_the_newer_state_when_an_older_answer_comes_after_a_notification() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.expect("message.add");
    wait_state(&client, &mut notes, &session_id, SessionState::Running).await;

    // Around the page's socket: the answers to its `task.session.status` requests for the session
    // are held until a state change of the session has been handled, then handed over.
    let hold = r#"
        (() => {
          const session = SESSION;
          const Native = window.WebSocket;
          const mark = (name) => setTimeout(() => { document.documentElement.dataset[name] = "1"; }, 0);
          window.WebSocket = class extends Native {
            constructor(...args) {
              super(...args);
              const asked = new Set();
              let held = [];
              this.send = (data) => {
                const frame = JSON.parse(data);
                if (frame.action === "task.session.status" && frame.payload.session_id === session) asked.add(frame.id);
                return super.send(data);
              };
              this.addEventListener("message", (event) => {
                if (event.handedOver) return;
                const frame = JSON.parse(event.data);
                if (frame.type === "response" && asked.delete(frame.id)) {
                  event.stopImmediatePropagation();
                  held.push(event.data);
                  mark("held");
                } else if (frame.action === "session.state_changed" && frame.payload.session_id === session && held.length) {
                  const due = held;
                  held = [];
                  setTimeout(() => {
                    for (const data of due) {
                      const late = new MessageEvent("message", { data });
                      late.handedOver = true;
                      this.dispatchEvent(late);
                    }
                    mark("handedOver");
                  }, 0);
                }
              });
            }
          };
        })();
    "#
    .replace("SESSION", &json!(session_id).to_string());
    let chromium = Chromium::start().await;
    chromium.before_every_page(&hold).await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let badge = format!("button.session[data-session-id='{session_id}'] .badge");
    chromium.wait_text(&badge, "working", true).await;
    chromium.click(&format!("button.session[data-session-id='{session_id}']")).await;
    chromium.wait_until("the status answer held", "document.documentElement.dataset.held === '1'").await;

    client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("task.session.cancel");
    chromium.wait_text(&badge, "waiting for you", true).await;
    chromium.wait_until("the older answer handed over", "document.documentElement.dataset.handedOver === '1'").await;
    let shown = format!("return document.querySelector(\"{badge}\").textContent");
    assert_eq!(
        browser.execute(&shown, vec![]).await.expect("the badge"),
        json!("waiting for you"),
        "the status read while the agent worked does not undo the turn's end"
    );
    chromium.wait_until("the cancel button off", "document.getElementById('cancel-turn').disabled").await;
}

/// A session FAILED because its agent could not be spawned: the page says why and offers Retry,
/// which (asked first) launches it again once the agent is installed.
#[tokio::test]
async fn web_page_retries_a_failed_session_once_its_cause_is_fixed() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let command = env.data_dir.parent().expect("a parent dir").join("bin/later-agent");
    env.agents_config(&format!("[agents.later]\ncommand = \"{}\"\nnative_session_resume = true\n", command.display()));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("Later", "", "later", false)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    let error = server_error(client.request(SessionResumeParams::new(session_id.clone())).await);
    assert_eq!(error.code, ErrorCode::Unavailable, "{}", error.message);
    assert_eq!(status(&client, &session_id).await.state, SessionState::Failed, "the agent is missing");

    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let row = format!("button.session[data-session-id='{session_id}']");
    chromium.click(&row).await;
    chromium.wait_until("the Retry button", "!document.getElementById('retry-failed').hidden").await;
    chromium.wait_text("#session-status", "later-agent", false).await;

    // Installed now; the page retries when asked.
    std::fs::create_dir_all(command.parent().expect("bin")).expect("mkdir");
    let script = format!(
        "#!/bin/sh\nexec '{}' mock-agent --state-dir '{}'\n",
        batond(),
        env.data_dir.join("mock-agent").display()
    );
    std::fs::write(&command, script).expect("write the agent");
    std::fs::set_permissions(&command, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    chromium.click("#retry-failed").await;
    chromium.answer_ok("Retry?").await;
    chromium.wait_text(&format!("{row} .badge"), "waiting for you", true).await;
    chromium.wait_until("no Retry button", "document.getElementById('retry-failed').hidden").await;
    subscribe(&client, &session_id, None).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "back?").await, "Echo: back?");
}

/// A long answer that `message.list` cut shows its start on the page and says how much is not
/// shown and how to read it whole.
#[tokio::test]
async fn web_page_shows_the_start_of_a_cut_answer_and_says_so() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let answer = prompt(&client, &mut notes, &session_id, "/chunks 60000").await;
    // The newest entry is rebuilt from its events: the long answer is an older one.
    prompt(&client, &mut notes, &session_id, "thanks").await;
    let chromium = Chromium::start().await;
    let token = server.token.clone().expect("the server's token");
    chromium.browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.click(&format!("button.session[data-session-id='{session_id}']")).await;
    let shown = chromium.wait_text("#transcript li.agent", "more not shown here", false).await;
    assert!(shown.starts_with("c1 c2 c3"), "the start is shown");
    let tail = &shown[shown.len().saturating_sub(200)..];
    let whole = format!("({:.1} KB in all): Export the transcript to read it whole]", answer.len() as f64 / 1024.0);
    assert!(tail.ends_with(&whole), "{tail}");
    assert!(shown.len() < answer.len(), "not the whole answer");
}

#[tokio::test]
async fn web_page_loads_the_session_list_page_by_page_as_it_scrolls() {
    if !browser_installed() {
        return;
    }
    const SESSIONS: usize = 230;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let mut oldest = None;
    for i in 0..SESSIONS {
        let created = client.request(env.task(&format!("Task {i}"), "", "mock", false)).await.expect("create");
        oldest.get_or_insert(created.session.status.session_id);
    }
    let oldest = oldest.unwrap();
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.wait_text("nav .task", &format!("Task {}", SESSIONS - 1), true).await;
    let rows = || async {
        let count = browser.execute("return document.querySelectorAll('button.session').length", vec![]).await;
        count.expect("count rows").as_u64().expect("a number") as usize
    };
    let first = rows().await;
    assert!(first < SESSIONS, "the first page is not the whole list ({first} rows)");
    // Scrolling to the end loads the next pages, down to the oldest session.
    let row = format!("button.session[data-session-id='{oldest}']");
    const SCROLL: &str = r#"
        const [selector, done] = arguments;
        const nav = document.getElementById("sessions");
        const step = () => {
            if (document.querySelector(selector)) return done(true);
            nav.scrollTop = nav.scrollHeight;
            nav.dispatchEvent(new Event("scroll"));
        };
        new MutationObserver(step).observe(nav, { childList: true });
        step();
    "#;
    let found = browser.execute_async(SCROLL, vec![json!(row)]).await.expect("the oldest session shows up");
    assert_eq!(found, json!(true));
    assert_eq!(rows().await, SESSIONS, "every session once");
    println!("[web] session list: first page {first} rows, {SESSIONS} after scrolling to the end");
}

/// The TUI's actions from the page: new task, rename, cancel a turn, new session, stop, archive,
/// delete (asked first); drafts stay with their session; a question and
/// the newest line are scrolled into view; 420 px wide works; states read in words with a symbol;
/// a server restart shows "reconnecting…", not the token form. Screenshots are saved.
#[tokio::test]
async fn web_page_does_what_the_tui_does_on_a_phone_too() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let older = started_session(&env, &client, &mut notes, "mock", "remember the green gate").await;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let older_row = format!("button.session[data-session-id='{older}']");
    chromium.wait_text(&format!("{older_row} .badge"), "waiting for you", true).await;
    let icon = browser
        .execute("return document.querySelector(arguments[0]).dataset.icon", vec![json!(format!("{older_row} .badge"))])
        .await
        .expect("icon");
    assert_eq!(icon, json!("✎"), "a state has a symbol, not only a colour");
    // No session selected yet: no session actions are shown (a phone showed two rows of dead
    // buttons), on a wide window and a phone's.
    let actions_shown = "const a = document.getElementById('actions'); \
        return getComputedStyle(a).display !== 'none' && a.getBoundingClientRect().height > 0";
    assert_eq!(browser.execute(actions_shown, vec![]).await.expect("actions"), json!(false));
    browser.set_window_size(390, 844).await.expect("a phone's window");
    assert_eq!(browser.execute(actions_shown, vec![]).await.expect("actions"), json!(false));
    chromium.screenshot("phone_nothing_selected").await;
    browser.set_window_size(1200, 800).await.expect("wide window");

    // New task, from the page: it is created, selected, and its agent answers.
    chromium.click("#new-task").await;
    chromium.wait_text("#ask[open] #ask-text", "New task", true).await;
    chromium.fill("#ask-fields input[name=title]", "Water the plants").await;
    chromium.fill("#ask-fields textarea[name=description]", "remember the watering can").await;
    // The working directory is asked, prefilled with the selected (or newest) task's.
    let older_task = client.request(SessionStatusParams { session_id: older.clone() }).await.expect("status").task_id;
    let tasks = client.request(TaskListParams::default()).await.expect("task.list").tasks;
    let older_workdir = tasks.iter().find(|t| t.id == older_task).expect("the task").workdir.clone();
    assert_eq!(chromium.value("#ask-fields input[name=workdir]").await, older_workdir);
    assert_eq!(
        browser
            .execute("return document.querySelector('#ask-fields input[name=workdir]').required", vec![])
            .await
            .unwrap(),
        json!(true),
        "an empty directory is not sent"
    );
    chromium.fill("#ask-fields input[name=workdir]", &env.workdir.display().to_string()).await;
    assert_eq!(chromium.value("#ask-fields select[name=agent]").await, "mock");
    chromium.click("#ask-ok").await;
    chromium.wait_text("#session-title", "Water the plants", true).await;
    chromium.wait_text("#transcript li.agent", "OK, I will remember the watering can.", true).await;
    let tasks = client.request(TaskListParams::default()).await.expect("task.list").tasks;
    let task = tasks.iter().find(|t| t.title == "Water the plants").expect("the task exists").clone();
    let sessions = client
        .request(SessionListParams { task_id: Some(task.id.clone()), ..Default::default() })
        .await
        .expect("sessions")
        .sessions;
    let new_id = sessions[0].status.session_id.clone();
    let new_row = format!("button.session[data-session-id='{new_id}']");
    chromium.screenshot("actions_new_task").await;

    // Drafts belong to their session.
    chromium.fill("#prompt", "a draft for the plants").await;
    chromium.click(&older_row).await;
    chromium.wait_text("#session-title", "t", true).await;
    assert_eq!(chromium.value("#prompt").await, "", "the other session's draft did not follow");
    chromium.fill("#prompt", "a draft for the gate").await;
    chromium.click(&new_row).await;
    chromium.wait_text("#session-title", "Water the plants", true).await;
    assert_eq!(chromium.value("#prompt").await, "a draft for the plants");
    chromium.click(&older_row).await;
    chromium.wait_text("#session-title", "t", true).await;
    assert_eq!(chromium.value("#prompt").await, "a draft for the gate");
    chromium.click(&new_row).await;
    chromium.wait_text("#session-title", "Water the plants", true).await;

    // Rename: every client sees the new title.
    chromium.click("#rename-task").await;
    chromium.wait_text("#ask[open] #ask-text", "Rename the task", true).await;
    chromium.fill("#ask-fields input[name=title]", "Water the garden").await;
    chromium.click("#ask-ok").await;
    chromium.wait_text("nav .task", "Water the garden", true).await;
    assert_eq!(
        client
            .request(TaskListParams::default())
            .await
            .unwrap()
            .tasks
            .iter()
            .filter(|t| t.title == "Water the garden")
            .count(),
        1
    );

    // A permission request is brought into view with its buttons, however long the transcript.
    browser.set_window_size(700, 500).await.expect("a short window");
    chromium.fill("#prompt", "/chunks 400").await;
    chromium.click("#send").await;
    chromium.wait_text("#transcript li.agent", "c400", false).await;
    let overflows = "const t = document.getElementById('transcript'); return t.scrollHeight > 2 * t.clientHeight";
    assert_eq!(
        browser.execute(overflows, vec![]).await.expect("overflow"),
        json!(true),
        "a transcript longer than its pane"
    );
    // The reader scrolled up to read: the question still comes into view.
    browser.execute("document.getElementById('transcript').scrollTop = 0", vec![]).await.expect("scroll up");
    chromium.fill("#prompt", "/permission").await;
    chromium.click("#send").await;
    chromium.wait_until("the question's buttons", "document.querySelector('#transcript li.permission button')").await;
    let in_view = r#"
        const button = [...document.querySelectorAll('#transcript li.permission button')].pop();
        const box = document.getElementById('transcript').getBoundingClientRect();
        const r = button.getBoundingClientRect();
        return r.top >= box.top && r.bottom <= box.bottom
            || `the button at ${r.top}..${r.bottom}, the transcript at ${box.top}..${box.bottom}, header ${document.querySelector('header').getBoundingClientRect().height}, needs-you ${document.getElementById('needs-you').textContent}`;
    "#;
    assert_eq!(browser.execute(in_view, vec![]).await.expect("in view"), json!(true), "the question is in view");
    chromium.screenshot("permission_in_view").await;
    browser.set_window_size(1200, 800).await.expect("wide window");
    chromium.click("#transcript li.permission button").await;
    chromium.wait_text("#transcript li.permission", "(allowed)", false).await;
    let newest_in_view = r#"
        const t = document.getElementById('transcript');
        return t.scrollHeight - t.scrollTop - t.clientHeight <= 2;
    "#;
    chromium.wait_text("#transcript li.agent", "Permission outcome", false).await;
    assert_eq!(
        browser.execute(newest_in_view, vec![]).await.expect("bottom"),
        json!(true),
        "the newest line is in view"
    );

    // Cancel a turn, asked first (once the permission's turn is over, so /hang starts its own).
    chromium.wait_until("the turn over", "document.getElementById('cancel-turn').disabled").await;
    chromium.fill("#prompt", "/hang").await;
    chromium.click("#send").await;
    chromium.wait_text("#transcript li.user", "/hang", false).await;
    chromium.wait_until("the turn runs", "!document.getElementById('cancel-turn').disabled").await;
    chromium.click("#cancel-turn").await;
    chromium.answer_ok("Cancel the running turn").await;
    chromium.wait_text("#transcript li.status", "Turn cancelled.", true).await;

    // New session of the task, then stop it.
    chromium.click("#new-session").await;
    chromium.wait_until("a second session row", "document.querySelectorAll('button.session').length === 3").await;
    chromium
        .wait_until(
            "the new session selected",
            &format!("document.querySelector('button.session[aria-current=true]').dataset.sessionId !== '{new_id}'"),
        )
        .await;
    chromium.wait_text("button.session[aria-current=true] .badge", "waiting for you", true).await;
    chromium.click("#stop-session").await;
    chromium.answer_ok("Stop").await;
    chromium.wait_text("button.session[aria-current=true] .badge", "done", true).await;

    // A phone: 420 px wide, nothing wider than the screen, list and session one above the other.
    browser.set_window_size(420, 820).await.expect("narrow window");
    chromium
        .wait_until("the narrow layout", "getComputedStyle(document.querySelector('main')).flexDirection === 'column'")
        .await;
    let fits = browser
        .execute("return document.documentElement.scrollWidth <= window.innerWidth", vec![])
        .await
        .expect("width");
    assert_eq!(fits, json!(true), "nothing is wider than 420 px");
    let stacked = r#"
        const nav = document.getElementById('sessions').getBoundingClientRect();
        const prompt = document.getElementById('prompt').getBoundingClientRect();
        return nav.width > 300 && prompt.width > 250 && prompt.bottom <= window.innerHeight;
    "#;
    assert_eq!(browser.execute(stacked, vec![]).await.expect("layout"), json!(true), "usable at 420 px");
    chromium.screenshot("narrow_420px").await;
    browser.set_window_size(1200, 800).await.expect("wide window");

    // A server restart: the page shows "reconnecting…" meanwhile, never the token form, and
    // resumes the selected session when it is back.
    let addr = address(&server);
    drop((client, notes));
    server.kill9().await;
    chromium.wait_text("#connection", "reconnecting…", false).await;
    chromium.screenshot("reconnecting").await;
    let hidden = browser.execute("return document.getElementById('token-form').hidden", vec![]).await.expect("form");
    assert_eq!(hidden, json!(true), "a restart is not a refusal");
    let server = env.start_with(&["--listen", &addr]).await;
    let (client, _notes) = server.client().await;
    chromium.wait_text("#connection", "connected", true).await;
    chromium.click(&older_row).await;
    chromium.wait_text("#session-title", "t", true).await;
    chromium.wait_text(&format!("{older_row} .badge"), "waiting for you", true).await;

    // Archive, asked first: the task leaves the list and the pane, its data stays; the
    // Archived panel lists it and brings it back.
    chromium.click("#archive-task").await;
    chromium.answer_ok("Archive the task “t”").await;
    chromium.wait_until("the archived task gone", &format!("!document.querySelector(\"{older_row}\")")).await;
    chromium.wait_text("#session-title", "Select a session", true).await;
    let archived = client.request(TaskListParams { archived: Some(ArchivedFilter::Only) }).await.unwrap().tasks;
    assert_eq!(archived.len(), 1);
    let stopped = client.request(SessionStatusParams { session_id: older.clone() }).await.unwrap();
    assert!(!stopped.is_agent_running, "archiving stopped its agent");
    chromium.click("#archived-open").await;
    chromium.wait_text("#archived-list li[data-session-id] .where", "t", true).await;
    chromium.screenshot("archived_tasks").await;
    chromium.click("#archived-list button.unarchive").await;
    chromium.wait_until("the task back", &format!("document.querySelector(\"{older_row}\")")).await;
    chromium.wait_text("#archived-list li.empty", "No archived tasks.", true).await;
    chromium.click("#archived-close").await;

    // Delete, asked first: Cancel keeps everything, Delete removes the task.
    chromium.click(&new_row).await;
    chromium.wait_text("#session-title", "Water the garden", true).await;
    chromium.click("#delete-task").await;
    chromium.wait_text("#ask[open] #ask-text", "Delete the task “Water the garden” with its 2 session(s)", false).await;
    chromium.screenshot("delete_question").await;
    chromium.click("#ask-cancel").await;
    assert!(client
        .request(TaskListParams::default())
        .await
        .unwrap()
        .tasks
        .iter()
        .any(|t| t.title == "Water the garden"));
    chromium.click("#delete-task").await;
    chromium.answer_ok("Delete the task").await;
    chromium.wait_until("the task gone", &format!("!document.querySelector(\"{new_row}\")")).await;
    let left = client.request(TaskListParams { archived: Some(ArchivedFilter::Include) }).await.unwrap().tasks;
    assert!(left.iter().all(|t| t.title != "Water the garden"), "{left:?}");

    chromium.browser.clone().close().await.expect("close the browser");
}

/// A restore the agent can never do (-32603 each time) is not retried forever: the page offers
/// "Start fresh", which starts a new agent session that is given the conversation.
#[tokio::test]
async fn web_page_offers_a_fresh_start_when_the_agent_cannot_restore() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = {
        let (client, mut notes) = server.client().await;
        started_session(&env, &client, &mut notes, "mock", "remember the red roof").await
    };
    server.kill9().await;
    // From now on the mock agent answers every restore with an internal error.
    let args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--restore-error", "-32603"];
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    env.agents_config(&format!(
        "[agents.mock]\ncommand = \"{{batond}}\"\nargs = [{}]\nnative_session_resume = true\n",
        args.join(", ")
    ));
    let server = env.start().await;
    let chromium = Chromium::start().await;
    let token = server.token.clone().expect("the server's token");
    chromium.browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    let row = format!("button.session[data-session-id='{session_id}']");
    chromium.wait_text(&format!("{row} .badge"), "needs resume", true).await;
    chromium.click(&row).await;
    // The automatic resume fails and says what to do.
    chromium.wait_text("#transcript li", "not a passing failure", false).await;
    chromium.wait_until("the button shows", "!document.querySelector('#start-fresh').hidden").await;
    chromium.click("#start-fresh").await;
    chromium.answer_ok("Start fresh?").await;
    chromium.wait_text("#transcript li.status", "Started over", false).await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "[resume context received] You asked me to remember the red roof.");
}

/// What needs you on the page: the header tells what asks the user something from the finished
/// turns not seen yet (a turn on screen for a moment is seen, and stays seen after a reload),
/// kept in step by `attention.changed`, and a desktop notification (the browser's Notification
/// API, here a stand-in that records what the page shows) when a session other than the one on
/// screen starts needing the user.
#[tokio::test]
async fn web_page_counts_what_needs_you_and_notifies_the_desktop() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let first = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    let token = server.token.clone().expect("the server's token");
    browser.goto(&format!("http://{}/?token={token}", address(&server))).await.expect("open the page");
    chromium.wait_text("#needs-you", "1 your turn", true).await;
    // One session of a task is not numbered.
    let label = |id: &str| format!("button.session[data-session-id='{id}'] span:first-child");
    let alone = chromium.wait_text(&label(&first), "mock · ", false).await;
    assert!(!alone.starts_with('#'), "{alone}");
    // Notifications allowed: the stand-in records each one.
    const ALLOWED: &str = r#"
        window.shown = [];
        window.Notification = class {
            static permission = "granted";
            constructor(title, options) { window.shown.push(title + "|" + options.body); }
        };
    "#;
    browser.execute(ALLOWED, vec![]).await.expect("stand-in Notification");

    let created = client.request(env.task("Second", "hi", "mock", true)).await.expect("task.create");
    chromium.wait_text("#needs-you", "2 your turn", true).await;
    chromium.wait_until("one notification", "window.shown.length === 1").await;
    let shown = browser.execute("return window.shown", vec![]).await.expect("notifications shown");
    assert_eq!(shown, json!(["Baton|Second: waits for your next prompt"]));

    // Looking at the first session's finished turn: it is seen, the other one is not.
    let row = |id: &str| format!("button.session[data-session-id='{id}']");
    chromium.click(&row(&first)).await;
    chromium.wait_text("#needs-you", "1 your turn", true).await;
    let second_task = created.session.status.session_id.clone();
    chromium
        .wait_until(
            "the other row unseen",
            &format!("document.querySelector(\"{}\").dataset.need === 'turn'", row(&second_task)),
        )
        .await;
    let need = browser
        .execute(&format!("return document.querySelector(\"{}\").dataset.need ?? null", row(&first)), vec![])
        .await
        .expect("the first row's need");
    assert_eq!(need, Value::Null, "the session looked at needs nothing more");
    // A permission asked: that asks the user, apart from finished turns.
    client.request(MessageAddParams::new(&second_task, "/permission")).await.expect("message.add");
    chromium.wait_text("#needs-you", "1 asks you", true).await;
    // Seen is kept by this browser: after a reload (nothing selected), the first turn is still seen.
    browser.refresh().await.expect("reload");
    chromium.wait_text("#connection", "connected", true).await;
    chromium.wait_text("#needs-you", "1 asks you", true).await;

    // A second session of the first task: the two are numbered, the oldest #1.
    let task_id = status(&client, &first).await.task_id;
    let again = SessionStartParams { task_id, agent: None, prompt: Some("again".into()) };
    let second = client.request(again).await.expect("task.session.start").session.status.session_id;
    chromium.wait_text(&label(&second), "#2 · mock · ", false).await;
    chromium.wait_text(&label(&first), "#1 · mock · ", false).await;
    chromium.screenshot("needs-you").await;
}

/// The files under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[tokio::test]
async fn the_token_in_the_pages_address_is_exchanged_and_kept_out_of_the_browser_history() {
    if !browser_installed() {
        return;
    }
    let env = TestEnv::new();
    let token = "tok-kept-out-of-history-0123456789abcdef";
    let server = env.start_with(&["--token", token]).await;
    let chromium = Chromium::start().await;
    let browser = &chromium.browser;
    // The address batond prints, opened as a user would: a one-time login code, not the token.
    let printed = server.page.clone().expect("batond prints the page's address");
    assert!(printed.contains("?login=") && !printed.contains(token), "{printed}");
    browser.goto(&printed).await.expect("open the page");
    chromium.wait_text("#connection", "connected", true).await;
    let url = browser.current_url().await.expect("url");
    assert!(!url.as_str().contains(token), "the token stays out of the address bar: {url}");
    // A reload (and a new tab of the same origin) still connects, with no token in sight.
    browser.refresh().await.expect("reload");
    chromium.wait_text("#connection", "connected", true).await;
    // The link is used up: opened again (from the history, or by someone it leaked to), it
    // logs nobody in, and the page asks for the token.
    let second = Chromium::start().await;
    second.browser.goto(&printed).await.expect("open the used link");
    second.wait_text("#connection", "the server refused this page", false).await;
    second.browser.clone().close().await.expect("close the second browser");
    let profile = chromium.profile().to_path_buf();
    chromium.browser.clone().close().await.expect("close the browser");
    let leaked = files_containing(&profile, token);
    assert!(leaked.is_empty(), "the token is in the browser's files: {leaked:?}");
    println!(
        "[web-ui] login link: exchanged on first load, used up after; no file of the browser's profile holds the token"
    );
    drop(chromium);
}
