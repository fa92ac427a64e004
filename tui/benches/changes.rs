//! Opening a task's changes in the TUI when its agent changed 1,000 files, and one more by a
//! 50,000-line diff: a real git repository, a real `batond` (its worktree task), the typed
//! client over a real WebSocket, the app's real path (`d`, the `task.changes` and `task.diff`
//! answers, its requests at once as the TUI's runner sends them) and the real view on a 200x50
//! `TestBackend`. Opening is timed from the key to the first frame that shows the big diff, and
//! to the frame where every line count is in; then frames scrolling through it. Prints one
//! markdown table row per figure: `| figure | measured | target | ok|MISS |`.
//!
//! `cargo bench -p baton-tui --bench changes`

use std::path::Path;
use std::time::{Duration, Instant};

use baton_protocol::*;
use baton_testkit::ServerBuilder;
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Command, Outcome, Reply, Request};
use baton_tui::ui::{self, ViewContext};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const FILES: usize = 1000;
/// Every line of this file changes: a diff of 50,000 lines.
const BIG_LINES: usize = 25_000;
const OPEN_TARGET: Duration = Duration::from_millis(100);
const TIME: &str = "2026-12-05T18:00:00Z";

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A repository whose first commit has `FILES` files of 20 lines and a big one.
fn repository(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Bench"]);
    git(dir, &["config", "user.email", "bench@example.com"]);
    for i in 0..FILES {
        let text: String = (0..20).map(|line| format!("file {i} line {line}\n")).collect();
        std::fs::create_dir_all(dir.join(format!("src/m{}", i / 100))).expect("dir");
        std::fs::write(dir.join(format!("src/m{}/f{i}.rs", i / 100)), text).expect("file");
    }
    let big: String = (0..BIG_LINES).map(|line| format!("let value_{line} = {line};\n")).collect();
    std::fs::write(dir.join("big.rs"), big).expect("big");
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "init"]);
}

/// What the agent did in the worktree: every file edited, the big one on every line.
fn edit(worktree: &Path) {
    for i in 0..FILES {
        let path = worktree.join(format!("src/m{}/f{i}.rs", i / 100));
        let text = std::fs::read_to_string(&path).expect("read").replace("line 7\n", "line seven\n");
        std::fs::write(path, text).expect("write");
    }
    let big: String = (0..BIG_LINES).map(|line| format!("let value_{line} = {line} + 1;\n")).collect();
    std::fs::write(worktree.join("big.rs"), big).expect("big");
}

fn row(session_id: &str, task_id: &str) -> SessionInfo {
    SessionInfo {
        status: SessionStatus {
            session_id: session_id.into(),
            task_id: task_id.into(),
            agent: "mock".into(),
            state: SessionState::WaitingForInput,
            task_state: TaskState::Review,
            is_agent_running: false,
            is_resumable: true,
            needs_resume: false,
            resume_reason: ResumeReason::NotStarted,
            has_resume_token: false,
            last_error: None,
            worktree_path: None,
            agent_pid: None,
            attention: None,
            attention_since: None,
            change_seq: 0,
        },
        task_title: "A thousand files".into(),
        task_archived: false,
        created_at: TIME.into(),
        updated_at: TIME.into(),
        last_seq: 0,
        forked_from: None,
    }
}

/// Performs one of the app's requests of the changes with the real client.
async fn perform(client: Client, request: Request) -> Outcome {
    let reply = match &request {
        Request::Changes { task_id, counts } => {
            let params =
                TaskChangesParams { limit: Some(MAX_CHANGES_PAGE), counts: *counts, ..TaskChangesParams::new(task_id) };
            Reply::Changes(Box::new(client.request(params).await.expect("task.changes")))
        }
        Request::Diff { task_id, path, part } => {
            let params = TaskDiffParams { task_id: task_id.clone(), path: path.clone(), part: *part };
            let result = client.request(params).await.expect("task.diff");
            Reply::Diff { task_id: task_id.clone(), result: Box::new(result) }
        }
        other => panic!("the changes view asked for {other:?}"),
    };
    Outcome { epoch: 1, request, result: Ok(reply) }
}

