//! Scripted server data for driving the app without a server: rows, events and replies with
//! fixed ids and times, so that screens are reproducible.

pub mod live;
pub mod tmux;

use baton_protocol::{
    EventRecord, Message, MessageKind, MessageListResult, Notification, PermissionOption, ResumeReason, SessionEvent,
    SessionInfo, SessionState, SessionStatus, StateChanged, TaskState,
};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Command, Outcome, Reply, Request};
use chrono::{DateTime, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub const SERVER: &str = "ws://127.0.0.1:7777/ws";
pub const NOW: &str = "2026-11-29T18:00:00Z";

pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW).map(|t| t.with_timezone(&Utc)).expect("fixed time parses")
}

pub fn status(session_id: &str, task_id: &str, state: SessionState, needs_resume: bool) -> SessionStatus {
    SessionStatus {
        session_id: session_id.into(),
        task_id: task_id.into(),
        agent: "mock".into(),
        state,
        task_state: if state.is_terminal() { TaskState::Completed } else { TaskState::Review },
        is_agent_running: state.is_active() && !needs_resume,
        is_resumable: needs_resume,
        needs_resume,
        resume_reason: if needs_resume {
            ResumeReason::AgentNotRunning
        } else if state.is_terminal() {
            ResumeReason::TerminalState
        } else {
            ResumeReason::AgentRunning
        },
        has_resume_token: true,
        last_error: None,
        worktree_path: None,
        agent_pid: None,
        attention: None,
        attention_since: None,
        change_seq: 0,
    }
}

pub fn row(status: SessionStatus, title: &str, created_at: &str) -> SessionInfo {
    SessionInfo {
        status,
        task_title: title.into(),
        task_archived: false,
        created_at: created_at.into(),
        updated_at: created_at.into(),
        last_seq: 0,
        forked_from: None,
    }
}

/// Three sessions in two tasks; `s-1` and `s-3` were interrupted by a server restart and need
/// resuming.
pub fn session_rows() -> Vec<SessionInfo> {
    vec![
        row(
            status("s-1", "t-1", SessionState::WaitingForInput, true),
            "Fix the login redirect",
            "2026-11-29T17:55:00Z",
        ),
        row(
            SessionStatus { task_state: TaskState::Review, ..status("s-2", "t-1", SessionState::Completed, false) },
            "Fix the login redirect",
            "2026-11-29T16:00:00Z",
        ),
        row(
            status("s-3", "t-2", SessionState::WaitingForInput, true),
            "Write the release notes",
            "2026-11-29T17:59:20Z",
        ),
    ]
}

pub fn record(session_id: &str, seq: u64, event: SessionEvent) -> EventRecord {
    EventRecord { session_id: session_id.into(), seq, event, created_at: NOW.into() }
}

pub fn chunk(message_id: &str, text: &str) -> SessionEvent {
    SessionEvent::MessageChunk { message_id: Some(message_id.into()), text: text.into() }
}

pub fn message(seq: u64, kind: MessageKind, text: &str, message_id: Option<&str>) -> Message {
    Message {
        seq,
        kind,
        text: text.into(),
        message_id: message_id.map(str::to_string),
        tool_call_id: None,
        status: None,
        data: None,
        created_at: NOW.into(),
        updated_at: NOW.into(),
    }
}

/// Answers `request` successfully on the current connection (epoch 1 unless given).
pub fn reply(app: &mut App, epoch: u64, request: Request, reply: Reply) {
    app.on_outcome(Outcome { epoch, request, result: Ok(reply) });
}

/// The requests among the app's pending commands.
pub fn requests(app: &mut App) -> Vec<Request> {
    app.take_commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Send(request) => Some(request),
            Command::Connect { .. }
            | Command::StartServer
            | Command::Copy(_)
            | Command::StopServer
            | Command::Alert(_)
            | Command::Mouse(_)
            | Command::Shell(_) => None,
        })
        .collect()
}

/// A connected app with the three sessions listed and nothing opened.
pub fn listed_app() -> App {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.take_commands();
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(session_rows()));
    app
}

