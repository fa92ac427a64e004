//! Hostile clients: malformed and oversize frames, bursts, thousands of subscriptions, a client
//! that never reads, forged tokens and origins, ids and parameters aimed at the file system.
//! Each test prints one summary line (what it tried, counts, figures); run with `--nocapture`.
//!
//! While the hostile client works, an observer (a well-behaved typed client) keeps doing request
//! round trips on its own connection: every one must be answered; its latency is reported, not
//! asserted.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A raw WebSocket connection that has read `server.hello`.
async fn raw(url: &str) -> Ws {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("connect");
    let hello = next_envelope(&mut ws).await.expect("server.hello");
    assert_eq!(hello.action, "server.hello");
    ws
}

/// The next text frame as an envelope; `Err` with the close frame (if any) when the connection
/// ends instead.
async fn next_envelope(ws: &mut Ws) -> Result<Envelope, Option<(CloseCode, String)>> {
    loop {
        let frame = tokio::time::timeout(WAIT, ws.next()).await.expect("the server answers within the bound");
        match frame {
            Some(Ok(WsMessage::Text(text))) => {
                return Ok(serde_json::from_str(text.as_str()).expect("the server sends envelopes"))
            }
            Some(Ok(WsMessage::Close(close))) => return Err(close.map(|c| (c.code, c.reason.to_string()))),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

/// The next answer (response or error), skipping notifications.
async fn next_answer(ws: &mut Ws) -> Envelope {
    loop {
        let envelope = next_envelope(ws).await.unwrap_or_else(|close| panic!("connection closed: {close:?}"));
        if envelope.kind != MessageType::Notification {
            return envelope;
        }
    }
}

fn error_of(envelope: &Envelope) -> ErrorPayload {
    assert_eq!(envelope.kind, MessageType::Error, "expected an error, got {envelope:?}");
    serde_json::from_value(envelope.payload.clone()).expect("an error payload")
}

fn request(id: &str, action: &str, payload: Value) -> String {
    json!({"id": id, "type": "request", "action": action, "payload": payload}).to_string()
}

/// A well-behaved client doing one round trip every 20 ms until
/// stopped; every request must be answered.
struct Observer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
}

struct Latency {
    count: usize,
    median: Duration,
    max: Duration,
}

impl std::fmt::Display for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "observer: {} round trips, median {:?}, max {:?}", self.count, self.median, self.max)
    }
}

impl Observer {
    async fn start(server: &Server) -> Observer {
        let (client, _notes) = server.client().await;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let _notes = _notes;
            let mut latencies = Vec::new();
            let mut pace = tokio::time::interval(Duration::from_millis(20));
            while !stopped.load(Ordering::SeqCst) {
                pace.tick().await;
                let started = Instant::now();
                let result = client.request_with_timeout(AgentListParams {}, WAIT).await;
                assert!(result.is_ok(), "the observer's request was not answered: {result:?}");
                latencies.push(started.elapsed());
            }
            latencies
        });
        Observer { stop, task }
    }

    async fn finish(self) -> Latency {
        self.stop.store(true, Ordering::SeqCst);
        let mut latencies = self.task.await.expect("observer");
        assert!(!latencies.is_empty(), "the observer made no round trip");
        latencies.sort();
        Latency { count: latencies.len(), median: latencies[latencies.len() / 2], max: latencies[latencies.len() - 1] }
    }
}

/// The server is still up and serves a new client.
async fn still_serving(server: &Server) {
    let (client, _) = server.client().await;
    client.request(TaskListParams::default()).await.expect("the server still answers");
}

