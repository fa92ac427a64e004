//! Many agents at a steady rate: N mock agents (standalone, each its own process) each stream
//! `/paced RATE/N COUNT` at once, so that batond takes 5,000 events/s in total trickling in from
//! every agent; clients subscribed to every session (one connection per 250 sessions: a
//! connection subscribes to 256 at most). Reports the events/s reached, the latency from the
//! agent's write to the client's receipt (each chunk carries its write time), batond's CPU per
//! event (user + system, from /proc), and what each idle agent costs batond (descriptors and
//! resident memory, before the turns, counted from the moment the first agent runs: what a first
//! agent pays once is not any agent's; the store's own connections are not counted among the
//! descriptors), for N = 10 and 200 (BATON_BENCH_AGENTS gives others, comma-separated).
//!
//! The yardsticks, in the same run: the same number of mock agents started by this bench and read
//! over their raw pipes (one task per agent, no batond): the latency the machine itself gives
//! that many processes writing at that rate, and the CPU per event this process spent reading
//! them. Then the same again with each chunk made durable before it counts as received: one
//! thread appends the chunks to a file and syncs it (`fdatasync`) once per group, a group being
//! what arrived within 1 ms of its oldest chunk, as batond's journal writer groups its commits:
//! about the least a server pays on this machine to keep every event on disk, with that window,
//! before a client sees it.
//!
//! `cargo bench -p baton-server --bench many` prints `| figure | measured | target | status |`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_protocol::*;
use common::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TOTAL_RATE: u64 = 5000;
const SECONDS: u64 = 4;
/// Sessions read through one connection (a connection subscribes to 256 at most).
const PER_CONNECTION: usize = 250;

fn pick(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

/// The delay of a paced chunk (`t=<micros>`), read now.
fn delay_of(text: &str) -> Option<Duration> {
    let sent = text.trim().strip_prefix("t=")?.parse::<u64>().ok()?;
    Some(Duration::from_micros(now_micros().saturating_sub(sent)))
}

/// Descriptors of `pid` other than its database connections' (the database and its
/// write-ahead log): the store opens a reader connection when reads overlap, whatever the number
/// of agents (eight at most, each closed after 30 s unused), so that one opened while the
/// agents were being created is not an agent's.
fn descriptors_besides_the_store(pid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            let name = target.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            !matches!(name, "baton.db" | "baton.db-wal")
        })
        .count()
}

