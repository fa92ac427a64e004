//! The benchmark suite: a real `batond`, real mock agent processes and the typed
//! client over loopback. Run with `bench/run.sh` (every bench of the workspace, one table) or
//! `cargo bench -p baton-server --bench suite`.
//!
//! Each figure is printed on stdout as one markdown row `| figure | measured | target | status |`
//! (status `ok` or `MISS` when the figure has a target, `-` otherwise; the targets and the
//! latest figures are in docs/BENCHMARKS.md); progress goes to stderr.
//! `BATON_BENCH_QUICK=1` runs every scenario with smaller parameters (the figure names say
//! which); the default is the full parameters. `BATON_BENCH_ONLY=restarts,streaming,scale`
//! runs only the named groups of scenarios; `BATON_BENCH_BATOND=PATH` measures another build of
//! `batond` (its own mock agent included).

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_protocol::*;
use common::*;
use rusqlite::{params, Connection};

/// The parameters of one run of the suite.
struct Params {
    /// Restarts measured for resume and prompt-after-restart.
    restart_runs: usize,
    /// Messages in the history `mock-load` restores with `session/load`.
    load_history: usize,
    /// Chunks streamed per throughput run.
    chunks: u64,
    /// Clients of the fan-out run.
    clients: usize,
    latency_rate: u64,
    latency_events: u64,
    tasks: usize,
    events: usize,
    /// Events of the one big session among `events`.
    big_session_events: usize,
    /// Request round trips timed per list figure.
    list_runs: usize,
    /// Sessions started for the memory figure.
    memory_sessions: usize,
}

