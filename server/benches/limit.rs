//! The limit of streaming on this machine, next to batond: a minimal program that does the same
//! work per event with no architecture around it, and batond, run in interleaved rounds and read
//! by the same plain client.
//!
//! The minimal program: the mock agent streams `/chunks N`; one reader parses each line into a
//! typed struct; one SQLite writer (WAL, `synchronous = FULL`, a table shaped like
//! `session_events`) commits whatever is queued as one batch; each committed batch is
//! serialised once and written to every WebSocket with one flush. batond: the same mock agent,
//! a task and a subscription per client. The client counts `session.event` frames up to the
//! turn's end.
//!
//! Prints `| figure | measured | target | status |` rows (see bench/run.sh): the median rate of
//! each over the rounds, and batond's rate over the limit's (target ≥ 2/3: within 1.5×).
//! BATON_BENCH_QUICK=1 runs fewer chunks and rounds; BATON_BENCH_ONLY must name `streaming` or
//! be empty for it to run.

mod common;

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::{Message as WsMessage, Utf8Bytes};

struct Params {
    chunks: usize,
    clients: usize,
    rounds: usize,
}

fn params() -> Params {
    let quick = std::env::var("BATON_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    if quick {
        Params { chunks: 50_000, clients: 10, rounds: 3 }
    } else {
        Params { chunks: 200_000, clients: 10, rounds: 8 }
    }
}

fn batond_path() -> std::ffi::OsString {
    std::env::var_os("BATON_BENCH_BATOND").unwrap_or_else(|| env!("CARGO_BIN_EXE_batond").into())
}

// --- The client both are read with -----------------------------------------------------------

/// Connects a plain client; `subscribe` is sent first when given. Returns once connected; the
/// task it spawns counts `session.event` frames until the turn ends and returns how many.
async fn plain_client(url: String, subscribe: Option<String>) -> tokio::task::JoinHandle<u64> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str()).await.expect("connect");
    if let Some(frame) = subscribe {
        ws.send(WsMessage::text(frame)).await.expect("subscribe");
        // Subscribed once its answer (id "s") is in.
        loop {
            match ws.next().await {
                Some(Ok(WsMessage::Text(text))) if text.contains("\"id\":\"s\"") => break,
                Some(Ok(_)) => continue,
                other => panic!("no answer to the subscription: {other:?}"),
            }
        }
    }
    tokio::spawn(async move {
        let mut events = 0u64;
        while let Some(Ok(frame)) = ws.next().await {
            let WsMessage::Text(text) = frame else { continue };
            if text.contains("\"action\":\"session.event\"") {
                events += 1;
                if text.contains("\"turn_completed\"") {
                    break;
                }
            }
        }
        events
    })
}

// --- The minimal program ---------------------------------------------------------------------

/// A line of the agent, typed: only what a chunk needs is read, text borrowed when it can be.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<UpdateParams<'a>>,
    #[serde(default)]
    id: Option<u64>,
}

#[derive(Deserialize)]
struct UpdateParams<'a> {
    #[serde(borrow)]
    update: Option<Update<'a>>,
}

#[derive(Deserialize)]
struct Update<'a> {
    #[serde(rename = "sessionUpdate", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    content: Option<Content<'a>>,
    #[serde(rename = "messageId", borrow, default)]
    message_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    text: Cow<'a, str>,
}

// Events are moved, not boxed: the bench measures the server, not an allocation per event.
#[allow(clippy::large_enum_variant)]
enum Job {
    Event(SessionEvent),
    Stop,
}

/// The writer: group commit of what is queued, then one serialised batch to every connection.
fn limit_writer(db: &Path, jobs: std::sync::mpsc::Receiver<Job>, out: broadcast::Sender<Arc<Vec<Utf8Bytes>>>) {
    let conn = rusqlite::Connection::open(db).expect("open");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE session_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
             payload TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;",
    )
    .expect("schema");
    let session_id = "sess-limit".to_string();
    let mut seq = 0u64;
    let mut stop = false;
    while !stop {
        let Ok(first) = jobs.recv() else { break };
        let mut batch = vec![first];
        while batch.len() < 512 {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let tx = conn.unchecked_transaction().expect("begin");
        let mut records = Vec::with_capacity(batch.len());
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)")
                .expect("prepare");
            for job in batch {
                let event = match job {
                    Job::Event(event) => event,
                    Job::Stop => {
                        stop = true;
                        continue;
                    }
                };
                seq += 1;
                let created_at = now_timestamp();
                let payload = serde_json::to_string(&event).expect("json");
                insert
                    .execute(rusqlite::params![session_id, seq as i64, event.kind(), payload, created_at])
                    .expect("insert");
                records.push(EventRecord { session_id: session_id.clone(), seq, event, created_at });
            }
        }
        tx.commit().expect("commit");
        let frames: Vec<Utf8Bytes> =
            records.into_iter().map(|record| Utf8Bytes::from(Notification::Event(record).to_json())).collect();
        let _ = out.send(Arc::new(frames));
    }
}