/// Resident memory, in KiB.
fn rss_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The soft descriptor limit of this process raised to its hard one (the yardstick holds four
/// descriptors per agent).
fn raise_descriptor_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write the struct given, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

struct Figures {
    events: u64,
    elapsed: Duration,
    delays: Vec<Duration>,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

/// Waits (at most 10 s) until batond holds no more than `fds` descriptors besides its database
/// connections' ([`descriptors_besides_the_store`]): agents' logs are closed after a second of
/// quiet. Polled: /proc tells no event when a descriptor closes.
async fn rest(pid: u32, fds: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while descriptors_besides_the_store(pid) > fds && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new mock session in `workdir`; its id.
async fn create(control: &baton_protocol::client::Client, workdir: &std::path::Path) -> String {
    let mut params = TaskCreateParams::new("many", "", "mock");
    params.workdir = Some(workdir.display().to_string());
    control.request(params).await.expect("task.create").session.status.session_id
}

/// Waits until `count` sessions (those in `waiting` counted) wait for input.
async fn wait_ready(
    notes: &mut baton_protocol::client::Notifications,
    waiting: &mut std::collections::HashSet<String>,
    count: usize,
) {
    notes
        .wait_for(WAIT, |e| {
            if let ClientEvent::Notification(Notification::StateChanged(c)) = e {
                if c.state == SessionState::WaitingForInput {
                    waiting.insert(c.session_id.clone());
                }
            }
            (waiting.len() >= count).then_some(())
        })
        .await
        .expect("every agent ready");
}

async fn through_batond(agents: usize, rate: u64, count: u64) -> (Figures, Duration, f64, f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = start(&dir.path().join("data"), &[]).await;
    let mut connections = Vec::new();
    for _ in 0..agents.div_ceil(PER_CONNECTION) {
        connections.push(server.client().await);
    }
    let control = connections[0].0.clone();
    eprintln!("{agents} agents: starting");
    // The first agent pays what any first one does (code paged in, caches and buffers made
    // once): what each idle agent costs is measured from the moment it runs.
    let before_fds = descriptors_besides_the_store(server.pid);
    let mut sessions = vec![create(&control, &workdir).await];
    let mut waiting = std::collections::HashSet::new();
    wait_ready(&mut connections[0].1, &mut waiting, 1).await;
    rest(server.pid, before_fds + 3).await;
    let idle_fds = descriptors_besides_the_store(server.pid);
    let idle_rss = rss_kib(server.pid);
    for _ in 1..agents {
        sessions.push(create(&control, &workdir).await);
    }
    wait_ready(&mut connections[0].1, &mut waiting, agents).await;
    let others = (agents - 1).max(1);
    // What the idle agents cost once their logs rested and they went quiet.
    rest(server.pid, idle_fds + 3 * others).await;
    let fds_per_agent = (descriptors_besides_the_store(server.pid).saturating_sub(idle_fds)) as f64 / others as f64;
    let kib_per_agent = (rss_kib(server.pid) - idle_rss) / others as f64;
    for (sessions, (client, _)) in sessions.chunks(PER_CONNECTION).zip(&connections) {
        for session_id in sessions {
            client
                .request(SubscribeParams { session_id: session_id.clone(), since_seq: None })
                .await
                .expect("subscribe");
        }
    }
    eprintln!("{agents} agents: streaming (batond pid {})", server.pid);
    let cpu_before = cpu_time(server.pid);
    let started = Instant::now();
    // Sent from a task of their own: the readers below read from the first chunk on.
    let sender = tokio::spawn({
        let sessions = sessions.clone();
        async move {
            for session_id in sessions {
                let content = format!("/paced {rate} {count}");
                control.request(MessageAddParams::new(session_id, content)).await.expect("message.add");
            }
        }
    });
    let mut readers = Vec::new();
    for (part, (_, mut notes)) in sessions.chunks(PER_CONNECTION).zip(connections) {
        let expected = part.len();
        readers.push(tokio::spawn(async move {
            let mut delays = Vec::with_capacity(count as usize * expected);
            let mut ended = 0;
            notes
                .wait_for(WAIT, |e| {
                    if let ClientEvent::Notification(Notification::Event(record)) = e {
                        match &record.event {
                            SessionEvent::MessageChunk { text, .. } => delays.extend(delay_of(text)),
                            SessionEvent::TurnCompleted { .. } => ended += 1,
                            _ => {}
                        }
                    }
                    (ended == expected).then_some(())
                })
                .await
                .expect("every paced turn");
            delays
        }));
    }
    let mut delays = Vec::new();
    for reader in readers {
        delays.extend(reader.await.expect("reader"));
    }
    let elapsed = started.elapsed();
    sender.await.expect("sender");
    let cpu = cpu_time(server.pid).saturating_sub(cpu_before);
    let events = delays.len() as u64;
    assert_eq!(events, count * agents as u64, "every chunk arrives");
    server.kill9().await;
    (Figures { events, elapsed, delays }, cpu, fds_per_agent, kib_per_agent)
}

/// The window of the durable yardstick's groups (batond's journal writer's).
const GROUP_WINDOW: Duration = Duration::from_millis(1);

/// The durable yardstick's journal: appends the chunks it is given to `path`, each group of
/// them in one write and one `fdatasync`; a chunk's delay is taken once its group is synced. A
/// group is what arrived within [`GROUP_WINDOW`] of its oldest chunk: the thread sleeps through
/// the window (no wake per chunk), then takes what queued meanwhile.
fn journal(path: std::path::PathBuf, chunks: std::sync::mpsc::Receiver<(Instant, String)>) -> Vec<Duration> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("journal file");
    let mut delays = Vec::new();
    let mut group = Vec::new();
    let mut bytes = Vec::new();
    while let Ok(first) = chunks.recv() {
        std::thread::sleep((first.0 + GROUP_WINDOW).saturating_duration_since(Instant::now()));
        group.push(first);
        group.extend(chunks.try_iter());
        bytes.clear();
        for (_, text) in &group {
            bytes.extend_from_slice(text.as_bytes());
            bytes.push(b'\n');
        }
        file.write_all(&bytes).expect("journal write");
        file.sync_data().expect("journal sync");
        delays.extend(group.drain(..).filter_map(|(_, text)| delay_of(&text)));
    }
    delays
}

/// The same agents read over their raw pipes by this process: one task per agent does the ACP
/// handshake, then (all at once) sends the prompt and reads every chunk; `durable`: through
/// [`journal`]. Also gives this process's CPU time over the run.
async fn over_raw_pipes(agents: usize, rate: u64, count: u64, durable: bool) -> (Figures, Duration) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = dir.path().display().to_string();
    let go = Arc::new(tokio::sync::Barrier::new(agents + 1));
    let delays = Arc::new(Mutex::new(Vec::with_capacity(count as usize * agents)));
    let (to_journal, chunks) = std::sync::mpsc::channel();
    let journal = durable.then(|| {
        let path = dir.path().join("journal");
        std::thread::spawn(move || journal(path, chunks))
    });
    let to_journal = durable.then_some(to_journal);
    let mut tasks = Vec::new();
    for n in 0..agents {
        let mut child = tokio::process::Command::new(batond_path())
            .args(["mock-agent", "--state-dir"])
            .arg(dir.path().join(format!("mock-{n}")))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the mock agent");
        let (go, delays, cwd, to_journal) = (go.clone(), delays.clone(), cwd.clone(), to_journal.clone());
        tasks.push(tokio::spawn(async move {
            let mut to_agent = child.stdin.take().expect("stdin");
            let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            send(&mut to_agent, serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
            answer(&mut lines, 1).await;
            send(&mut to_agent, serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})).await;
            let session = answer(&mut lines, 2).await["result"]["sessionId"].as_str().expect("sessionId").to_string();
            go.wait().await;
            let prompt = format!("/paced {rate} {count}");
            send(&mut to_agent, serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}})).await;
            let mut mine = Vec::with_capacity(count as usize);
            loop {
                let line = lines.next_line().await.expect("read").expect("the mock agent ended");
                let value: serde_json::Value = serde_json::from_str(&line).expect("JSON-RPC");
                if value["id"] == 3 {
                    break;
                }
                if let Some(text) = value["params"]["update"]["content"]["text"].as_str() {
                    match &to_journal {
                        Some(journal) => journal.send((Instant::now(), text.to_string())).expect("journal"),
                        None => mine.extend(delay_of(text)),
                    }
                }
            }
            delays.lock().expect("delays").extend(mine);
            drop(child);
        }));
    }
    drop(to_journal);
    go.wait().await;
    let cpu_before = cpu_time(std::process::id());
    let started = Instant::now();
    for task in tasks {
        task.await.expect("agent task");
    }
    let mut delays = std::mem::take(&mut *delays.lock().expect("delays"));
    if let Some(journal) = journal {
        delays = tokio::task::spawn_blocking(move || journal.join().expect("journal thread")).await.expect("journal");
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time(std::process::id()).saturating_sub(cpu_before);
    (Figures { events: delays.len() as u64, elapsed, delays }, cpu)
}