#[tokio::test]
async fn malformed_frames_get_clear_errors_and_the_server_stays_up() {
    let env = TestEnv::new();
    let server = env.start().await;
    let observer = Observer::start(&server).await;
    let mut ws = raw(&server.url_with_token()).await;

    // Frames that are answered with an error; the connection stays open.
    let nested = "[".repeat(100_000);
    let huge = "x".repeat(3 * 1024 * 1024);
    let cases: Vec<(&str, String, ErrorCode, &str)> = vec![
        ("truncated JSON", r#"{"id":"a1","type":"request","act"#.into(), ErrorCode::BadRequest, "malformed JSON"),
        ("100k nested [", nested.clone(), ErrorCode::BadRequest, "recursion limit"),
        ("not an object", "[1,2,3]".into(), ErrorCode::BadRequest, "not an envelope"),
        ("empty frame", String::new(), ErrorCode::BadRequest, "malformed JSON"),
        (
            "numeric id",
            json!({"id": 7, "type": "request", "action": "task.list"}).to_string(),
            ErrorCode::BadRequest,
            "not an envelope",
        ),
        (
            "unknown type",
            json!({"id": "a2", "type": "command", "action": "task.list"}).to_string(),
            ErrorCode::BadRequest,
            "not an envelope",
        ),
        (
            "response from a client",
            json!({"id": "a3", "type": "response", "action": "task.list"}).to_string(),
            ErrorCode::BadRequest,
            "requests only",
        ),
        (
            "missing id",
            json!({"type": "request", "action": "task.list"}).to_string(),
            ErrorCode::BadRequest,
            "needs an id",
        ),
        (
            "payload of the wrong type",
            request("a4", "message.add", json!("hi")),
            ErrorCode::BadRequest,
            "invalid payload",
        ),
        (
            "field of the wrong type",
            request("a5", "message.add", json!({"session_id": 5, "content": ["x"]})),
            ErrorCode::BadRequest,
            "invalid payload",
        ),
        (
            "negative since_seq (out of range: one code whatever the number)",
            request("a6", "session.subscribe", json!({"session_id": "sess-x", "since_seq": -1})),
            ErrorCode::ValidationError,
            "invalid payload",
        ),
        ("unknown action", request("a7", "task.explode", json!({})), ErrorCode::UnknownAction, "unknown action"),
        (
            "3 MiB message content",
            request("a8", "message.add", json!({"session_id": "sess-unknown", "content": huge})),
            ErrorCode::NotFound,
            "not found",
        ),
        (
            "3 MiB session id",
            request("a9", "task.session.status", json!({"session_id": huge})),
            ErrorCode::ValidationError,
            "not a valid id",
        ),
    ];
    for (name, frame, code, words) in &cases {
        ws.send(WsMessage::text(frame.clone())).await.expect("send");
        let error = error_of(&next_answer(&mut ws).await);
        assert_eq!(error.code, *code, "{name}: {error:?}");
        assert!(error.message.contains(words), "{name}: {}", error.message);
        assert!(
            error.message.len() < 1024,
            "{name}: the error does not echo the input ({} bytes)",
            error.message.len()
        );
    }

    // A binary frame is refused with an error.
    ws.send(WsMessage::binary(vec![0u8, 159, 146, 150])).await.expect("send");
    let error = error_of(&next_answer(&mut ws).await);
    assert!(error.message.contains("binary frames are not accepted"), "{}", error.message);

    // Duplicate ids: ids are the client's business; each request gets its own answer.
    ws.send(WsMessage::text(request("dup", "task.list", json!({})))).await.expect("send");
    ws.send(WsMessage::text(request("dup", "agent.list", json!({})))).await.expect("send");
    let mut actions = vec![next_answer(&mut ws).await, next_answer(&mut ws).await]
        .into_iter()
        .map(|answer| {
            assert_eq!((answer.id.as_deref(), answer.kind), (Some("dup"), MessageType::Response));
            answer.action
        })
        .collect::<Vec<_>>();
    actions.sort();
    assert_eq!(actions, vec!["agent.list", "task.list"]);

    // A frame just under the limit is read and answered.
    let big = request("b1", "task.explode", json!({"x": "y".repeat(MAX_FRAME_BYTES - 200)}));
    ws.send(WsMessage::text(big)).await.expect("send");
    assert_eq!(error_of(&next_answer(&mut ws).await).code, ErrorCode::UnknownAction);
    ws.send(WsMessage::text(request("b2", "task.list", json!({})))).await.expect("send");
    assert_eq!(next_answer(&mut ws).await.kind, MessageType::Response, "the connection still works");

    // Frames that end the connection, each with a close code that says why.
    let mut oversize = raw(&server.url_with_token()).await;
    let frame = request("o1", "task.list", json!({"x": "z".repeat(MAX_FRAME_BYTES)}));
    let _ = oversize.send(WsMessage::text(frame)).await;
    let close = next_envelope(&mut oversize).await.expect_err("an oversize frame closes the connection");
    assert_eq!(close.as_ref().map(|c| c.0), Some(CloseCode::Size), "{close:?}");

    let mut invalid = raw(&server.url_with_token()).await;
    let bytes = b"{\"id\":\"u1\",\"type\":\"request\",\"action\":\"task.list\",\"x\":\"\xff\xfe\"}".to_vec();
    let _ = invalid.send(WsMessage::Frame(Frame::message(bytes, OpCode::Data(Data::Text), true))).await;
    let close = next_envelope(&mut invalid).await.expect_err("invalid UTF-8 closes the connection");
    assert_eq!(close.as_ref().map(|c| c.0), Some(CloseCode::Invalid), "{close:?}");

    still_serving(&server).await;
    let latency = observer.finish().await;
    println!(
        "[hostile-client] malformed frames: {} error cases + binary + duplicate ids + {} byte frame answered; \
         oversize -> 1009, invalid UTF-8 -> 1007; {latency}",
        cases.len(),
        MAX_FRAME_BYTES - 200
    );
}

#[tokio::test]
async fn a_lone_surrogate_is_refused_with_the_requests_id() {
    let env = TestEnv::new();
    let server = env.start().await;
    let mut ws = raw(&server.url_with_token()).await;
    // Written by hand: a JSON library would not write an unpaired surrogate escape.
    let frame = r#"{"id":"ls1","type":"request","action":"message.add","payload":{"session_id":"sess-x","content":"a\ud800b"}}"#;
    ws.send(WsMessage::text(frame)).await.expect("send");
    let answer = next_answer(&mut ws).await;
    assert_eq!((answer.id.as_deref(), answer.action.as_str()), (Some("ls1"), "message.add"), "{answer:?}");
    assert_eq!(error_of(&answer).code, ErrorCode::BadRequest);
    ws.send(WsMessage::text(request("ls2", "task.list", json!({})))).await.expect("send");
    assert_eq!(next_answer(&mut ws).await.id.as_deref(), Some("ls2"), "the connection still works");
}

#[tokio::test]
async fn a_sequential_client_gets_5000_answers_and_no_refusal() {
    const REQUESTS: usize = 5_000;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let started = Instant::now();
    let mut tasks = 0;
    for i in 0..REQUESTS {
        // An honest script: one request after the other, each waiting for its answer. Every
        // hundredth creates a task (a write), the others read.
        if i % 100 == 0 {
            client.request(env.task(&format!("t{i}"), "", "mock", false)).await.unwrap_or_else(|e| panic!("{i}: {e}"));
            tasks += 1;
        } else if i % 2 == 0 {
            let listed = client.request(TaskListParams::default()).await.unwrap_or_else(|e| panic!("{i}: {e}"));
            assert_eq!(listed.tasks.len(), tasks);
        } else {
            client.request(AgentListParams {}).await.unwrap_or_else(|e| panic!("{i}: {e}"));
        }
    }
    let elapsed = started.elapsed();
    println!(
        "[hostile-client] sequential: {REQUESTS} requests ({tasks} task.create) one after the other in {elapsed:?} \
         ({:.0} requests/s), every one answered",
        REQUESTS as f64 / elapsed.as_secs_f64()
    );
}

#[tokio::test]
async fn a_pipelining_flood_is_slowed_not_refused_and_other_connections_stay_responsive() {
    // Requests padded to 16 KiB (unknown fields are ignored) so that the socket buffers between
    // client and server fill after a few hundred of them.
    const PAD: usize = 16 * 1024;
    const CAP: usize = 10_000;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    client.request(env.task("t", &"d".repeat(8 * 1024), "mock", false)).await.expect("task.create");
    let observer = Observer::start(&server).await;

    // The flood: a client with a small receive buffer that sends requests without reading.
    let address: std::net::SocketAddr = server.url.trim_start_matches("ws://").trim_end_matches("/ws").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let tcp = socket.connect(address).await.expect("connect");
    let (ws, _) = tokio_tungstenite::client_async(server.url_with_token(), tcp).await.expect("handshake");
    let (mut sink, mut stream) = ws.split();
    let pad = "p".repeat(PAD);
    let mut sent = 0;
    let blocked = loop {
        // Room to send is waited for with a bound: when it does not come, the server has
        // stopped reading this connection.
        let ready = futures_util::future::poll_fn(|cx| sink.poll_ready_unpin(cx));
        match tokio::time::timeout(Duration::from_secs(3), ready).await {
            Err(_) => break true,
            Ok(result) => result.expect("the connection stays open"),
        }
        if sent == CAP {
            break false;
        }
        let frame = request(&format!("r{sent}"), "task.list", json!({"pad": pad}));
        sink.start_send_unpin(WsMessage::text(frame)).expect("send");
        sent += 1;
    };
    assert!(blocked, "{CAP} requests of {PAD} bytes went in unanswered: the server never stopped reading");
    // Meanwhile another connection is answered.
    still_serving(&server).await;

    // Reading again: every request gets its answer, none an error.
    let writer = tokio::spawn(async move {
        sink.flush().await.expect("the rest of the flood goes out");
        sink
    });
    let (mut answered, mut ids) = (0usize, std::collections::HashSet::new());
    while ids.len() < sent {
        let frame = tokio::time::timeout(WAIT, stream.next()).await.expect("answers keep coming");
        let Some(Ok(WsMessage::Text(text))) = frame else { panic!("connection ended: {frame:?}") };
        let envelope: Envelope = serde_json::from_str(text.as_str()).expect("envelope");
        match envelope.kind {
            MessageType::Response => answered += 1,
            MessageType::Error => panic!("a request of the flood was refused: {:?}", error_of(&envelope)),
            _ => continue,
        }
        assert!(ids.insert(envelope.id.expect("answers echo the id")), "one answer per request");
    }
    let _sink = writer.await.expect("writer");
    assert_eq!(answered, sent);
    let latency = observer.finish().await;
    println!(
        "[hostile-client] flood: the server stopped reading after {sent} unanswered requests of {PAD} bytes \
         (sending blocked 3 s), then answered all {answered}, no error; {latency}"
    );
}

#[tokio::test]
async fn a_pipelining_client_that_stops_reading_gets_every_answer_or_a_close_frame() {
    // Answers of 64 KiB each (eight tasks of 8 KiB in every task.list), pipelined by a client
    // that then reads nothing for one and a half times the slow-client bound: far more than the
    // connection's outbox and the socket buffers hold. (The server then waits up to the bound
    // again for the client to read its close frame.)
    const REQUESTS: usize = 200;
    const BOUND_MS: u64 = 2000;
    let env = TestEnv::new();
    let server = env.start_with(&["--slow-client-ms", &BOUND_MS.to_string()]).await;
    let (client, _notes) = server.client().await;
    for i in 0..8 {
        client.request(env.task(&format!("t{i}"), &"d".repeat(8 * 1024), "mock", false)).await.expect("task.create");
    }
    let address: std::net::SocketAddr = server.url.trim_start_matches("ws://").trim_end_matches("/ws").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let tcp = socket.connect(address).await.expect("connect");
    let (mut ws, _) = tokio_tungstenite::client_async(server.url_with_token(), tcp).await.expect("handshake");
    for i in 0..REQUESTS {
        ws.feed(WsMessage::text(request(&format!("r{i}"), "task.list", json!({})))).await.expect("send");
    }
    ws.flush().await.expect("the requests go out");
    // The client's stall is the scenario under test, not a wait for something to happen.
    tokio::time::sleep(Duration::from_millis(3 * BOUND_MS / 2)).await;

    // Reading again: each answer once, then either all of them or a close frame saying why the
    // rest will not come. A connection left open with answers missing fails the read's bound.
    let mut ids = std::collections::HashSet::new();
    let close = loop {
        if ids.len() == REQUESTS {
            break None;
        }
        let frame = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap_or_else(|_| panic!("connection open, {} of {REQUESTS} answers came and no more", ids.len()));
        match frame {
            Some(Ok(WsMessage::Text(text))) => {
                let envelope: Envelope = serde_json::from_str(text.as_str()).expect("envelope");
                if envelope.kind == MessageType::Notification {
                    continue;
                }
                assert_eq!(envelope.kind, MessageType::Response, "{envelope:?}");
                assert!(ids.insert(envelope.id.expect("answers echo the id")), "one answer per request");
            }
            Some(Ok(WsMessage::Close(close))) => break Some(close.expect("a close frame says why")),
            Some(Ok(_)) => continue,
            other => panic!("connection ended without a close frame after {} answers: {other:?}", ids.len()),
        }
    };
    let close = close.expect("a client this slow is closed, not served");
    assert_eq!(close.code, CloseCode::Policy, "{close:?}");
    assert!(close.reason.contains("took no frame for 2s"), "{close:?}");
    still_serving(&server).await;
    println!(
        "[hostile-client] stalled pipeline: {} of {REQUESTS} answers delivered, then close {} {:?}",
        ids.len(),
        u16::from(close.code),
        close.reason.as_str()
    );
}

/// The descriptors `pid` holds on files of the database (`baton.db`, its `-wal` and `-shm`).
fn database_fds(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    entries
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.file_name().is_some_and(|name| name.to_string_lossy().starts_with("baton.db")))
        .count()
}