/// One run of the minimal program to `clients` clients; events per second of each client.
async fn limit_run(dir: &Path, chunks: usize, clients: usize) -> (Vec<f64>, Duration) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let (out, _) = broadcast::channel::<Arc<Vec<Utf8Bytes>>>(4096);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("ws://{}/", listener.local_addr().expect("address"));
    let fan_out = out.clone();
    let acceptor = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let _ = stream.set_nodelay(true);
            let mut batches = fan_out.subscribe();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
                while let Ok(batch) = batches.recv().await {
                    for frame in batch.iter() {
                        if ws.feed(WsMessage::Text(frame.clone())).await.is_err() {
                            return;
                        }
                    }
                    if ws.flush().await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut readers = Vec::new();
    for _ in 0..clients {
        readers.push(plain_client(url.clone(), None).await);
    }
    // Every connection subscribes to the fan-out once its handshake is done: wait for it.
    while out.receiver_count() < clients {
        tokio::task::yield_now().await;
    }
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    let db = dir.join("limit.db");
    let writer_out = out.clone();
    let writer = std::thread::spawn(move || limit_writer(&db, queue, writer_out));

    let mut agent = Command::new(batond_path())
        .args(["mock-agent", "--state-dir"])
        .arg(dir.join("mock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the mock agent");
    let mut to_agent = agent.stdin.take().expect("stdin");
    let from_agent = agent.stdout.take().expect("stdout");
    let cpu_before = cpu_time(std::process::id());
    let started = Instant::now();
    let reader = std::thread::spawn({
        let cwd = dir.display().to_string();
        let prompt = format!("/chunks {chunks}");
        move || {
            let mut lines = BufReader::new(from_agent);
            let mut line = String::new();
            let send = |to: &mut std::process::ChildStdin, text: String| {
                to.write_all(text.as_bytes())
                    .and_then(|_| to.write_all(b"\n"))
                    .and_then(|_| to.flush())
                    .expect("write");
            };
            send(&mut to_agent, serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}).to_string());
            let mut session = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line).expect("read") == 0 {
                    panic!("the mock agent ended");
                }
                let parsed: Line<'_> = serde_json::from_str(&line).expect("a JSON-RPC line");
                match parsed.id {
                    Some(1) if parsed.method.is_none() => send(
                        &mut to_agent,
                        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}).to_string(),
                    ),
                    Some(2) if parsed.method.is_none() => {
                        let value: serde_json::Value = serde_json::from_str(&line).expect("json");
                        session = value["result"]["sessionId"].as_str().expect("sessionId").to_string();
                        jobs.send(Job::Event(SessionEvent::TurnStarted { turn_id: None })).expect("queue");
                        send(
                            &mut to_agent,
                            serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}}).to_string(),
                        );
                    }
                    Some(3) if parsed.method.is_none() => {
                        jobs.send(Job::Event(SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None })).expect("queue");
                        jobs.send(Job::Stop).expect("queue");
                        return session;
                    }
                    _ => {
                        let update = parsed.params.and_then(|p| p.update);
                        if let Some(update) = update.filter(|u| u.kind == "agent_message_chunk") {
                            let text = update.content.map(|c| c.text.into_owned()).unwrap_or_default();
                            let message_id = update.message_id.map(Cow::into_owned);
                            jobs.send(Job::Event(SessionEvent::MessageChunk { message_id, text })).expect("queue");
                        }
                    }
                }
            }
        }
    });
    let mut rates = Vec::new();
    for client in readers {
        let events = client.await.expect("client");
        rates.push(events as f64 / started.elapsed().as_secs_f64());
    }
    let cpu = cpu_time(std::process::id()).saturating_sub(cpu_before);
    reader.join().expect("reader");
    writer.join().expect("writer");
    let _ = agent.kill();
    let _ = agent.wait();
    acceptor.abort();
    (rates, cpu)
}

// --- batond, read by the same client ---------------------------------------------------------

