//! Whole-screen snapshots: the app is driven with scripted server data through its public
//! entry points (as the event loop would) and drawn on a 100x30 `TestBackend`. Ids and times are
//! fixed by the script and the view clock, so the screens are reproducible.

use std::time::{Duration, Instant};

use baton_protocol::{
    AgentInfo, ClientError, MessageKind, MessageListResult, Notification, PermissionOption, PlanEntry, SessionEvent,
    SessionState, StateChanged, SubscribeResult, TaskState,
};
use baton_tui::action::{Action, EditOp};
use baton_tui::app::App;
use baton_tui::command::{Reply, Request};
use baton_tui::ui::{self, ViewContext};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;

use crate::common::*;

fn screen(app: &App, instant: Instant) -> TestBackend {
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).expect("test terminal");
    let ctx = ViewContext { now: now(), instant };
    terminal
        .draw(|frame| {
            ui::draw(frame, app, &ctx);
        })
        .expect("draw");
    terminal.backend().clone()
}

fn event(app: &mut App, seq: u64, event: SessionEvent) {
    app.on_notification(Notification::Event(record("s-1", seq, event)));
}

fn plan_entry(content: &str, status: &str) -> PlanEntry {
    PlanEntry { content: content.into(), priority: "medium".into(), status: status.into() }
}

/// The interrupted session `s-1` opened: auto-resumed, its backlog loaded, and the rest of
/// its journal streamed in (with a replayed event among them).
fn app_with_transcript() -> App {
    let mut app = listed_app();
    for _ in 0..2 {
        app.handle_action(Action::MoveDown);
    }
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    let needs = status("s-1", "t-1", SessionState::WaitingForInput, true);
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-1".into() }, Reply::Status(needs));

    let backlog = MessageListResult {
        messages: vec![
            message(1, MessageKind::User, "The login page forgets where I was going. Fix the redirect.", None),
            message(2, MessageKind::Agent, "I'll look at", Some("m1")),
        ],
        has_more: false,
        cut: Vec::new(),
    };
    reply(&mut app, 1, Request::LoadMessages { session_id: "s-1".into() }, Reply::Messages(backlog));
    let subscribe = Request::Subscribe { session_id: "s-1".into(), since_seq: Some(1) };
    reply(&mut app, 1, subscribe, Reply::Subscribed(SubscribeResult { session_id: "s-1".into(), current_seq: 14 }));

    event(&mut app, 2, chunk("m1", "I'll look at "));
    event(&mut app, 3, chunk("m1", "the redirect handler "));
    event(&mut app, 3, chunk("m1", "the redirect handler "));
    event(&mut app, 4, chunk("m1", "first."));
    event(
        &mut app,
        5,
        SessionEvent::ThoughtChunk {
            message_id: Some("th1".into()),
            text: "The `next` parameter is probably dropped.".into(),
        },
    );
    event(
        &mut app,
        6,
        SessionEvent::ToolCall {
            tool_call_id: "tc-1".into(),
            title: "Read src/auth/redirect.rs".into(),
            tool_kind: Some("read".into()),
            status: Some("pending".into()),
            content: None,
            raw_input: None,
        },
    );
    event(
        &mut app,
        7,
        SessionEvent::ToolCallUpdate {
            tool_call_id: "tc-1".into(),
            title: None,
            status: Some("completed".into()),
            content: None,
            raw_output: None,
        },
    );
    event(
        &mut app,
        8,
        SessionEvent::Plan {
            entries: vec![
                plan_entry("Find where `next` is dropped", "completed"),
                plan_entry("Keep `next` through the login form", "in_progress"),
                plan_entry("Add a regression test", "pending"),
            ],
        },
    );
    event(&mut app, 9, SessionEvent::Error { message: "agent process exited (server restart)".into() });
    event(&mut app, 10, SessionEvent::status("Session resumed"));
    event(&mut app, 11, SessionEvent::TurnStarted { turn_id: None });
    event(&mut app, 12, chunk("m2", "Found it: the form posts without `next`. I'll run the tests."));
    let option = |id: &str, name: &str, kind: &str| PermissionOption {
        option_id: id.into(),
        name: name.into(),
        kind: kind.into(),
    };
    event(
        &mut app,
        13,
        SessionEvent::PermissionRequest {
            request_id: "perm-1".into(),
            tool_call: json!({"title": "Run `cargo test -p auth`"}),
            options: vec![
                option("once", "Allow once", "allow_once"),
                option("always", "Allow always", "allow_always"),
                option("reject", "Reject", "reject_once"),
            ],
        },
    );
    // The resume brought the agent back and its turn runs.
    app.on_notification(Notification::StateChanged(StateChanged {
        session_id: "s-1".into(),
        task_id: "t-1".into(),
        state: SessionState::Running,
        previous_state: Some(SessionState::Starting),
        task_state: TaskState::InProgress,
        task_title: "Task".into(),
        last_seq: 0,
        updated_at: "2025-06-02T14:03:12.004Z".into(),
        needs_resume: false,
        attention: None,
        attention_since: None,
        change_seq: 0,
    }));
    app
}

