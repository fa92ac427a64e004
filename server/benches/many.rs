//! Many agents at a steady rate: N mock agents (standalone, each its own process) each stream
//! `/paced RATE/N COUNT` at once, so that batond takes 5,000 events/s in total trickling in from
//! every agent; one client is subscribed to every session. Reports the events/s reached, the
//! latency from the agent's write to the client's receipt (each chunk carries its write time),
//! and batond's CPU per event (user + system, from /proc), for N = 10 and 200 (BATON_BENCH_AGENTS
//! gives others, comma-separated).
//!
//! `cargo bench -p baton-server --bench many` prints `| figure | measured | target | status |`.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_protocol::*;
use common::*;

const TOTAL_RATE: u64 = 5000;
const SECONDS: u64 = 4;

fn pick(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

async fn run(agents: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = start(&dir.path().join("data"), &[]).await;
    let (client, mut notes) = server.client().await;
    eprintln!("{agents} agents: starting");
    let mut sessions = Vec::new();
    for _ in 0..agents {
        let mut params = TaskCreateParams::new("many", "", "mock");
        params.workdir = Some(workdir.display().to_string());
        let created = client.request(params).await.expect("task.create");
        sessions.push(created.session.status.session_id);
    }
    let mut waiting = std::collections::HashSet::new();
    notes
        .wait_for(WAIT, |e| {
            if let ClientEvent::Notification(Notification::StateChanged(c)) = e {
                if c.state == SessionState::WaitingForInput {
                    waiting.insert(c.session_id.clone());
                }
            }
            (waiting.len() == agents).then_some(())
        })
        .await
        .expect("every agent ready");
    for session_id in &sessions {
        client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    }
    let rate = (TOTAL_RATE / agents as u64).max(1);
    let count = rate * SECONDS;
    let cpu_before = cpu_time(server.pid);
    let started = Instant::now();
    for session_id in &sessions {
        let content = format!("/paced {rate} {count}");
        client.request(MessageAddParams::new(session_id.clone(), content)).await.expect("message.add");
    }
    let mut delays = Vec::with_capacity((count as usize) * agents);
    let mut ended = 0;
    notes
        .wait_for(WAIT, |e| {
            if let ClientEvent::Notification(Notification::Event(record)) = e {
                match &record.event {
                    SessionEvent::MessageChunk { text, .. } => {
                        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
                        if let Some(sent) = text.trim().strip_prefix("t=").and_then(|t| t.parse::<u64>().ok()) {
                            delays.push(Duration::from_micros(now.saturating_sub(sent)));
                        }
                    }
                    SessionEvent::TurnCompleted { .. } => ended += 1,
                    _ => {}
                }
            }
            (ended == agents).then_some(())
        })
        .await
        .expect("every paced turn");
    let elapsed = started.elapsed();
    let cpu = cpu_time(server.pid).saturating_sub(cpu_before);
    let events = delays.len() as u64;
    assert_eq!(events, count * agents as u64, "every chunk arrives");
    delays.sort();
    let (p50, p99) = (pick(&delays, 0.5), pick(&delays, 0.99));
    println!(
        "| {agents} agents × {rate}/s ({events} events in {:.1} s: {:.0} events/s) | latency p50 {} / p99 {}; batond CPU {:.1} µs per event | p99 ≤ 3 ms, ≤ 15 µs | {} |",
        elapsed.as_secs_f64(),
        events as f64 / elapsed.as_secs_f64(),
        ms(p50),
        ms(p99),
        cpu.as_secs_f64() * 1e6 / events.max(1) as f64,
        if p99 <= Duration::from_millis(3) && cpu.as_secs_f64() * 1e6 / events.max(1) as f64 <= 15.0 { "ok" } else { "MISS" }
    );
    client.close();
    server.kill9().await;
}

#[tokio::main]
async fn main() {
    let counts: Vec<usize> = std::env::var("BATON_BENCH_AGENTS")
        .ok()
        .map(|list| list.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 200]);
    for agents in counts {
        run(agents).await;
    }
}