type AgentLines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

async fn send(to_agent: &mut tokio::process::ChildStdin, message: serde_json::Value) {
    to_agent.write_all(format!("{message}\n").as_bytes()).await.expect("write");
}

/// Reads up to the answer to request `id`.
async fn answer(lines: &mut AgentLines, id: u64) -> serde_json::Value {
    loop {
        let line = lines.next_line().await.expect("read").expect("the mock agent ended");
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON-RPC");
        if value["id"] == id && value.get("method").is_none() {
            return value;
        }
    }
}

fn batond_path() -> std::ffi::OsString {
    std::env::var_os("BATON_BENCH_BATOND").unwrap_or_else(|| env!("CARGO_BIN_EXE_batond").into())
}

async fn run(agents: usize) {
    let rate = (TOTAL_RATE / agents as u64).max(1);
    let count = rate * SECONDS;
    let (mut baton, cpu, fds_per_agent, kib_per_agent) = through_batond(agents, rate, count).await;
    eprintln!("{agents} agents: the yardsticks");
    let (mut raw, raw_cpu) = over_raw_pipes(agents, rate, count, false).await;
    let (mut durable, durable_cpu) = over_raw_pipes(agents, rate, count, true).await;
    assert_eq!(raw.events, baton.events, "the yardstick reads every chunk too");
    assert_eq!(durable.events, baton.events, "the durable yardstick reads every chunk too");
    baton.delays.sort();
    raw.delays.sort();
    durable.delays.sort();
    let (p50, p99) = (pick(&baton.delays, 0.5), pick(&baton.delays, 0.99));
    let per_event = |cpu: Duration, figures: &Figures| cpu.as_secs_f64() * 1e6 / figures.events.max(1) as f64;
    let cpu_per_event = per_event(cpu, &baton);
    let status = |ok: bool| if ok { "ok" } else { "MISS" };
    println!(
        "| {agents} agents × {rate}/s: {} events, batond {:.0} events/s (raw pipes {:.0}) | latency p50 {} / p99 {} (raw pipes {} / {}) | p99 ≤ 3 ms | {} |",
        baton.events,
        baton.rate(),
        raw.rate(),
        ms(p50),
        ms(p99),
        ms(pick(&raw.delays, 0.5)),
        ms(pick(&raw.delays, 0.99)),
        status(p99 <= Duration::from_millis(3))
    );
    println!(
        "| {agents} agents, the durable yardstick (raw pipes, each group of 1 ms synced to a file) | {:.0} events/s, latency p50 {} / p99 {} | - | - |",
        durable.rate(),
        ms(pick(&durable.delays, 0.5)),
        ms(pick(&durable.delays, 0.99)),
    );
    println!(
        "| {agents} agents: batond CPU per event | {cpu_per_event:.1} µs (raw pipes {:.1} µs, durable yardstick {:.1} µs) | ≤ 15 µs | {} |",
        per_event(raw_cpu, &raw),
        per_event(durable_cpu, &durable),
        status(cpu_per_event <= 15.0)
    );
    println!(
        "| {agents} idle agents: batond descriptors / resident memory per agent | {fds_per_agent:.2} / {kib_per_agent:.0} KiB | ≤ 3 / ≤ 40 KiB | {} |",
        status(fds_per_agent <= 3.0 && kib_per_agent <= 40.0)
    );
}

#[tokio::main]
async fn main() {
    raise_descriptor_limit();
    let counts: Vec<usize> = std::env::var("BATON_BENCH_AGENTS")
        .ok()
        .map(|list| list.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 200]);
    for agents in counts {
        run(agents).await;
    }
}