#[test]
fn session_list_and_transcript() {
    let app = app_with_transcript();
    insta::assert_snapshot!(screen(&app, Instant::now()));
}

#[test]
fn help_overlay() {
    let mut app = app_with_transcript();
    app.handle_action(Action::ToggleHelp);
    insta::assert_snapshot!(screen(&app, Instant::now()));
}

#[test]
fn reconnecting_status_bar() {
    let mut app = app_with_transcript();
    let base = Instant::now();
    app.on_disconnected("the server closed the connection", base);
    let refused = ClientError::Connect("connection refused".into());
    app.on_connect_failed(&refused, base);
    app.on_connect_failed(&refused, base);
    // Past the flash's lifetime, so the status bar shows the key hints again.
    app.on_tick(base + Duration::from_secs(60));
    insta::assert_snapshot!(screen(&app, base));
}

#[test]
fn new_task_form() {
    let mut app = listed_app();
    let agent = |name: &str, display: &str| AgentInfo {
        name: name.into(),
        display_name: display.into(),
        native_session_resume: true,
        history_context_injection: false,
        installed: true,
        mcp_servers: Vec::new(),
    };
    reply(
        &mut app,
        1,
        Request::ListAgents,
        Reply::Agents(vec![agent("claude-code", "Claude Code"), agent("mock", "Mock agent")]),
    );
    app.handle_action(Action::NewTask);
    for c in "Add rate limiting".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    app.handle_action(Action::NextField);
    app.handle_action(Action::NextField);
    app.handle_action(Action::Edit(EditOp::Right));
    insta::assert_snapshot!(screen(&app, Instant::now()));
}

#[test]
fn first_start_before_the_list_arrives() {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    // No session to open: the keys said are those that make one.
    let shown = screen(&app, Instant::now());
    let text = shown.to_string();
    assert!(text.contains("n new task") && !text.contains("Enter open"), "{text}");
    insta::assert_snapshot!(shown);
}

fn agents(installed_claude: bool) -> Vec<AgentInfo> {
    let agent = agent_info;
    vec![agent("claude-code", "Claude Code", installed_claude), agent("mock", "Mock agent", true)]
}

/// An agent the server did not find is marked and needs a second Enter; a refused task keeps
/// the form open, with what was typed and the server's reason.
#[test]
fn new_task_form_with_a_missing_agent_and_a_refusal() {
    let mut app = listed_app();
    reply(&mut app, 1, Request::ListAgents, Reply::Agents(agents(false)));
    app.handle_action(Action::NewTask);
    for c in "Add rate limiting".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    app.handle_action(Action::NextField);
    app.handle_action(Action::NextField);
    // The first installed agent was chosen; Left picks Claude Code, which is not installed.
    app.handle_action(Action::Edit(EditOp::Left));
    app.handle_action(Action::Submit);
    assert_eq!(requests(&mut app), vec![], "not without a second Enter");
    insta::assert_snapshot!("missing_agent_warning", screen(&app, Instant::now()));

    app.handle_action(Action::Submit);
    let sent = requests(&mut app);
    let [Request::CreateTask(params)] = sent.as_slice() else { panic!("expected task.create, got {sent:?}") };
    assert_eq!((params.title.as_str(), params.agent.as_str()), ("Add rate limiting", "claude-code"));
    let refused = ClientError::Server(baton_protocol::ErrorPayload::new(
        baton_protocol::ErrorCode::ValidationError,
        "workdir /srv/app is not a directory",
    ));
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::CreateTask(params.clone()),
        result: Err(refused),
    });
    insta::assert_snapshot!("task_refused_form_kept", screen(&app, Instant::now()));

    // Enter again sends the same values; the answer closes the form and opens the session.
    app.handle_action(Action::Submit);
    let again = requests(&mut app);
    assert_eq!(again, vec![Request::CreateTask(params.clone())]);
    let task = baton_protocol::Task {
        id: "t-9".into(),
        title: params.title.clone(),
        description: String::new(),
        state: TaskState::InProgress,
        agent: "claude-code".into(),
        workdir: "/srv".into(),
        repository: None,
        worktree_branch: None,
        base_commit: None,
        base_branch: None,
        pull_request_url: None,
        created_at: NOW.into(),
        updated_at: NOW.into(),
        archived: false,
        mcp_servers: Vec::new(),
    };
    let session = row(status("s-9", "t-9", SessionState::Starting, false), "Add rate limiting", NOW);
    let created = baton_protocol::TaskCreateResult { task, session };
    reply(&mut app, 1, Request::CreateTask(params.clone()), Reply::TaskCreated(Box::new(created)));
    assert!(app.overlay().is_none());
    assert_eq!(app.opened_session(), Some("s-9"));
}