impl Params {
    fn from_env() -> Params {
        let quick = std::env::var("BATON_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        if quick {
            Params {
                restart_runs: 10,
                load_history: 1000,
                chunks: 20_000,
                clients: 10,
                latency_rate: 5000,
                latency_events: 5000,
                tasks: 1000,
                events: 100_000,
                big_session_events: 10_000,
                list_runs: 10,
                memory_sessions: 5,
            }
        } else {
            Params {
                restart_runs: 100,
                load_history: 1000,
                chunks: 200_000,
                clients: 10,
                latency_rate: 5000,
                latency_events: 50_000,
                tasks: 10_000,
                events: 1_000_000,
                big_session_events: 100_000,
                list_runs: 100,
                memory_sessions: 20,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Output

fn row(figure: &str, measured: String, target: &str, ok: Option<bool>) {
    let status = match ok {
        Some(true) => "ok",
        Some(false) => "MISS",
        None => "-",
    };
    println!("| {figure} | {measured} | {target} | {status} |");
    eprintln!("  {figure}: {measured} (target {target}: {status})");
}

struct Stats {
    n: usize,
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    assert!(!samples.is_empty(), "no samples");
    samples.sort();
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats { n: samples.len(), median: pick(0.5), p99: pick(0.99) }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn latency_row(figure: &str, samples: Vec<Duration>, target_p99: Option<Duration>) {
    let s = stats(samples);
    let measured = format!("median {}, p99 {} (n={})", ms(s.median), ms(s.p99), s.n);
    match target_p99 {
        Some(t) => row(figure, measured, &format!("p99 ≤ {} ms", t.as_millis()), Some(s.p99 <= t)),
        None => row(figure, measured, "-", None),
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// batond and clients

async fn kill9(server: Server) {
    server.kill9().await;
}

async fn create_session(
    client: &Client,
    notes: &mut Notifications,
    workdir: &Path,
    agent: &str,
    description: &str,
) -> String {
    let mut params = TaskCreateParams::new("bench", description, agent);
    params.workdir = Some(workdir.to_string_lossy().into_owned());
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id;
    wait_event(notes, |n| is_waiting(n, &session_id)).await;
    session_id
}

/// Sends a prompt and waits for the end of its turn.
async fn prompt(client: &Client, notes: &mut Notifications, session_id: &str, content: &str) {
    client.request(SubscribeParams { session_id: session_id.to_string(), since_seq: None }).await.expect("subscribe");
    client.request(MessageAddParams::new(session_id.to_string(), content.to_string())).await.expect("message.add");
    wait_event(notes, |n| is_turn_end(n, session_id)).await;
}

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn cpu_per_event(cpu: Duration, events: u64) -> String {
    format!("{:.1} µs", cpu.as_secs_f64() * 1e6 / events.max(1) as f64)
}

/// Processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).ok().is_some_and(|stat| {
                // The command name (field 2) may hold spaces; the parent pid follows its `)`.
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

// ---------------------------------------------------------------------------------------------
// Scenarios 1 and 2: resume and prompt after a restart

async fn restarts(dir: &Path, workdir: &Path, p: &Params) {
    eprintln!("resume and prompt after restart: {} restarts", p.restart_runs);
    let data_dir = dir.join("restarts");
    let server = start(&data_dir, &[]).await;
    let (client, mut notes) = server.client().await;
    let resumed = create_session(&client, &mut notes, workdir, "mock", "remember pineapple").await;
    let prompted = create_session(&client, &mut notes, workdir, "mock", "remember pineapple").await;
    drop(client);
    // Every prompt adds a user and an agent message to the mock's session file; the rate limit
    // of a connection is respected by opening a new one now and then.
    let mut loaded = None;
    let mut done = 2;
    while done < p.load_history {
        let (client, mut notes) = server.client().await;
        let session_id = match &loaded {
            Some(id) => id,
            None => loaded.insert(create_session(&client, &mut notes, workdir, "mock-load", "message 1").await),
        };
        for _ in 0..100 {
            if done >= p.load_history {
                break;
            }
            prompt(&client, &mut notes, session_id, &format!("message {}", done / 2 + 1)).await;
            done += 2;
        }
    }
    let loaded = loaded.expect("mock-load session");
    let mut server = Some(server);
    let mut resume_native = Vec::new();
    let mut resume_load = Vec::new();
    let mut first_chunk = Vec::new();
    for _ in 0..p.restart_runs {
        kill9(server.take().expect("server")).await;
        let restarted = start(&data_dir, &[]).await;
        let (client, mut notes) = restarted.client().await;
        for (session_id, samples) in [(&resumed, &mut resume_native), (&loaded, &mut resume_load)] {
            let started = Instant::now();
            client
                .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
                .await
                .expect("resume");
            wait_event(&mut notes, |n| is_waiting(n, session_id)).await;
            samples.push(started.elapsed());
        }
        client.request(SubscribeParams { session_id: prompted.clone(), since_seq: None }).await.expect("subscribe");
        let started = Instant::now();
        let sender = client.clone();
        let id = prompted.clone();
        let add =
            tokio::spawn(
                async move { sender.request(MessageAddParams::new(id, "what did I ask you to remember?")).await },
            );
        wait_event(&mut notes, |n| {
            matches!(n, Notification::Event(EventRecord { event: SessionEvent::MessageChunk { .. }, .. }))
        })
        .await;
        first_chunk.push(started.elapsed());
        add.await.expect("join").expect("message.add");
        wait_event(&mut notes, |n| is_turn_end(n, &prompted)).await;
        server = Some(restarted);
    }
    if let Some(server) = server {
        kill9(server).await;
    }
    let target = Some(Duration::from_millis(20));
    latency_row("1. resume -> WAITING_FOR_INPUT, `mock` (session/resume), after a restart", resume_native, target);
    latency_row(
        &format!("1. resume -> WAITING_FOR_INPUT, `mock-load` (session/load of {} messages)", p.load_history),
        resume_load,
        target,
    );
    latency_row(
        "2. message.add after a restart (no agent running) -> first chunk",
        first_chunk,
        Some(Duration::from_millis(50)),
    );
}

// ---------------------------------------------------------------------------------------------
// Scenarios 3 and 4: streaming throughput and latency

/// What one client received of one streamed turn.
struct Received {
    events: u64,
    first_seq: u64,
    last_seq: u64,
    elapsed: Duration,
}

/// Counts the session's events until its turn ends; `started` is when the prompt was sent.
async fn count_turn(notes: &mut Notifications, session_id: &str, started: Instant) -> Received {
    let mut received = Received { events: 0, first_seq: 0, last_seq: 0, elapsed: Duration::ZERO };
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                received.events += 1;
                if received.first_seq == 0 {
                    received.first_seq = record.seq;
                }
                assert_eq!(record.seq, received.last_seq.max(received.first_seq - 1) + 1, "gap or duplicate");
                received.last_seq = record.seq;
                matches!(record.event, SessionEvent::TurnCompleted { .. }).then_some(())
            }
            _ => None,
        })
        .await
        .expect("turn end");
    received.elapsed = started.elapsed();
    received
}

fn journaled(db: &Path, session_id: &str, first_seq: u64, last_seq: u64) -> u64 {
    let conn = Connection::open(db).expect("open the journal");
    conn.query_row(
        "SELECT COUNT(*) FROM session_events WHERE session_id = ?1 AND seq BETWEEN ?2 AND ?3",
        params![session_id, first_seq as i64, last_seq as i64],
        |r| r.get::<_, i64>(0),
    )
    .expect("count journal") as u64
}

fn rate(events: u64, elapsed: Duration) -> f64 {
    events as f64 / elapsed.as_secs_f64()
}

async fn streaming(dir: &Path, workdir: &Path, p: &Params) {
    let data_dir = dir.join("streaming");
    let server = start(&data_dir, &[]).await;
    let db = data_dir.join("baton.db");
    let mut clients = Vec::new();
    for _ in 0..p.clients {
        clients.push(server.client().await);
    }
    let (sender, notes) = &mut clients[0];
    let sender = sender.clone();
    let session_id = create_session(&sender, notes, workdir, "mock", "hi").await;
    for (client, _) in &clients {
        client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    }
    let mut sent = 0u64;
    let mut durable = 0u64;
    let command = format!("/chunks {}", p.chunks);

    // One subscribed client (the others unsubscribe for this run).
    eprintln!("throughput: {} chunks to 1 client", p.chunks);
    for (client, _) in &clients[1..] {
        client.request(UnsubscribeParams { session_id: session_id.clone() }).await.expect("unsubscribe");
    }
    let cpu_before = cpu_time(server.pid);
    let clients_cpu_before = cpu_time(std::process::id());
    let started = Instant::now();
    sender.request(MessageAddParams::new(session_id.clone(), command.clone())).await.expect("add");
    let one = count_turn(&mut clients[0].1, &session_id, started).await;
    let one_cpu = cpu_time(server.pid).saturating_sub(cpu_before);
    let one_client_cpu = cpu_time(std::process::id()).saturating_sub(clients_cpu_before);
    sent += one.events;
    durable += journaled(&db, &session_id, one.first_seq, one.last_seq);
    let one_rate = rate(one.events, one.elapsed);
    wait_event(&mut clients[0].1, |n| is_waiting(n, &session_id)).await;

    // Every client subscribed.
    eprintln!("throughput: {} chunks to each of {} clients", p.chunks, p.clients);
    for (client, _) in &clients[1..] {
        client.request(SubscribeParams { session_id: session_id.clone(), since_seq: None }).await.expect("subscribe");
    }
    let cpu_before = cpu_time(server.pid);
    let clients_cpu_before = cpu_time(std::process::id());
    let started = Instant::now();
    sender.request(MessageAddParams::new(session_id.clone(), command.clone())).await.expect("add");
    let mut counters = Vec::new();
    let fan_out_clients: Vec<Client> = clients.iter().map(|(client, _)| client.clone()).collect();
    for (_, mut notes) in clients.drain(..) {
        let id = session_id.clone();
        counters.push(tokio::spawn(async move { (count_turn(&mut notes, &id, started).await, notes) }));
    }
    let mut rates = Vec::new();
    let mut received_total = 0u64;
    let mut all_notes = Vec::new();
    for counter in counters {
        let (received, notes) = counter.await.expect("join");
        rates.push(rate(received.events, received.elapsed));
        received_total += received.events;
        if all_notes.is_empty() {
            sent += received.events;
            durable += journaled(&db, &session_id, received.first_seq, received.last_seq);
        }
        all_notes.push(notes);
    }
    let fan_out_cpu = cpu_time(server.pid).saturating_sub(cpu_before);
    let fan_out_client_cpu = cpu_time(std::process::id()).saturating_sub(clients_cpu_before);
    let slowest = rates.iter().cloned().fold(f64::INFINITY, f64::min);
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    wait_event(&mut all_notes[0], |n| is_waiting(n, &session_id)).await;

    row(
        &format!("3. throughput, {} chunks -> 1 subscribed client", thousands(p.chunks)),
        format!(
            "{} events/s (CPU per event: batond {}, client {})",
            thousands(one_rate as u64),
            cpu_per_event(one_cpu, one.events),
            cpu_per_event(one_client_cpu, one.events)
        ),
        "≥ 100,000 events/s",
        Some(one_rate >= 100_000.0),
    );
    row(
        &format!(
            "3. throughput, {} chunks -> each of {} clients (slowest client; mean)",
            thousands(p.chunks),
            p.clients
        ),
        format!(
            "{} events/s; mean {} (CPU per event and client: batond {}, client {})",
            thousands(slowest as u64),
            thousands(mean as u64),
            cpu_per_event(fan_out_cpu, received_total),
            cpu_per_event(fan_out_client_cpu, received_total)
        ),
        "≥ 50,000 events/s",
        Some(slowest >= 50_000.0),
    );
    row(
        "3. events of both runs durable in the journal when received",
        format!("{} of {}", thousands(durable), thousands(sent)),
        "all",
        Some(durable == sent),
    );

    // Latency at a fixed rate to one client: each chunk carries the time the agent wrote it.
    eprintln!("latency: {} events at {}/s", p.latency_events, p.latency_rate);
    for client in &fan_out_clients[1..] {
        client.request(UnsubscribeParams { session_id: session_id.clone() }).await.expect("unsubscribe");
    }
    let notes = &mut all_notes[0];
    let content = format!("/paced {} {}", p.latency_rate, p.latency_events);
    sender.request(MessageAddParams::new(session_id.clone(), content)).await.expect("add");
    let mut delays = Vec::new();
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
                match &record.event {
                    SessionEvent::MessageChunk { text, .. } => {
                        if let Some(sent) = text.trim().strip_prefix("t=").and_then(|t| t.parse::<u64>().ok()) {
                            delays.push(Duration::from_micros(now.saturating_sub(sent)));
                        }
                        None
                    }
                    SessionEvent::TurnCompleted { .. } => Some(()),
                    _ => None,
                }
            }
            _ => None,
        })
        .await
        .expect("paced turn");
    assert_eq!(delays.len() as u64, p.latency_events, "every paced chunk arrives");
    latency_row(
        &format!(
            "4. latency agent write -> client receive at {} events/s ({} events)",
            thousands(p.latency_rate),
            thousands(p.latency_events)
        ),
        delays,
        Some(Duration::from_millis(5)),
    );
    drop(all_notes);
    kill9(server).await;
}

// ---------------------------------------------------------------------------------------------
// Scenarios 5 and 6: scale and memory

/// Writes a data dir of `p.tasks` tasks with one session each and `p.events` journal events
/// (one session holds `p.big_session_events` of them), with the folded messages those events
/// make, straight into the real schema. Every turn is complete and no agent is running, as
/// after a clean stop. Returns the id of the big session.
fn generate(data_dir: &Path, p: &Params) -> String {
    std::fs::create_dir_all(data_dir).expect("data dir");
    let mut conn = Connection::open(data_dir.join("baton.db")).expect("open db");
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;").expect("pragmas");
    baton_server::store::apply_migrations(&mut conn, baton_server::store::MIGRATIONS).expect("migrations");
    let workdir = data_dir.join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let workdir = workdir.to_string_lossy().into_owned();

    // Ids in key order, so that every insert appends to its index.
    let mut sessions: Vec<(String, String)> = (0..p.tasks)
        .map(|_| (format!("sess-{}", uuid::Uuid::new_v4().simple()), format!("task-{}", uuid::Uuid::new_v4().simple())))
        .collect();
    sessions.sort();
    let big = sessions.len() / 2;
    let others = p.events - p.big_session_events;
    let per_session = others / (p.tasks - 1);
    let extra = others % (p.tasks - 1);
    let mut others_index = 0;

    let tx = conn.transaction().expect("transaction");
    {
        let mut task = tx
            .prepare(
                "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'IN_PROGRESS', 'mock', ?4, ?5, ?5)",
            )
            .expect("prepare");
        let mut session = tx
            .prepare(
                // What a previous batond left: sessions waiting for input whose agent (stopped,
                // with a resume token below) needs resuming, their attention settled as such
                // (a data dir the attention columns were never written to would be rewritten
                // whole at its first start: a one-off, not the start time measured here).
                "INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at, last_seq, turn_open, attention, attention_since)
                 VALUES (?1, ?2, 'mock', 'WAITING_FOR_INPUT', ?3, ?3, ?4, 0, 'resume', ?3)",
            )
            .expect("prepare");
        let mut executor = tx
            .prepare(
                "INSERT INTO executors_running (session_id, resume_token, runtime, status, updated_at)
                 VALUES (?1, ?2, 'standalone', 'stopped', ?3)",
            )
            .expect("prepare");
        let mut event = tx
            .prepare(
                "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .expect("prepare");
        let mut message = tx
            .prepare(
                "INSERT INTO messages (session_id, seq, kind, message_id, text, closed, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?6)",
            )
            .expect("prepare");
        for (i, (session_id, task_id)) in sessions.iter().enumerate() {
            let count = if i == big {
                p.big_session_events
            } else {
                others_index += 1;
                per_session + usize::from(others_index <= extra)
            };
            let created = format!(
                "2026-11-{:02}T{:02}:{:02}:{:02}.000Z",
                1 + i / 86_400 % 28,
                i / 3600 % 24,
                i / 60 % 60,
                i % 60
            );
            task.execute(params![task_id, format!("Task {i}"), format!("Description of task {i}"), workdir, created])
                .expect("task");
            session.execute(params![session_id, task_id, created, count as i64]).expect("session");
            executor.execute(params![session_id, format!("mock-{session_id}"), created]).expect("executor");
            // Turns of a prompt, the turn start, eight chunks and the turn end; the last turn is
            // cut short to fit; one or two events left over are status lines.
            let mut seq = 0usize;
            let mut turn = 0;
            while seq < count {
                let left = count - seq;
                if left < 3 {
                    for _ in 0..left {
                        seq += 1;
                        let status = SessionEvent::status("Session resumed.");
                        let payload = serde_json::to_string(&status).expect("json");
                        event.execute(params![session_id, seq as i64, status.kind(), payload, created]).expect("event");
                        message
                            .execute(params![
                                session_id,
                                seq as i64,
                                "status",
                                None::<String>,
                                "Session resumed.",
                                created
                            ])
                            .expect("message");
                    }
                    break;
                }
                turn += 1;
                let chunks = (left - 3).min(8);
                let text = format!("Prompt {turn} of this session: please look at the code and explain it.");
                let mut turn_events = vec![
                    SessionEvent::UserMessage { text: text.clone(), turn_id: None },
                    SessionEvent::TurnStarted { turn_id: None },
                ];
                let message_id = format!("msg-{turn}");
                let mut reply = String::new();
                for c in 0..chunks {
                    let word = format!("word{c} of the agent's answer, ");
                    reply.push_str(&word);
                    turn_events.push(SessionEvent::MessageChunk { message_id: Some(message_id.clone()), text: word });
                }
                turn_events.push(SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None });
                let user_seq = seq + 1;
                for e in &turn_events {
                    seq += 1;
                    let payload = serde_json::to_string(e).expect("json");
                    event.execute(params![session_id, seq as i64, e.kind(), payload, created]).expect("event");
                }
                message
                    .execute(params![session_id, user_seq as i64, "user", None::<String>, text, created])
                    .expect("message");
                if chunks > 0 {
                    message
                        .execute(params![session_id, (user_seq + 2) as i64, "agent", message_id, reply, created])
                        .expect("message");
                }
            }
        }
    }
    tx.commit().expect("commit");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").expect("checkpoint");
    sessions[big].0.clone()
}

async fn scale(dir: &Path, workdir: &Path, p: &Params) {
    let data_dir = dir.join("scale");
    eprintln!("scale: generating {} tasks, {} sessions, {} events", p.tasks, p.tasks, p.events);
    let began = Instant::now();
    let big = generate(&data_dir, p);
    eprintln!("  generated in {:.1} s", began.elapsed().as_secs_f64());
    let shape = format!("{}k sessions / {}k events", p.tasks / 1000, p.events / 1000);

    // Start to first accepted connection, a few times (the first start also migrates nothing:
    // the generated file is at the current schema).
    let mut starts = Vec::new();
    for _ in 0..5 {
        let began = Instant::now();
        let server = start(&data_dir, &[]).await;
        let (client, _notes) = server.client().await;
        starts.push(began.elapsed());
        drop(client);
        kill9(server).await;
    }
    let s = stats(starts);
    let worst = s.p99;
    row(
        &format!("5. batond start -> first accepted connection, {shape} (5 starts)"),
        format!("median {}, max {}", ms(s.median), ms(worst)),
        "≤ 500 ms",
        Some(worst <= Duration::from_millis(500)),
    );

    // Memory idle, then with running agent sessions (the server alone; agents are separate
    // processes and reported apart).
    let server = start(&data_dir, &[]).await;
    let (client, mut notes) = server.client().await;
    let idle = rss(server.pid).expect("rss");
    row(&format!("6. batond resident memory idle, {shape}"), mib(idle), "-", None);
    for i in 0..p.memory_sessions {
        create_session(&client, &mut notes, workdir, "mock", &format!("memory {i}")).await;
    }
    let busy = rss(server.pid).expect("rss");
    let agents: Vec<u64> = children(server.pid).into_iter().filter_map(rss).collect();
    row(
        &format!("6. batond resident memory per running agent session ({} mock sessions)", p.memory_sessions),
        format!("{} (total {})", mib(busy.saturating_sub(idle) / p.memory_sessions as u64), mib(busy)),
        "-",
        None,
    );
    if !agents.is_empty() {
        row(
            "6. mock agent process resident memory (each, mean)",
            mib(agents.iter().sum::<u64>() / agents.len() as u64),
            "-",
            None,
        );
    }

    // The whole list, page after page (1000 rows each): how many sessions there are, and what
    // reading all of them costs.
    let began = Instant::now();
    let mut all = SessionListParams { limit: Some(MAX_SESSION_PAGE), ..Default::default() };
    let mut listed = 0;
    loop {
        let page = client.request(all.clone()).await.expect("list");
        listed += page.sessions.len();
        match page.next_cursor {
            Some(cursor) => all.cursor = Some(cursor),
            None => break,
        }
    }
    let whole = began.elapsed();
    for order in [SessionOrder::Recent, SessionOrder::Attention] {
        let mut lists = Vec::new();
        for _ in 0..p.list_runs {
            let began = Instant::now();
            let params = SessionListParams { order: Some(order), ..Default::default() };
            let list = client.request(params).await.expect("list");
            lists.push(began.elapsed());
            assert_eq!(list.sessions.len(), DEFAULT_SESSION_PAGE as usize);
        }
        latency_row(
            &format!(
                "5. task.session.list first page ({DEFAULT_SESSION_PAGE} rows, order {}) of {} sessions",
                order.as_str(),
                thousands(listed as u64)
            ),
            lists,
            Some(Duration::from_millis(5)),
        );
    }
    println!(
        "| 5. task.session.list, all {} sessions in pages of {MAX_SESSION_PAGE} | {:.1} ms | - | - |",
        thousands(listed as u64),
        whole.as_secs_f64() * 1000.0
    );

    let mut pages = Vec::new();
    for _ in 0..p.list_runs {
        let began = Instant::now();
        let page = client
            .request(MessageListParams { session_id: big.clone(), before_seq: None, after_seq: None, limit: None })
            .await
            .expect("message.list");
        pages.push(began.elapsed());
        assert!(!page.messages.is_empty());
    }
    latency_row(
        &format!("5. message.list newest page (200) of the {}-event session", thousands(p.big_session_events as u64)),
        pages,
        None,
    );

    let began = Instant::now();
    client.request(SubscribeParams { session_id: big.clone(), since_seq: Some(0) }).await.expect("subscribe");
    let last = p.big_session_events as u64;
    let mut replayed = 0u64;
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == big => {
                replayed += 1;
                (record.seq == last).then_some(())
            }
            _ => None,
        })
        .await
        .expect("replay");
    let elapsed = began.elapsed();
    assert_eq!(replayed, last, "every event replayed once");
    row(
        &format!("5. session.subscribe since_seq=0 replay of {} events", thousands(last)),
        format!("{} events/s ({})", thousands(rate(replayed, elapsed) as u64), ms(elapsed)),
        "-",
        None,
    );
    drop(client);
    kill9(server).await;
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let p = Params::from_env();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&workdir).expect("workdir");
        let only = std::env::var("BATON_BENCH_ONLY").unwrap_or_default();
        let run = |group: &str| only.is_empty() || only.split(',').any(|g| g.trim() == group);
        if run("restarts") {
            restarts(dir.path(), &workdir, &p).await;
        }
        if run("streaming") {
            streaming(dir.path(), &workdir, &p).await;
        }
        if run("scale") {
            scale(dir.path(), &workdir, &p).await;
        }
    });
}
