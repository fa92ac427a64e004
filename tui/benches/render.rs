//! Frame time and memory of the TUI with a 100,000-message transcript.
//!
//! The transcript goes through the app's real path (`message.list` answer → `Transcript`, live
//! events → fold) and frames through the real view (`ui::draw`) on a 200x50 `TestBackend`:
//! following the tail while an answer streams in (one chunk per frame), and scrolled to the
//! middle. Prints one markdown table row per figure:
//! `| figure | measured | target | ok|MISS |`.
//!
//! `cargo bench -p baton-tui --bench render`

use std::time::{Duration, Instant};

use baton_protocol::{
    EventRecord, Message, MessageKind, MessageListResult, Notification, ResumeReason, SessionEvent, SessionInfo,
    SessionState, SessionStatus, TaskState,
};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Outcome, Reply, Request};
use baton_tui::ui::{self, ViewContext};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const MESSAGES: u64 = 100_000;
const FRAMES: usize = 1000;
const WIDTH: u16 = 200;
const HEIGHT: u16 = 50;
const FRAME_TARGET: Duration = Duration::from_millis(4);
const MEMORY_TARGET_MB: f64 = 100.0;
const SESSION: &str = "sess-bench";
const TIME: &str = "2026-11-29T18:00:00Z";

/// A small deterministic generator, so that every run lays out the same text.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() as usize) % (high - low)
    }
}

const WORDS: &[&str] = &[
    "the",
    "redirect",
    "handler",
    "drops",
    "next",
    "parameter",
    "when",
    "login",
    "form",
    "posts",
    "we",
    "should",
    "keep",
    "it",
    "through",
    "session",
    "cookie",
    "test",
    "passes",
    "now",
    "fixed",
    "in",
    "src/auth/redirect.rs",
    "function",
    "returns",
    "error",
    "value",
    "because",
    "config",
    "is",
    "missing",
    "and",
    "then",
    "retry",
    "after",
];

/// Words up to a length between `low` and `high` characters.
fn words(rng: &mut Lcg, low: usize, high: usize) -> String {
    let chars = rng.range(low, high);
    let mut text = String::with_capacity(chars + 16);
    while text.len() < chars {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(WORDS[rng.range(0, WORDS.len())]);
    }
    text
}

/// An agent answer of realistic length: paragraphs with emphasis, sometimes a code block.
fn answer(rng: &mut Lcg) -> String {
    let mut text = words(rng, 80, 500);
    text.push_str(" **");
    text.push_str(&words(rng, 12, 13));
    text.push_str("** and `inline_code()`.");
    if rng.range(0, 4) == 0 {
        text.push_str("\n```rust\n");
        for _ in 0..rng.range(2, 8) {
            text.push_str("    let value = config.get(\"next\").unwrap_or_default();\n");
        }
        text.push_str("```\n");
        text.push_str(&words(rng, 40, 200));
    }
    text
}

fn message(seq: u64, kind: MessageKind, text: String) -> Message {
    Message {
        seq,
        kind,
        text,
        message_id: None,
        tool_call_id: None,
        status: None,
        data: None,
        created_at: TIME.into(),
        updated_at: TIME.into(),
    }
}

/// Turns of: a user prompt, sometimes a thought, sometimes a tool call, an agent answer.
fn transcript_messages() -> Vec<Message> {
    let mut rng = Lcg(42);
    let mut out = Vec::with_capacity(MESSAGES as usize);
    let mut seq = 0;
    while (out.len() as u64) < MESSAGES {
        seq += 1;
        let kind_roll = out.len() % 4;
        let msg = match kind_roll {
            0 => message(seq, MessageKind::User, words(&mut rng, 20, 300)),
            1 if rng.range(0, 2) == 0 => message(seq, MessageKind::Thought, words(&mut rng, 40, 200)),
            1 | 2 if rng.range(0, 3) == 0 => {
                let mut call = message(seq, MessageKind::ToolCall, format!("Read src/module_{seq}.rs"));
                call.tool_call_id = Some(format!("tc-{seq}"));
                call.status = Some("completed".into());
                call.data = None;
                call
            }
            _ => message(seq, MessageKind::Agent, answer(&mut rng)),
        };
        out.push(msg);
    }
    out
}

fn session_row() -> SessionInfo {
    SessionInfo {
        status: SessionStatus {
            session_id: SESSION.into(),
            task_id: "task-bench".into(),
            agent: "mock".into(),
            state: SessionState::Running,
            task_state: TaskState::InProgress,
            is_agent_running: true,
            is_resumable: false,
            needs_resume: false,
            resume_reason: ResumeReason::AgentRunning,
            has_resume_token: true,
            last_error: None,
            worktree_path: None,
            agent_pid: None,
            attention: None,
            attention_since: None,
            change_seq: 0,
        },
        task_title: "A very long conversation".into(),
        task_archived: false,
        created_at: TIME.into(),
        updated_at: TIME.into(),
        last_seq: MESSAGES,
        forked_from: None,
    }
}

fn reply(app: &mut App, request: Request, reply: Reply) {
    app.on_outcome(Outcome { epoch: 1, request, result: Ok(reply) });
}

