//! One very long answer: the mock streams `/chunks 600000` (about 4.7 MB of text in 600,000
//! chunks, as many distinct words) to one subscribed client. Reports batond's resident memory
//! before the turn, when it ends, once its message is joined and indexed for search, after a
//! `message.list` of the session (which cuts that entry to its first 256 KiB), and a while later;
//! and that `message.list`'s time.
//!
//! `cargo bench -p baton-server --bench big_answer` prints `| figure | measured | target | status |`.
//! BATON_BENCH_CHUNKS gives another number of chunks.

mod common;

use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;

/// batond's resident memory, in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Resident memory once `span` has passed (the join, the index and the trims run in the
/// background after the turn's end and the answer: what batond settles at, not a moment of it).
async fn settled_mb(pid: u32, span: Duration) -> f64 {
    // Memory after a span: there is no event for "the allocator gave pages back".
    tokio::time::sleep(span).await;
    rss_mb(pid)
}

#[tokio::main]
async fn main() {
    let chunks: u64 = std::env::var("BATON_BENCH_CHUNKS").ok().and_then(|n| n.parse().ok()).unwrap_or(600_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = start(&dir.path().join("data"), &[]).await;
    let (client, mut notes) = server.client().await;
    let mut params = TaskCreateParams::new("big", "", "mock");
    params.workdir = Some(workdir.display().to_string());
    let session_id = client.request(params).await.expect("task.create").session.status.session_id;
    client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    wait_event(&mut notes, |n| is_waiting(n, &session_id)).await;
    let before = settled_mb(server.pid, Duration::from_secs(1)).await;

    let started = Instant::now();
    client.request(MessageAddParams::new(session_id.clone(), format!("/chunks {chunks}"))).await.expect("message.add");
    wait_event(&mut notes, |n| is_turn_end(n, &session_id)).await;
    let turn = started.elapsed();
    let at_end = rss_mb(server.pid);
    let joined = settled_mb(server.pid, Duration::from_secs(5)).await;

    let listing = Instant::now();
    let listed = client
        .request(MessageListParams {
            session_id: session_id.clone(),
            before_seq: None,
            after_seq: None,
            limit: Some(5),
        })
        .await
        .expect("message.list");
    let list_time = listing.elapsed();
    let listed_bytes: usize = listed.messages.iter().map(|m| m.text.len()).sum();
    // The answer's size: what message.list says of the entry it cut (or the entries' whole text).
    let bytes = listed.cut.iter().map(|c| c.total_bytes as usize).sum::<usize>().max(listed_bytes);
    let after_list = settled_mb(server.pid, Duration::from_secs(5)).await;
    let later = settled_mb(server.pid, Duration::from_secs(5)).await;
    let status = if later <= 2.0 * before { "ok" } else { "MISS" };
    println!(
        "| {chunks} chunks ({:.1} MB) in {:.1} s: batond RSS before / at the turn's end / joined / after message.list / later | {before:.1} / {at_end:.1} / {joined:.1} / {after_list:.1} / {later:.1} MB | later ≤ 2× before | {status} |",
        bytes as f64 / 1e6,
        turn.as_secs_f64()
    );
    println!(
        "| message.list (limit 5) of that session ({} entry cut) | {:.1} ms, {:.2} MB of text | first page ≤ 5 ms | {} |",
        listed.cut.len(),
        list_time.as_secs_f64() * 1e3,
        listed_bytes as f64 / 1e6,
        if list_time <= Duration::from_millis(5) { "ok" } else { "MISS" }
    );
    client.close();
    server.kill9().await;
}