/// Sends `per_connection` pipelined reads on each of `connections` raw connections at once and
/// waits for every answer; returns how many were answered without an error.
async fn read_burst(server: &Server, session_id: &str, connections: usize, per_connection: usize) -> usize {
    let mut tasks = Vec::new();
    for c in 0..connections {
        let url = server.url_with_token();
        let session_id = session_id.to_string();
        tasks.push(tokio::spawn(async move {
            let mut ws = raw(&url).await;
            for i in 0..per_connection {
                let payload = json!({"session_id": session_id, "limit": 1000});
                ws.feed(WsMessage::text(request(&format!("c{c}r{i}"), "message.list", payload))).await.expect("send");
            }
            ws.flush().await.expect("send");
            let mut ok = 0;
            for _ in 0..per_connection {
                if next_answer(&mut ws).await.kind == MessageType::Response {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut answered = 0;
    for task in tasks {
        answered += task.await.expect("reader");
    }
    answered
}

#[tokio::test]
async fn a_burst_of_reads_leaves_few_database_descriptors_open() {
    const CONNECTIONS: usize = 16;
    const PER_CONNECTION: usize = 64;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    subscribe(&client, &session_id, None).await;
    run_turn(&client, &mut notes, &session_id, "/chunks 2000").await;
    let before = database_fds(server.pid);
    let answered = read_burst(&server, &session_id, CONNECTIONS, PER_CONNECTION).await;
    assert_eq!(answered, CONNECTIONS * PER_CONNECTION, "every read answered");
    let after = database_fds(server.pid);
    println!(
        "[hostile-client] read burst: {answered} concurrent message.list, database descriptors {before} -> {after}"
    );
    // The writer (the database, its log, the shared index) and at most 8 readers.
    assert!(after <= 3 + 3 * 8, "{after} descriptors on the database stay open after a burst of reads");
}

#[tokio::test]
async fn subscriptions_to_thousands_of_sessions_are_bounded() {
    const REAL: usize = 300;
    const UNKNOWN: usize = 1_700;
    let env = TestEnv::new();
    let server = env.start().await;
    // Real sessions, created over a few connections.
    let mut creators = Vec::new();
    for part in 0..6 {
        let (client, _) = server.client().await;
        let task = env.task("t", "", "mock", false);
        creators.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..REAL / 6 {
                let created = client.request(task.clone()).await.unwrap_or_else(|e| panic!("creator {part}: {e}"));
                ids.push(created.session.status.session_id);
            }
            ids
        }));
    }
    let mut sessions = Vec::new();
    for creator in creators {
        sessions.extend(creator.await.expect("creator"));
    }
    let observer = Observer::start(&server).await;
    let (client, _notes) = server.client().await;
    // Unknown sessions first (they take no place), then more real ones than the limit allows.
    let targets: Vec<String> =
        (0..UNKNOWN).map(|i| format!("sess-unknown{i}")).chain(sessions.iter().cloned()).collect();
    let (mut subscribed, mut over_limit, mut not_found) = (0, 0, 0);
    for session_id in &targets {
        match client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await {
            Ok(_) => subscribed += 1,
            Err(ClientError::Server(e)) if e.code == ErrorCode::Unavailable => {
                assert!(e.message.contains("at most 256 subscriptions"), "{e:?}");
                // Not a shutdown: it does not pass until the client unsubscribes.
                assert!(!e.retryable, "{e:?}");
                over_limit += 1;
            }
            Err(ClientError::Server(e)) if e.code == ErrorCode::NotFound => not_found += 1,
            other => panic!("unexpected answer to a subscription: {other:?}"),
        }
    }
    assert_eq!(subscribed, 256, "at most 256 subscriptions per connection");
    assert_eq!(over_limit, REAL - 256);
    assert_eq!(not_found, UNKNOWN);
    // Unsubscribing frees a place.
    client.request(UnsubscribeParams { session_id: sessions[0].clone() }).await.expect("unsubscribe");
    let room = SubscribeParams { session_id: sessions[REAL - 1].clone(), since_seq: None };
    client.request(room).await.expect("room for one more");
    still_serving(&server).await;
    let latency = observer.finish().await;
    println!(
        "[hostile-client] subscriptions: {} tried ({REAL} real, {UNKNOWN} unknown): {subscribed} accepted, {over_limit} \
         over the 256 limit, {not_found} NOT_FOUND; {latency}",
        targets.len()
    );
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_grow_server_memory() {
    const TURNS: usize = 2;
    const CHUNKS: usize = 10_000;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;

    // The hostile client subscribes from the start of the journal and never reads again.
    let mut stuck = raw(&server.url_with_token()).await;
    stuck
        .send(WsMessage::text(request("s1", "session.subscribe", json!({"session_id": session_id, "since_seq": 0}))))
        .await
        .expect("send");
    let observer = Observer::start(&server).await;
    let rss_before = memory_kib(server.pid, "VmRSS:");
    let started = Instant::now();
    let mut events = 0;
    for _ in 0..TURNS {
        client
            .request(MessageAddParams::new(session_id.clone(), format!("/chunks {CHUNKS}")))
            .await
            .expect("message.add");
        events += collect_events(&mut notes, &session_id, is_turn_end).await.len();
    }
    let elapsed = started.elapsed();
    let rss_after = memory_kib(server.pid, "VmRSS:");
    let peak = memory_kib(server.pid, "VmHWM:");
    let grown_mib = rss_after.saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 200, "the server grew by {grown_mib} MiB while a client did not read");
    still_serving(&server).await;
    let latency = observer.finish().await;
    drop(stuck);
    println!(
        "[hostile-client] never-reading client during {events} events in {elapsed:?} ({:.0} events/s to the reading \
         client): VmRSS {} -> {} MiB (+{grown_mib} MiB), peak {} MiB; {latency}",
        events as f64 / elapsed.as_secs_f64(),
        rss_before / 1024,
        rss_after / 1024,
        peak / 1024
    );
}

#[tokio::test]
async fn tokens_come_from_a_private_file_and_strangers_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    // Non-loopback without a token: refused, and the message says where the token is.
    let refused = batond_refuses(&env.data_dir, "0.0.0.0:0", &["--no-token"]).await;
    assert!(refused.contains("--no-token is refused") && refused.contains("/token"), "{refused}");

    // A token file others can read: refused with the fix in the message.
    let token_file = env.data_dir.join("token");
    std::fs::write(&token_file, "file-s3cret\n").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = batond_refuses(&env.data_dir, "127.0.0.1:0", &[]).await;
    assert!(refused.contains("chmod 600") && refused.contains("mode 644"), "{refused}");

    // A private one: a non-loopback listen starts, and only its token gets in.
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start_listening(&env.data_dir, "0.0.0.0:0", &[]).await;
    let url = server.url.replace("0.0.0.0", "127.0.0.1");
    let mut refusals = 0;
    for token in [None, Some("wrong"), Some("file-s3cre"), Some("file-s3cret-and-more"), Some("")] {
        let options = ClientOptions { token: token.map(str::to_owned), ..Default::default() };
        let error = Client::connect_with(&url, options).await.err().expect("refused");
        assert!(matches!(&error, ClientError::Connect(m) if m.contains("401")), "{token:?}: {error}");
        refusals += 1;
    }
    let options = ClientOptions { token: Some("file-s3cret".into()), ..Default::default() };
    let (client, _) = Client::connect_with(&url, options).await.expect("the file's token gets in");
    client.request(TaskListParams::default()).await.expect("answered");
    let (client, _) = Client::connect(&format!("{url}?token=file-s3cret")).await.expect("?token= gets in");
    client.request(TaskListParams::default()).await.expect("answered");

    // A page of another origin cannot open a session, even with the token.
    let mut request = format!("{url}?token=file-s3cret").into_client_request().unwrap();
    request.headers_mut().insert("origin", "https://evil.example".parse().unwrap());
    let refused = tokio_tungstenite::connect_async(request).await.expect_err("foreign origin refused");
    assert!(refused.to_string().contains("403"), "{refused}");
    assert!(client.request(TaskListParams::default()).await.unwrap().tasks.is_empty(), "nothing was created");

    // The flag wins over the file.
    server.stop().await;
    let server = env.start_with(&["--token", "flag-s3cret"]).await;
    let options = ClientOptions { token: Some("flag-s3cret".into()), ..Default::default() };
    Client::connect_with(&server.url, options).await.expect("the flag's token gets in");
    println!(
        "[hostile-client] tokens: non-loopback --no-token refused, 0644 token file refused, {refusals} bad tokens \
         -> 401, file token and ?token= accepted, foreign Origin -> 403, --token wins over the file"
    );
}

/// Every file under `root`, relative.
fn files_under(root: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn ids_aimed_at_the_file_system_are_refused_and_create_nothing() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let root = env.data_dir.parent().unwrap().to_path_buf();
    let before = files_under(&root);

    let hostile_ids =
        ["../../etc/passwd", "..", "../sess", "sessions/../../x", "/etc/passwd", "a\0b", "sess-1.jsonl", " ", ""];
    type Payload = fn(&str) -> Value;
    let actions: Vec<(&str, Payload)> = vec![
        ("task.session.status", |id| json!({"session_id": id})),
        ("task.session.resume", |id| json!({"session_id": id})),
        ("task.session.cancel", |id| json!({"session_id": id})),
        ("task.session.stop", |id| json!({"session_id": id})),
        ("message.add", |id| json!({"session_id": id, "content": "hi"})),
        ("message.list", |id| json!({"session_id": id})),
        ("session.subscribe", |id| json!({"session_id": id, "since_seq": 0})),
        ("session.unsubscribe", |id| json!({"session_id": id})),
        ("permission.respond", |id| json!({"session_id": id, "request_id": "p", "option_id": "o"})),
        ("task.session.start", |id| json!({"task_id": id})),
        ("task.session.list", |id| json!({"task_id": id})),
    ];
    let mut refused = 0;
    for id in hostile_ids {
        for (action, payload) in &actions {
            let error = client.request_raw(action, payload(id)).await.expect_err("refused");
            let error = error.server_error().unwrap_or_else(|| panic!("{action} {id:?}: {error}"));
            assert_eq!(error.code, ErrorCode::ValidationError, "{action} {id:?}: {error:?}");
            refused += 1;
        }
    }
    // A well-formed but unknown id is NOT_FOUND.
    let error = server_error(client.request(SessionStatusParams { session_id: "sess-0000".into() }).await);
    assert_eq!(error.code, ErrorCode::NotFound);
    // A permission answer with a hostile request id goes nowhere.
    let error = server_error(
        client
            .request(PermissionRespondParams {
                session_id: session_id.clone(),
                request_id: "../../x".into(),
                option_id: "allow".into(),
            })
            .await,
    );
    assert_eq!(error.code, ErrorCode::ValidationError);

    assert_eq!(files_under(&root), before, "no file was created or removed anywhere under the test dir");
    assert!(!std::path::Path::new("/etc/passwd.jsonl").exists());
    assert_eq!(prompt(&client, &mut notes, &session_id, "still fine?").await, "Echo: still fine?");
    println!(
        "[hostile-client] ids: {} hostile ids x {} actions = {refused} VALIDATION_ERROR, unknown id NOT_FOUND, \
         no file created",
        hostile_ids.len(),
        actions.len()
    );
}

/// The agent processes started by this test's server (children of its pid), from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
            fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(pid)
        })
        .collect()
}