/// Agent names take the width the list has; a long error wraps in the status area.
#[test]
fn long_agent_names_and_a_long_error() {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.take_commands();
    let mut rows = session_rows();
    rows[0].status.agent = "claude-code".into();
    rows[1].status.agent = "gemini-cli-experimental".into();
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(rows));
    let failed = ClientError::Server(baton_protocol::ErrorPayload::new(
        baton_protocol::ErrorCode::Unavailable,
        "the agent did not become ready within 90 s; it said: error: failed to read the configuration \
         file at /home/ana/.config/agent/settings.json: permission denied (os error 13)",
    ));
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false },
        result: Err(failed),
    });
    insta::assert_snapshot!(screen(&app, Instant::now()));
}

/// Every colour drawn is one of the 16 named colours or the 256-colour palette: tmux, screen
/// and SSH terminals without true colour draw them right.
#[test]
fn screens_use_no_true_colour() {
    let mut app = app_with_transcript();
    let check = |app: &App, what: &str| {
        let backend = screen(app, Instant::now());
        for cell in backend.buffer().content() {
            for color in [cell.fg, cell.bg] {
                assert!(!matches!(color, ratatui::style::Color::Rgb(..)), "{what}: {color:?} at {:?}", cell.symbol());
            }
        }
    };
    check(&app, "list and transcript");
    app.handle_action(Action::ToggleHelp);
    check(&app, "help");
    app.handle_action(Action::CloseOverlay);
    app.handle_action(Action::NewTask);
    check(&app, "new task form");
}

/// The form's Worktree switch (Space) makes the task on the repository Workdir names, with a
/// branch and worktree of its own; without a directory it says what is missing.
#[test]
fn new_task_form_gives_a_task_a_worktree_of_its_own() {
    let mut app = listed_app();
    reply(&mut app, 1, Request::ListAgents, Reply::Agents(agents(true)));
    app.handle_action(Action::NewTask);
    for c in "Add rate limiting".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    for _ in 0..4 {
        app.handle_action(Action::NextField);
    }
    app.handle_action(Action::Edit(EditOp::Insert(' ')));
    let shown = screen(&app, Instant::now()).to_string();
    assert!(shown.contains("[x] a branch and worktree of its own"), "{shown}");
    app.handle_action(Action::Submit);
    assert_eq!(requests(&mut app), vec![], "no directory: nothing sent");
    let shown = screen(&app, Instant::now()).to_string();
    assert!(shown.contains("give its directory in Workdir"), "{shown}");

    app.handle_action(Action::NextField);
    app.handle_action(Action::NextField);
    app.handle_action(Action::NextField);
    app.handle_action(Action::NextField);
    for c in "/home/ana/src/webapp".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    app.handle_action(Action::Submit);
    let sent = requests(&mut app);
    let [Request::CreateTask(params)] = sent.as_slice() else { panic!("expected task.create, got {sent:?}") };
    assert_eq!(params.repository.as_deref(), Some("/home/ana/src/webapp"));
    assert!(params.worktree && params.workdir.is_none());
}
