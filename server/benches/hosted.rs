//! Benchmarks of the `hosted` runtime (docs/HOSTED.md), next to `standalone` on the same
//! machine: a real `batond`, the real agent host and mock agent processes, the typed client over
//! loopback. Run with `bench/run.sh` or `cargo bench -p baton-server --bench hosted`.
//! `BATON_BENCH_QUICK=1` streams fewer chunks. Rows go to stdout as `| figure | measured | target
//! | status |`; progress to stderr.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;

async fn start_with(data_dir: &Path, runtime: &str) -> Server {
    start(data_dir, &["--agent-runtime", runtime, "--agentctl-grace-ms", "500"]).await
}

async fn session(client: &Client, notes: &mut Notifications, workdir: &Path) -> String {
    let mut params = TaskCreateParams::new("bench", "hi", "mock");
    params.workdir = Some(workdir.to_string_lossy().into_owned());
    let session_id = client.request(params).await.expect("task.create").session.status.session_id;
    client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    wait_event(notes, |n| is_turn_end(n, &session_id)).await;
    wait_event(notes, |n| is_waiting(n, &session_id)).await;
    session_id
}

/// Events per second of one `/chunks N` turn, as the subscribed client receives them.
async fn throughput(dir: &Path, workdir: &Path, runtime: &str, chunks: u64) -> f64 {
    let server = start_with(&dir.join(format!("throughput-{runtime}")), runtime).await;
    let (client, mut notes) = server.client().await;
    let session_id = session(&client, &mut notes, workdir).await;
    let rate = baton_testkit::chunks_rate(&client, &mut notes, &session_id, chunks, WAIT).await;
    client.request(SessionStopParams { session_id }).await.expect("stop");
    drop(client);
    stop(server).await;
    rate
}

/// kill -9 of batond mid-turn, then the time from starting a new batond until the session
/// reports its agent running (hosted: reattached; standalone: resumed and WAITING_FOR_INPUT).
async fn back_after_kill(dir: &Path, workdir: &Path, runtime: &str) -> Duration {
    let data_dir = dir.join(format!("restart-{runtime}"));
    let server = start_with(&data_dir, runtime).await;
    let (client, mut notes) = server.client().await;
    let session_id = session(&client, &mut notes, workdir).await;
    client.request(MessageAddParams::new(session_id.clone(), "/slow 100")).await.expect("message.add");
    wait_event(
        &mut notes,
        |n| matches!(n, Notification::Event(r) if matches!(r.event, SessionEvent::MessageChunk { .. })),
    )
    .await;
    drop(client);
    server.kill9().await;

    let started = Instant::now();
    let server = start_with(&data_dir, runtime).await;
    let (client, mut notes) = server.client().await;
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.expect("status");
    if !status.is_agent_running {
        client
            .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
            .await
            .expect("resume");
        wait_event(
            &mut notes,
            |n| matches!(n, Notification::StateChanged(c) if c.session_id == session_id && c.state == SessionState::WaitingForInput),
        )
        .await;
    }
    let elapsed = started.elapsed();
    client.request(SessionStopParams { session_id }).await.expect("stop");
    drop(client);
    stop(server).await;
    elapsed
}

async fn stop(server: Server) {
    server.stop().await;
}

fn row(figure: &str, measured: String) {
    println!("| {figure} | {measured} | - | - |");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var("BATON_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let chunks = if quick { 5_000 } else { 50_000 };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).expect("workdir");
        for kind in ["standalone", "hosted"] {
            eprintln!("hosted bench: {kind} throughput, {chunks} chunks");
            let rate = throughput(dir.path(), &workdir, kind, chunks).await;
            row(&format!("H1. throughput, {chunks} chunks -> 1 client, {kind} agent"), format!("{rate:.0} events/s"));
        }
        for kind in ["standalone", "hosted"] {
            eprintln!("hosted bench: {kind} back after kill -9");
            let elapsed = back_after_kill(dir.path(), &workdir, kind).await;
            let how = if kind == "hosted" { "reattached, turn still streaming" } else { "resumed" };
            row(
                &format!("H2. kill -9 mid-turn -> new batond to agent running ({how}), {kind}"),
                format!("{} ms", elapsed.as_millis()),
            );
        }
    });
}