/// The agents `parent` started: its children, or for a standalone agent under its guard
/// (`batond agent-guard`), the guard's children.
fn agents_of(parent: u32) -> Vec<u32> {
    let is_guard = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("agent-guard"))
    };
    children_of(parent)
        .into_iter()
        .flat_map(|child| if is_guard(&child) { children_of(child) } else { vec![child] })
        .collect()
}

#[tokio::test]
async fn no_request_can_choose_the_command_environment_or_directory() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let marker = env.workdir.join("pwned");
    let injected = format!("touch {}", marker.display());

    // Agents are registry names: a command line, a path or a shell snippet is an unknown agent.
    let mut refused = 0;
    for agent in ["/bin/sh", "sh", "../mock", "mock --state-dir /", injected.as_str(), "", "MOCK"] {
        let error = server_error(client.request(env.task("t", "", agent, true)).await);
        assert_eq!(error.code, ErrorCode::ValidationError, "{agent:?}: {error:?}");
        assert!(error.message.contains("unknown agent"), "{error:?}");
        refused += 1;
    }
    let created = client.request(env.task("t", "", "mock", false)).await.unwrap();
    let error = server_error(
        client
            .request(SessionStartParams {
                task_id: created.task.id.clone(),
                agent: Some("/bin/sh".into()),
                prompt: None,
            })
            .await,
    );
    assert_eq!(error.code, ErrorCode::ValidationError);
    refused += 1;

    // Working directories: absolute, existing, a directory, and outside the data dir.
    std::fs::write(env.workdir.join("file"), "x").unwrap();
    let link = env.workdir.join("link-to-data");
    std::os::unix::fs::symlink(&env.data_dir, &link).unwrap();
    let data_dir = env.data_dir.display().to_string();
    let bad_dirs = [
        "relative/dir".to_string(),
        "../..".to_string(),
        env.workdir.join("missing").display().to_string(),
        env.workdir.join("file").display().to_string(),
        data_dir.clone(),
        format!("{data_dir}/logs"),
        format!("{}/../data", env.workdir.display()),
        link.display().to_string(),
    ];
    for dir in &bad_dirs {
        for field in ["workdir", "repository"] {
            let mut task = json!({"title": "t", "agent": "mock", "start": false});
            task[field] = json!(dir);
            let error = client.request_raw("task.create", task).await.expect_err("refused");
            let error = error.server_error().unwrap_or_else(|| panic!("{field} {dir}: {error}"));
            assert_eq!(error.code, ErrorCode::ValidationError, "{field} {dir}: {error:?}");
            refused += 1;
        }
    }

    // Fields that would choose what runs are not part of the protocol: they change nothing.
    let task = json!({
        "title": "t", "description": "hi", "agent": "mock", "workdir": env.workdir.display().to_string(),
        "command": "sh", "args": ["-c", injected], "env": {"LD_PRELOAD": "/tmp/evil.so", "BATON_PWNED": "1"},
        "cwd": "/", "agent_command": "sh -c 'touch /tmp/x'",
    });
    let created: TaskCreateResult =
        serde_json::from_value(client.request_raw("task.create", task).await.unwrap()).unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    let agents = agents_of(server.pid);
    assert_eq!(agents.len(), 1, "one agent runs");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", agents[0])).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("mock-agent") && !cmdline.contains("touch"), "{cmdline}");
    let environ = String::from_utf8_lossy(&std::fs::read(format!("/proc/{}/environ", agents[0])).unwrap()).into_owned();
    assert!(!environ.contains("BATON_PWNED") && !environ.contains("evil.so"), "the request's env was not applied");
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", agents[0])).unwrap();
    assert_eq!(cwd, env.workdir.canonicalize().unwrap());
    assert!(!marker.exists(), "the injected command never ran");
    println!(
        "[hostile-client] command/env/dir: {refused} requests refused (agent names, directories), injected \
         command/args/env/cwd fields ignored: agent is `{}` in {}",
        cmdline.trim(),
        cwd.display()
    );
}

