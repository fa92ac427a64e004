//! Full-text search (`message.search`) in a journal of 100,000 messages.
//!
//! The journal is written through the store as a server writes it (user messages appended in
//! batches of 1,000 events: journal, fold and search index in the same writes), over 20
//! sessions; a few entries hold a rare word. Then a real `batond` opens the data dir and the
//! typed client asks for the first page of hits over the WebSocket: a rare word, a word in
//! about one message in 170, and a prefix. The same queries are also timed on a plain read
//! connection (the store's part alone).
//!
//! Prints `| figure | measured | target | status |` rows (see bench/run.sh). BATON_BENCH_QUICK=1
//! writes 20,000 messages instead; BATON_BENCH_ONLY must name `search` or be empty for it to run.

mod common;

use std::time::{Duration, Instant};

use baton_protocol::*;
use baton_server::hub::Hub;
use baton_server::store::{search_page, NewTask, Store};

const SESSIONS: usize = 20;
const RARE: &str = "xylophone";
const QUERIES: usize = 200;
/// Words of the one long answer in the journal.
const LONG_ANSWER_WORDS: usize = 30_000;

/// A deterministic sentence of 12 words from a vocabulary of 2,000 (a linear congruential
/// generator: the same journal every run).
fn sentence(state: &mut u64) -> String {
    let mut words = Vec::with_capacity(12);
    for _ in 0..12 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = (*state >> 33) % 2000;
        words.push(format!("w{n}"));
    }
    words.join(" ")
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn write_journal(store: &Store, workdir: &str, messages: usize) -> Duration {
    let now = now_timestamp();
    for s in 0..SESSIONS {
        let task = Task {
            id: format!("task-{s}"),
            title: format!("task {s}"),
            description: String::new(),
            state: TaskState::Todo,
            agent: "mock".into(),
            workdir: workdir.into(),
            repository: None,
            worktree_branch: None,
            base_commit: None,
            base_branch: None,
            pull_request_url: None,
            created_at: now.clone(),
            updated_at: now.clone(),
            archived: false,
            mcp_servers: Vec::new(),
        };
        store
            .create_task(NewTask {
                task,
                session_id: format!("sess-{s}"),
                worktree_path: None,
                mcp_servers: Vec::new(),
            })
            .await
            .expect("task");
    }
    let mut state = 7u64;
    let started = Instant::now();
    let per_session = messages / SESSIONS;
    for s in 0..SESSIONS {
        for batch in 0..per_session.div_ceil(1000) {
            let events: Vec<SessionEvent> = (0..1000.min(per_session - batch * 1000))
                .map(|i| {
                    let mut text = sentence(&mut state);
                    // Five entries in the whole journal hold the rare word.
                    if batch == 0 && i == 500 && s % 4 == 0 {
                        text.push_str(&format!(" {RARE}"));
                    }
                    SessionEvent::UserMessage { text, turn_id: None }
                })
                .collect();
            store.append_events(&format!("sess-{s}"), events).await.expect("append");
        }
    }
    let elapsed = started.elapsed();
    // One long streamed answer: a word per chunk, `c1 c2 … c30000` (a prefix such as `c2*`
    // matches 11,111 of its words).
    let mut answer = vec![SessionEvent::TurnStarted { turn_id: None }];
    answer.extend(
        (1..=LONG_ANSWER_WORDS).map(|i| SessionEvent::MessageChunk { message_id: None, text: format!("c{i} ") }),
    );
    answer.push(SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None });
    store.append_events("sess-0", answer).await.expect("the long answer");
    elapsed
}

#[tokio::main]
async fn main() {
    let only = std::env::var("BATON_BENCH_ONLY").unwrap_or_default();
    if !(only.is_empty() || only.split(',').any(|g| g.trim() == "search")) {
        return;
    }
    let quick = std::env::var("BATON_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let messages = if quick { 20_000 } else { 100_000 };
    let dir = tempfile::tempdir().expect("tempdir");
    let database = dir.path().join("baton.db");

    let store = Store::open(&database, Hub::new()).expect("store");
    eprintln!("search: writing {messages} messages");
    let wrote = write_journal(&store, &dir.path().display().to_string(), messages).await;
    store.close();
    let label = format!("{messages} messages");
    println!(
        "| search: write {label} through journal, fold and index | {:.0} msg/s | - | - |",
        messages as f64 / wrote.as_secs_f64()
    );

    // A common word: the first word of the first sentence written above (in about one entry in 170).
    let common_word = sentence(&mut 7u64).split(' ').next().unwrap_or("w1").to_string();
    // What, the query, how many times (the long answer's prefix fewer: it took over a second
    // per query when FTS5's snippet() cut the snippets).
    let queries = [
        ("a rare word (5 hits)", RARE.to_string(), QUERIES),
        ("a common word", common_word, QUERIES),
        ("a prefix", "w19*".to_string(), QUERIES),
        ("a prefix of 11,111 words of one 30,000-word answer", "c2*".to_string(), 20),
    ];

    let conn = rusqlite::Connection::open(&database).expect("read connection");
    for (what, query, runs) in &queries {
        let mut samples = Vec::with_capacity(*runs);
        let mut hits = 0;
        for _ in 0..*runs {
            let started = Instant::now();
            let page = search_page(&conn, query, None, 50, None, std::time::Duration::from_secs(600)).expect("search");
            samples.push(started.elapsed());
            hits = page.hits.len();
        }
        assert!(hits > 0, "{query} found nothing");
        let p50 = percentile(&mut samples, 0.5);
        let p99 = percentile(&mut samples, 0.99);
        println!(
            "| search ({label}, store): {what}, first page ({hits} hits), p50 / p99 | {} / {} | - | - |",
            ms(p50),
            ms(p99)
        );
    }
    drop(conn);

    let server = common::start(dir.path(), &[]).await;
    let (client, _notes) = server.client().await;
    for (what, query, runs) in &queries {
        let mut samples = Vec::with_capacity(*runs);
        let mut hits = 0;
        for _ in 0..*runs {
            let started = Instant::now();
            let page = client.request(MessageSearchParams::new(query.clone())).await.expect("message.search");
            samples.push(started.elapsed());
            hits = page.hits.len();
        }
        let p50 = percentile(&mut samples, 0.5);
        let p99 = percentile(&mut samples, 0.99);
        println!(
            "| search ({label}, message.search over the WebSocket): {what}, first page ({hits} hits), p50 / p99 | {} / {} | - | - |",
            ms(p50),
            ms(p99)
        );
    }
    drop(client);
    server.stop().await;
}