/// One run of batond to `clients` clients; events per second of each client, batond's CPU.
async fn batond_run(
    server: &Server,
    control: &Client,
    session_id: &str,
    chunks: usize,
    clients: usize,
) -> (Vec<f64>, Duration) {
    let url = match &server.token {
        Some(token) => format!("{}?token={token}", server.url),
        None => server.url.clone(),
    };
    let subscribe = serde_json::json!({"id": "s", "type": "request", "action": "session.subscribe", "payload": {"session_id": session_id}}).to_string();
    let mut readers = Vec::new();
    for _ in 0..clients {
        readers.push(plain_client(url.clone(), Some(subscribe.clone())).await);
    }
    let cpu_before = cpu_time(server.pid);
    let started = Instant::now();
    let content = format!("/chunks {chunks}");
    control.request(MessageAddParams::new(session_id, content)).await.expect("message.add");
    let mut rates = Vec::new();
    for client in readers {
        let events = client.await.expect("client");
        rates.push(events as f64 / started.elapsed().as_secs_f64());
    }
    (rates, cpu_time(server.pid).saturating_sub(cpu_before))
}

async fn wait_ready(control: &Client, session_id: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let status = control.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status");
        if status.state == SessionState::WaitingForInput {
            return;
        }
        assert!(Instant::now() < deadline, "the session did not wait for input again: {status:?}");
        // A benchmark's poll between runs, outside what is measured.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until batond does nothing (its CPU time stays put for 50 ms, at most 5 s): work it
/// queued after the turn's end (joining and indexing the answer) is not left to run during the
/// limit's round that follows.
async fn settle(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = cpu_time(pid);
    while Instant::now() < deadline {
        // A benchmark's poll between runs, outside what is measured.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = cpu_time(pid);
        if now == last {
            return;
        }
        last = now;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn main() {
    let only = std::env::var("BATON_BENCH_ONLY").unwrap_or_default();
    if !only.is_empty() && !only.split(',').any(|g| g.trim() == "streaming") {
        return;
    }
    let p = params();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = start(&dir.path().join("batond"), &[]).await;
        let (control, mut notes) = server.client().await;
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).expect("workdir");
        let mut task = TaskCreateParams::new("limit", "hi", "mock");
        task.workdir = Some(workdir.display().to_string());
        task.start = true;
        let created = control.request(task).await.expect("task.create");
        let session_id = created.session.status.session_id;
        control.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
        wait_event(&mut notes, |n| is_waiting(n, &session_id)).await;
        control.request(UnsubscribeParams { session_id: session_id.clone() }).await.expect("unsubscribe");
        let _notes = notes;

        type Row = (usize, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
        let mut table: Vec<Row> = Vec::new();
        for clients in [1, p.clients] {
            let (mut limit_rates, mut batond_rates, mut limit_cpu, mut batond_cpu) = (vec![], vec![], vec![], vec![]);
            for round in 0..p.rounds {
                eprintln!("limit vs batond: {} chunks to {clients} client(s), round {}/{}", p.chunks, round + 1, p.rounds);
                let (rates, cpu) = limit_run(&dir.path().join("limit"), p.chunks, clients).await;
                limit_rates.push(min(&rates));
                limit_cpu.push(cpu.as_secs_f64() * 1e6 / p.chunks as f64);
                let (rates, cpu) = batond_run(&server, &control, &session_id, p.chunks, clients).await;
                batond_rates.push(min(&rates));
                batond_cpu.push(cpu.as_secs_f64() * 1e6 / p.chunks as f64);
                // The clients saw the turn end; the next prompt waits for the session to be ready.
                wait_ready(&control, &session_id).await;
                settle(server.pid).await;
            }
            table.push((clients, limit_rates, batond_rates, limit_cpu, batond_cpu));
        }
        for (clients, limit_rates, batond_rates, limit_cpu, batond_cpu) in table {
            let (limit, batond) = (median(limit_rates), median(batond_rates));
            let ratio = batond / limit;
            let who = if clients == 1 { "1 client".to_string() } else { format!("slowest of {clients} clients") };
            println!(
                "| 3L. streaming {} chunks, {who}, median of {} interleaved rounds: batond / limit (same plain client) | batond {batond:.0} events/s, limit {limit:.0} events/s: {ratio:.2} (CPU per event: batond {:.1} µs, limit program incl. its clients {:.1} µs) | ≥ 0.67 | {} |",
                p.chunks,
                p.rounds,
                median(batond_cpu),
                median(limit_cpu),
                if ratio >= 2.0 / 3.0 { "ok" } else { "MISS" }
            );
        }
        server.stop().await;
    });
}
