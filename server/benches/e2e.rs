//! End-to-end figures with a real batond and the real mock agent (`cargo bench -p baton-server`):
//! - events per second from the agent to one subscribed client;
//! - time from `task.session.resume` to WAITING_FOR_INPUT after a restart;
//! - time from `message.add` right after a restart to the first streamed chunk.
//!
//! Set BATON_BENCH_RUNS to change the number of restart runs (default 100).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use baton_protocol::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const WAIT: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    url: String,
}

async fn start(data_dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_batond"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("BATON_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn batond");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line()).await.expect("listen line").expect("read").expect("line");
    let url = line.rsplit(' ').next().expect("url").to_string();
    Server { child, url }
}

async fn kill9(mut server: Server) {
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
}

async fn wait_event(notes: &mut Notifications, pick: impl Fn(&Notification) -> bool) {
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(n) if pick(n) => Some(()),
            _ => None,
        })
        .await
        .expect("event");
}

fn is_turn_end(n: &Notification) -> bool {
    matches!(n, Notification::Event(EventRecord { event: SessionEvent::TurnCompleted { .. }, .. }))
}

fn is_waiting(n: &Notification, session_id: &str) -> bool {
    matches!(n, Notification::StateChanged(c) if c.session_id == session_id && c.state == SessionState::WaitingForInput)
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{name}: n={} median={:.1} ms p99={:.1} ms min={:.1} ms max={:.1} ms",
        samples.len(),
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}

async fn create_session(client: &Client, notes: &mut Notifications, workdir: &Path, description: &str) -> String {
    let mut params = TaskCreateParams::new("bench", description, "mock");
    params.workdir = Some(workdir.to_string_lossy().into_owned());
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id;
    let id = session_id.clone();
    wait_event(notes, move |n| is_waiting(n, &id)).await;
    session_id
}

async fn events_per_second(data_dir: &Path, workdir: &Path) {
    let server = start(data_dir).await;
    let (client, mut notes) = Client::connect(&server.url).await.expect("connect");
    let session_id = create_session(&client, &mut notes, workdir, "hi").await;
    client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    for chunks in [20_000u32, 20_000, 20_000] {
        let started = Instant::now();
        client
            .request(MessageAddParams { session_id: session_id.clone(), content: format!("/chunks {chunks}") })
            .await
            .expect("message.add");
        let mut events = 0u64;
        notes
            .wait_for(WAIT, |e| match e {
                ClientEvent::Notification(n @ Notification::Event(_)) => {
                    events += 1;
                    is_turn_end(n).then_some(())
                }
                _ => None,
            })
            .await
            .expect("turn end");
        let elapsed = started.elapsed();
        println!(
            "events to one subscriber: {events} events in {:.0} ms = {:.0} events/s",
            elapsed.as_secs_f64() * 1e3,
            events as f64 / elapsed.as_secs_f64()
        );
        let id = session_id.clone();
        wait_event(&mut notes, move |n| is_waiting(n, &id)).await;
    }
    kill9(server).await;
}

async fn restart_latencies(data_dir: &Path, workdir: &Path, runs: usize) {
    let server = start(data_dir).await;
    let (client, mut notes) = Client::connect(&server.url).await.expect("connect");
    let session_id = create_session(&client, &mut notes, workdir, "remember pineapple").await;
    drop(client);
    let mut server = Some(server);
    let mut to_waiting = Vec::with_capacity(runs);
    let mut to_first_chunk = Vec::with_capacity(runs);
    for run in 0..runs * 2 {
        kill9(server.take().expect("server")).await;
        let restarted = start(data_dir).await;
        let (client, mut notes) = Client::connect(&restarted.url).await.expect("connect");
        if run % 2 == 0 {
            let started = Instant::now();
            client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false }).await.expect("resume");
            let id = session_id.clone();
            wait_event(&mut notes, move |n| is_waiting(n, &id)).await;
            to_waiting.push(started.elapsed());
        } else {
            client
                .request(SubscribeParams { session_id: session_id.clone(), since_seq: None })
                .await
                .expect("subscribe");
            let started = Instant::now();
            let sender = client.clone();
            let id = session_id.clone();
            let add = tokio::spawn(async move {
                sender
                    .request(MessageAddParams { session_id: id, content: "what did I ask you to remember?".into() })
                    .await
            });
            wait_event(&mut notes, |n| {
                matches!(n, Notification::Event(EventRecord { event: SessionEvent::MessageChunk { .. }, .. }))
            })
            .await;
            to_first_chunk.push(started.elapsed());
            add.await.expect("join").expect("message.add");
            wait_event(&mut notes, is_turn_end).await;
        }
        server = Some(restarted);
    }
    if let Some(server) = server {
        kill9(server).await;
    }
    summary("task.session.resume -> WAITING_FOR_INPUT after a restart", to_waiting);
    summary("message.add after a restart -> first streamed chunk", to_first_chunk);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = std::env::var("BATON_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(100);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).expect("workdir");
        events_per_second(&dir.path().join("events"), &workdir).await;
        restart_latencies(&dir.path().join("restarts"), &workdir, runs).await;
    });
}