/// Runs `script` with bash as the user `nobody` (another local user); None, said on stdout, when
/// this process cannot switch users (not root, or no `setpriv`): the caller then skips.
fn as_nobody(script: &str) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("[hostile-client] other user: SKIPPED (switching to user nobody needs root)");
        return None;
    }
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "bash", "-c", script])
        .output();
    match output {
        Ok(output) => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
        Err(e) => {
            println!("[hostile-client] other user: SKIPPED (cannot run setpriv: {e})");
            None
        }
    }
}

/// A bash snippet that opens a WebSocket upgrade to `/ws{query}` and prints the status line.
fn upgrade_script(port: &str, query: &str) -> String {
    format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && printf 'GET /ws{query} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\
         Connection: Upgrade\\r\\nUpgrade: websocket\\r\\nSec-WebSocket-Version: 13\\r\\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n\\r\\n' >&3 && head -n1 <&3"
    )
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// Paths under `root` (not following symlinks, worktrees left out: they are the user's
/// checkouts) that group or others may use, with their modes.
fn open_to_others(root: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut open = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(metadata) = std::fs::symlink_metadata(&path) else { continue };
        if metadata.file_type().is_symlink() || path == root.join("worktrees") {
            continue;
        }
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            open.push(format!("{} {mode:03o}", path.display()));
        }
        if metadata.is_dir() {
            pending.extend(std::fs::read_dir(&path).into_iter().flatten().flatten().map(|entry| entry.path()));
        }
    }
    open
}