/// CPU time of this thread: what a frame costs, without the time the thread waited for a core
/// (this machine's cores are shared, and a descheduled thread's wall time says nothing about
/// the TUI).
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is a constant.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The time one frame took, on the wall clock and in CPU time.
#[derive(Clone, Copy)]
struct FrameTime {
    wall: Duration,
    cpu: Duration,
}

/// One frame as the event loop draws it; returns how long it took.
fn frame(terminal: &mut Terminal<TestBackend>, app: &mut App, ctx: &ViewContext) -> FrameTime {
    let (started, cpu_started) = (Instant::now(), thread_cpu_time());
    let mut metrics = Default::default();
    terminal.draw(|frame| metrics = ui::draw(frame, app, ctx)).expect("draw");
    app.set_frame_metrics(metrics);
    FrameTime { wall: started.elapsed(), cpu: thread_cpu_time().saturating_sub(cpu_started) }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "MISS"
    }
}

fn frame_rows(what: &str, times: &[FrameTime]) {
    for (clock, pick) in
        [("CPU time", (|t: &FrameTime| t.cpu) as fn(&FrameTime) -> Duration), ("wall clock", |t| t.wall)]
    {
        let mut sorted: Vec<Duration> = times.iter().map(pick).collect();
        sorted.sort();
        let (median, p99) = (percentile(&sorted, 0.5), percentile(&sorted, 0.99));
        println!(
            "| TUI frame, 100k messages, {WIDTH}x{HEIGHT}, {what}, {clock}, median / p99 ({} frames) | {} / {} | <= {} ms p99 | {} |",
            sorted.len(),
            ms(median),
            ms(p99),
            FRAME_TARGET.as_millis(),
            verdict(p99 <= FRAME_TARGET)
        );
    }
}

/// VmRSS and VmHWM of this process, in MB.
fn memory() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn main() {
    let mut app = App::new("ws://127.0.0.1:7777/ws", None);
    app.on_connected(1);
    reply(&mut app, Request::ListSessions, Reply::Sessions(vec![session_row()]));
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    let loaded = Instant::now();
    let page = MessageListResult { messages: transcript_messages(), has_more: false, cut: Vec::new() };
    reply(&mut app, Request::LoadMessages { session_id: SESSION.into() }, Reply::Messages(page));
    let load_time = loaded.elapsed();
    app.take_commands();
    let entries = app.opened_transcript().map_or(0, |t| t.entries().len());
    assert!(entries as u64 >= MESSAGES - 1, "the transcript holds {entries} entries");

    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).expect("test terminal");
    let ctx = ViewContext::current();
    let first = frame(&mut terminal, &mut app, &ctx);

    // Following the tail while the answer streams: one chunk per frame.
    let last_seq = app.opened_transcript().map_or(0, |t| t.last_seq());
    let mut tail = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        let seq = last_seq + 1 + i as u64;
        let text = if i % 12 == 11 { "done.\n".to_string() } else { format!("word{i} ") };
        let event = SessionEvent::MessageChunk { message_id: Some("streaming".into()), text };
        let record = EventRecord { session_id: SESSION.into(), seq, event, created_at: TIME.into() };
        app.on_notification(Notification::Event(record));
        tail.push(frame(&mut terminal, &mut app, &ctx));
    }
    let screen = terminal.backend().to_string();
    assert!(screen.contains(&format!("word{}", FRAMES - 2)), "the tail is on screen");

    // Scrolled half way up, by pages, as PgUp does.
    let max_scroll = app.frame_metrics().transcript_max_scroll;
    let pages = max_scroll / 2 / (HEIGHT as usize - 8);
    for _ in 0..pages {
        app.handle_action(Action::ScrollUp);
    }
    frame(&mut terminal, &mut app, &ctx);
    let scrolled = app.frame_metrics().transcript_scroll;
    assert!(scrolled > max_scroll / 3, "scrolled {scrolled} of {max_scroll} rows");
    let mut middle = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES {
        // Line by line, so that every frame shows other rows.
        app.handle_action(if i % 2 == 0 { Action::ScrollLineUp } else { Action::ScrollUp });
        middle.push(frame(&mut terminal, &mut app, &ctx));
    }

    frame_rows("following the tail while streaming", &tail);
    frame_rows("scrolled to the middle", &middle);
    println!(
        "| TUI first frame after loading 100k messages (lays out every message once), CPU time | {} | <= 1000 ms | {} |",
        ms(first.cpu),
        verdict(first.cpu <= Duration::from_secs(1))
    );
    println!(
        "| TUI loading a 100k-message backlog into the transcript | {} | <= 1000 ms | {} |",
        ms(load_time),
        verdict(load_time <= Duration::from_secs(1))
    );
    match memory() {
        Some((rss, hwm)) => {
            println!(
                "| TUI memory with 100k messages (RSS) | {rss:.0} MB | <= {MEMORY_TARGET_MB:.0} MB | {} |",
                verdict(rss <= MEMORY_TARGET_MB)
            );
            println!(
                "| TUI peak memory loading 100k messages (VmHWM) | {hwm:.0} MB | <= {MEMORY_TARGET_MB:.0} MB | {} |",
                verdict(hwm <= MEMORY_TARGET_MB)
            );
        }
        None => eprintln!("no /proc/self/status: memory not measured"),
    }
    eprintln!("{entries} entries; {max_scroll} rows above the last screen; scrolled to {scrolled}");
}