/// Runs the app as the TUI's event loop does: its requests at once, each answer applied as it
/// comes and a frame drawn after it, until `done` holds for a frame. Returns the time from
/// `started` to the first frame where `first` held, and to the one where `done` did.
async fn run_until(
    app: &mut App,
    client: &Client,
    terminal: &mut Terminal<TestBackend>,
    started: Instant,
    first: impl Fn(&str) -> bool,
    done: impl Fn(&str) -> bool,
) -> (Duration, Duration) {
    let ctx = ViewContext::current();
    let mut pending = tokio::task::JoinSet::new();
    let mut first_at = None;
    loop {
        for command in app.take_commands() {
            if let Command::Send(request) = command {
                pending.spawn(perform(client.clone(), request));
            }
        }
        let outcome = pending.join_next().await.expect("the view waits for an answer").expect("request");
        app.on_outcome(outcome);
        terminal
            .draw(|frame| {
                ui::draw(frame, app, &ctx);
            })
            .expect("draw");
        let screen = terminal.backend().to_string();
        if first_at.is_none() && first(&screen) {
            first_at = Some(started.elapsed());
        }
        if done(&screen) {
            return (first_at.expect("the first frame came before the last"), started.elapsed());
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    repository(&repo);
    let server = ServerBuilder::new(&dir.path().join("server")).start().await;
    let (client, _notifications) = server.client().await;
    let mut params = TaskCreateParams::new("A thousand files", "", "mock");
    params.repository = Some(repo.display().to_string());
    params.worktree = true;
    params.start = false;
    let created = client.request(params).await.expect("task.create");
    edit(Path::new(&created.task.workdir));
    let task_id = created.task.id.clone();

    // The server alone: what the two reads take.
    let started = Instant::now();
    let listed = client
        .request(TaskChangesParams { limit: Some(MAX_CHANGES_PAGE), ..TaskChangesParams::new(&task_id) })
        .await
        .expect("task.changes");
    let changes_time = started.elapsed();
    assert_eq!(listed.total as usize, FILES + 1);
    let started = Instant::now();
    let big = client
        .request(TaskDiffParams { task_id: task_id.clone(), path: "big.rs".into(), part: ChangePart::Uncommitted })
        .await
        .expect("task.diff");
    let diff_time = started.elapsed();
    assert!(
        !big.truncated && big.diff.lines().count() > 2 * BIG_LINES,
        "the whole diff: {} lines",
        big.diff.lines().count()
    );

    // The TUI: from `d` to the first frame with the big diff (its file is the first listed).
    let mut app = App::new("ws://127.0.0.1:7777/ws", None);
    app.on_connected(1);
    app.take_commands();
    let session = row(&created.session.status.session_id, &task_id);
    app.on_outcome(Outcome { epoch: 1, request: Request::ListSessions, result: Ok(Reply::Sessions(vec![session])) });
    app.take_commands();
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).expect("terminal");
    let ctx = ViewContext::current();
    let opened = Instant::now();
    app.handle_action(Action::OpenChanges);
    let big_diff = |screen: &str| screen.contains("-let value_0 = 0;");
    // The big file's row with its counts: `+25000 -25000`.
    let counted = |screen: &str| big_diff(screen) && screen.contains(&format!("+{BIG_LINES} -{BIG_LINES}"));
    let (open_time, counted_time) = run_until(&mut app, &client, &mut terminal, opened, big_diff, counted).await;

    // The TUI's own part: the same answers applied and the first frame drawn, no server.
    let mut fresh = App::new("ws://127.0.0.1:7777/ws", None);
    fresh.on_connected(1);
    let session = row(&created.session.status.session_id, &task_id);
    fresh.on_outcome(Outcome { epoch: 1, request: Request::ListSessions, result: Ok(Reply::Sessions(vec![session])) });
    fresh.take_commands();
    let started = Instant::now();
    fresh.handle_action(Action::OpenChanges);
    let changes_request = Request::Changes { task_id: task_id.clone(), counts: true };
    let answer = Reply::Changes(Box::new(listed.clone()));
    fresh.on_outcome(Outcome { epoch: 1, request: changes_request, result: Ok(answer) });
    let diff_request = Request::Diff { task_id: task_id.clone(), path: "big.rs".into(), part: ChangePart::Uncommitted };
    let answer = Reply::Diff { task_id: task_id.clone(), result: Box::new(big.clone()) };
    fresh.on_outcome(Outcome { epoch: 1, request: diff_request, result: Ok(answer) });
    terminal
        .draw(|frame| {
            ui::draw(frame, &fresh, &ctx);
        })
        .expect("draw");
    let tui_time = started.elapsed();

    // Frames while scrolling through the big diff a page at a time.
    let mut frames = Vec::new();
    for _ in 0..200 {
        app.handle_action(Action::ScrollDown);
        let started = Instant::now();
        terminal
            .draw(|frame| {
                ui::draw(frame, &app, &ctx);
            })
            .expect("draw");
        frames.push(started.elapsed());
    }
    frames.sort();
    let p99 = frames[(frames.len() as f64 * 0.99) as usize - 1];
    println!(
        "| task.changes, {} files (1,000 edited + the big one), over the socket | {} | - | - |",
        FILES + 1,
        ms(changes_time)
    );
    println!(
        "| task.diff, {BIG_LINES} lines changed ({} lines of diff, {} KiB), over the socket | {} | - | - |",
        big.diff.lines().count(),
        big.diff.len() / 1024,
        ms(diff_time)
    );
    println!(
        "| TUI: `d` to the first frame showing the big diff, 200x50 | {} | <= {} ms | {} |",
        ms(open_time),
        OPEN_TARGET.as_millis(),
        if open_time <= OPEN_TARGET { "ok" } else { "MISS" }
    );
    println!("| TUI: `d` to the frame with every file's line counts too | {} | - | - |", ms(counted_time));
    println!("| TUI alone: the two answers applied and the first frame drawn | {} | - | - |", ms(tui_time));
    println!("| TUI frame scrolling the big diff, p99 of 200 | {} | - | - |", ms(p99));
    server.stop().await;
}