#[tokio::test]
async fn what_batond_creates_while_running_is_private_from_the_start() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    // A data dir batond creates itself, under the usual mask 022.
    let data_dir = env.data_dir.with_file_name("created-by-batond");
    let server = Server::start_configured(&data_dir, &[], |command| {
        // SAFETY: umask is async-signal-safe and only changes the new process.
        unsafe {
            command.pre_exec(|| {
                libc::umask(0o022);
                Ok(())
            });
        }
    })
    .await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let events = run_turn(&client, &mut notes, &session_id, "/write made-by-the-agent.txt hi").await;
    assert!(agent_text(&events).contains("Wrote"), "{events:?}");

    for created in ["logs", "agent-logs", "batond.url", "batond.lock", "baton.db", "token"] {
        assert!(data_dir.join(created).exists(), "{created} was created");
    }
    let open = open_to_others(&data_dir);
    assert!(open.is_empty(), "created open to others while running: {open:?}");
    // What the agent writes in its working directory is the user's, under the user's mask.
    assert_eq!(mode_of(&env.workdir.join("made-by-the-agent.txt")), 0o644);

    // So the next start has nothing to make private, and says nothing about it.
    let server = server.restart().await;
    let (client, _notes) = server.client().await;
    client.request(TaskListParams::default()).await.expect("task.list after the restart");
    let mut logs = String::new();
    for entry in std::fs::read_dir(data_dir.join("logs")).into_iter().flatten().flatten() {
        logs.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    assert!(logs.contains("batond listening"), "the logs are read: {logs}");
    assert!(!logs.contains("entries private"), "a start made entries private: {logs}");
}