/// Opens `session_id` from the list (moving the cursor down to it) and loads an empty backlog.
pub fn open(app: &mut App, session_id: &str) {
    while app.cursor_session() != Some(session_id) {
        let before = app.cursor_session().map(str::to_string);
        app.handle_action(Action::MoveDown);
        assert_ne!(app.cursor_session().map(str::to_string), before, "{session_id} is not below the cursor");
    }
    app.handle_action(Action::OpenSelected);
    let empty = MessageListResult { messages: vec![], has_more: false, cut: Vec::new() };
    reply(app, 1, Request::LoadMessages { session_id: session_id.into() }, Reply::Messages(empty));
    app.take_commands();
}

/// `session.state_changed` for a session of a task in progress.
pub fn state_changed(session_id: &str, task_id: &str, state: SessionState, needs_resume: bool) -> Notification {
    Notification::StateChanged(StateChanged {
        session_id: session_id.into(),
        task_id: task_id.into(),
        state,
        previous_state: None,
        task_state: TaskState::InProgress,
        task_title: "Task".into(),
        last_seq: 0,
        updated_at: "2025-06-02T14:03:12.004Z".into(),
        needs_resume,
        attention: None,
        attention_since: None,
        change_seq: 0,
    })
}

/// `session.state_changed` for a session, received by `app`.
pub fn state(app: &mut App, session_id: &str, task_id: &str, state: SessionState) {
    app.on_notification(state_changed(session_id, task_id, state, false));
}

/// Permission request `p-1` ("Write file", options `allow` and `reject`) at `seq`.
pub fn ask_permission(app: &mut App, session_id: &str, seq: u64) {
    let option = |id: &str, kind: &str| PermissionOption { option_id: id.into(), name: id.into(), kind: kind.into() };
    let ask = SessionEvent::PermissionRequest {
        request_id: "p-1".into(),
        tool_call: serde_json::json!({"title": "Write file"}),
        options: vec![option("allow", "allow_once"), option("reject", "reject_once")],
    };
    app.on_notification(Notification::Event(record(session_id, seq, ask)));
}

/// Draws a 100x30 frame the way the event loop does, handing the app its frame metrics (which
/// scrolling depends on); returns the screen's rows.
pub fn draw(app: &mut App) -> Vec<String> {
    draw_sized(app, 100, 30)
}

/// [`draw`] on a `width` x `height` terminal.
pub fn draw_sized(app: &mut App, width: u16, height: u16) -> Vec<String> {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = ratatui::Terminal::new(backend).expect("test terminal");
    let ctx = baton_tui::ui::ViewContext { now: now(), instant: std::time::Instant::now() };
    let mut metrics = Default::default();
    terminal.draw(|frame| metrics = baton_tui::ui::draw(frame, app, &ctx)).expect("draw");
    app.set_frame_metrics(metrics);
    terminal.backend().to_string().lines().map(str::to_string).collect()
}

/// An agent of `agent.list`.
pub fn agent_info(name: &str, display: &str, installed: bool) -> baton_protocol::AgentInfo {
    baton_protocol::AgentInfo {
        name: name.into(),
        display_name: display.into(),
        native_session_resume: true,
        history_context_injection: false,
        installed,
        mcp_servers: Vec::new(),
    }
}

/// The whole screen as text, drawn on a 100x30 terminal at the fixed time.
pub fn render(app: &App) -> String {
    render_sized(app, 100, 30)
}

/// The whole screen as text, drawn on a `width` x `height` terminal at the fixed time.
pub fn render_sized(app: &App, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let mut terminal = ratatui::Terminal::new(backend).expect("test terminal");
    let ctx = baton_tui::ui::ViewContext { now: now(), instant: std::time::Instant::now() };
    terminal
        .draw(|frame| {
            baton_tui::ui::draw(frame, app, &ctx);
        })
        .expect("draw");
    terminal.backend().to_string()
}

/// A key pressed without modifiers.
pub fn press(app: &mut App, code: KeyCode) {
    app.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// Each character of `text` pressed in turn.
pub fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// `s-3` opened with 40 one-line user messages (`message 1`..`message 40`) held, drawn once
/// (the frame's panes are known).
pub fn opened_with_history() -> App {
    let mut app = listed_app();
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    let messages = (1..=40).map(|seq| message(seq, MessageKind::User, &format!("message {seq}"), None)).collect();
    let backlog = MessageListResult { messages, has_more: false, cut: Vec::new() };
    reply(&mut app, 1, Request::LoadMessages { session_id: "s-3".into() }, Reply::Messages(backlog));
    app.take_commands();
    draw(&mut app);
    app
}