#[tokio::test]
async fn another_local_user_can_neither_connect_nor_read_the_data_dir() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    // Only the data dir's own modes protect it: its parent is open to everyone.
    let root = env.data_dir.parent().unwrap();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A data dir an older batond left open: fixed at start, with a log line.
    std::fs::set_permissions(&env.data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sessions = env.data_dir.join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(sessions.join("old.jsonl"), "{}\n").unwrap();
    std::fs::set_permissions(sessions.join("old.jsonl"), std::fs::Permissions::from_mode(0o644)).unwrap();

    let server = env.start().await;
    wait_log(&env.data_dir, "made 3 entries private").await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "a secret conversation").await;
    let history = sessions.join("old.jsonl");
    let mut checked = vec![
        (env.data_dir.clone(), 0o700),
        (sessions.clone(), 0o700),
        (history.clone(), 0o600),
        (env.data_dir.join("token"), 0o600),
        (env.data_dir.join("baton.db"), 0o600),
    ];
    for extra in ["baton.db-wal", "baton.db-shm"] {
        if env.data_dir.join(extra).exists() {
            checked.push((env.data_dir.join(extra), 0o600));
        }
    }
    for (path, mode) in &checked {
        assert_eq!(mode_of(path), *mode, "{}", path.display());
    }

    // Another user: cannot read the token, the database or the conversations, and cannot
    // connect without the token, loopback or not.
    let port = server.url.rsplit(':').next().and_then(|p| p.split('/').next()).unwrap().to_string();
    let data = env.data_dir.display();
    let script = format!(
        "cat '{data}/token' && echo READ-TOKEN; cat '{data}/baton.db' >/dev/null && echo READ-DB; \
         cat '{}' && echo READ-HISTORY; ls '{data}' && echo LISTED; {}",
        history.display(),
        upgrade_script(&port, "")
    );
    let Some(said) = as_nobody(&script) else { return };
    for leak in ["READ-TOKEN", "READ-DB", "READ-HISTORY", "LISTED", "{}"] {
        assert!(!said.contains(leak), "user nobody got through: {said}");
    }
    assert!(said.contains("HTTP/1.1 401"), "user nobody without the token: {said}");
    // The same user with the token gets in: the refusal above is the token, not the script.
    let token = server.token.clone().expect("token");
    let with_token = as_nobody(&upgrade_script(&port, &format!("?token={token}"))).unwrap_or_default();
    assert!(with_token.starts_with("HTTP/1.1 101"), "user nobody with the token: {with_token}");
    assert!(client.request(TaskListParams::default()).await.unwrap().tasks.len() == 1, "nothing was created");
    let _ = session_id;
    println!(
        "[hostile-client] other user (nobody): token, baton.db, history unreadable, data dir unlistable, \
         upgrade without token -> 401 (with it -> 101); {} entries checked 0700/0600; 0755/0644 data dir fixed at start",
        checked.len()
    );
}

#[tokio::test]
async fn batons_own_variables_do_not_reach_agents() {
    for runtime in ["standalone", "hosted"] {
        let env = TestEnv::new();
        let server = Server::start_configured(&env.data_dir, &["--agent-runtime", runtime], |command| {
            command.env("BATON_TOKEN", "env-s3cret-token").env("BATON_SERVER", "ws://elsewhere/ws");
        })
        .await;
        let options = ClientOptions { token: Some("env-s3cret-token".into()), ..Default::default() };
        let (client, mut notes) = Client::connect_with(&server.url, options).await.expect("BATON_TOKEN is the token");
        started_session(&env, &client, &mut notes, "mock", "hi").await;
        // The agent's parent: batond, or the agent host for a hosted agent.
        let parent = if runtime == "hosted" {
            let info: Value =
                serde_json::from_str(&std::fs::read_to_string(env.data_dir.join("agentctl.json")).unwrap()).unwrap();
            info["pid"].as_u64().expect("the host's pid") as u32
        } else {
            server.pid
        };
        let agents = agents_of(parent);
        assert_eq!(agents.len(), 1, "{runtime}: one agent runs");
        let environ = String::from_utf8_lossy(&std::fs::read(format!("/proc/{}/environ", agents[0])).unwrap())
            .replace('\0', "\n");
        // Only the tree marker is Baton's to set: it names the execution, it carries no secret.
        let marker = format!("{}=", baton_server::agent::runtime::TREE_MARKER_ENV);
        let own: Vec<&str> =
            environ.lines().filter(|line| line.starts_with("BATON_") && !line.starts_with(&marker)).collect();
        assert!(!environ.contains("env-s3cret-token") && own.is_empty(), "{runtime}: {own:?} in {environ}");
        assert!(environ.contains("PATH="), "{runtime}: the rest of the environment is kept");
        server.stop().await;
    }
    println!("[hostile-client] environment: BATON_TOKEN and BATON_* reach no agent (standalone and hosted)");
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|dir| dir.count()).unwrap_or(0)
}

/// A local process opening connections and sending nothing must not use up batond's file
/// descriptors (and with them its ability to start agents). Beyond the bound, the oldest idle
/// connection is closed; connections that showed their token do not count, and a client that
/// sends its request at once still gets through while the idle ones wait.
#[tokio::test]
async fn idle_connections_without_a_request_cannot_use_up_the_servers_descriptors() {
    use tokio::io::AsyncReadExt;
    const BOUND: usize = 16;
    const IDLE: usize = 200;
    let env = TestEnv::new();
    let server = env.start_with(&["--max-unauthenticated", &BOUND.to_string()]).await;
    let (client, _notes) = server.client().await;
    client.request(TaskListParams::default()).await.expect("answered");
    let before = open_descriptors(server.pid);

    let address = server.listen_addr();
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(&address).await.expect("connect"));
    }
    // The oldest are closed by the server (well before the 10 s head timeout would close all).
    for (i, connection) in idle.iter_mut().take(IDLE - BOUND).enumerate() {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(WAIT, connection.read(&mut byte)).await;
        let read = read.unwrap_or_else(|_| panic!("idle connection {i} was never closed"));
        assert!(matches!(read, Ok(0) | Err(_)), "idle connection {i} got bytes: {read:?}");
    }
    // The newest are still open: they have had no time to time out.
    let mut open = 0;
    for connection in &idle[IDLE - BOUND..] {
        let mut byte = [0u8; 1];
        if matches!(connection.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            open += 1;
        }
    }
    assert_eq!(open, BOUND, "the newest {BOUND} idle connections wait for their request");
    let during = open_descriptors(server.pid);
    assert!(
        during <= before + BOUND + 4,
        "batond holds {during} descriptors with {IDLE} idle connections open (was {before}, bound {BOUND})"
    );
    // The connection that showed its token is untouched, and a new client gets through.
    client.request(TaskListParams::default()).await.expect("the authenticated connection still works");
    still_serving(&server).await;
    println!(
        "[hostile-client] idle connections: {IDLE} opened without a request, {} closed oldest first, {open} left \
         waiting; batond descriptors {before} -> {during} (bound {BOUND}); authenticated and new clients answered",
        IDLE - BOUND
    );
}
