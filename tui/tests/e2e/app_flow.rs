//! The app's behaviour against scripted server answers: what it asks the server, in which
//! order, and what it keeps.

use std::time::{Duration, Instant};

use baton_protocol::{
    ClientError, ErrorPayload, MessageKind, MessageListResult, Notification, PermissionOption, SessionEvent,
    SessionState, StateChanged, SubscribeResult, TaskState,
};
use baton_tui::action::{Action, EditOp};
use baton_tui::app::{App, ConnectionState};
use baton_tui::command::{Command, Outcome, Reply, Request, ServerRestart};
use serde_json::json;

use crate::common::*;

/// Moves the cursor to `session_id` and presses Enter.
fn open(app: &mut App, session_id: &str) {
    for _ in 0..10 {
        app.handle_action(Action::MoveUp);
    }
    while app.cursor_session() != Some(session_id) {
        let before = app.cursor_session().map(str::to_string);
        app.handle_action(Action::MoveDown);
        assert_ne!(app.cursor_session().map(str::to_string), before, "{session_id} is not listed");
    }
    app.handle_action(Action::OpenSelected);
}

fn render(app: &App) -> String {
    let backend = ratatui::backend::TestBackend::new(100, 30);
    let mut terminal = ratatui::Terminal::new(backend).expect("test terminal");
    let ctx = baton_tui::ui::ViewContext { now: now(), instant: Instant::now() };
    terminal
        .draw(|frame| {
            baton_tui::ui::draw(frame, app, &ctx);
        })
        .expect("draw");
    terminal.backend().to_string()
}

/// Opens `s-1` and loads a backlog of a user message and a finished agent message.
fn opened_with_backlog() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.take_commands();
    let backlog = MessageListResult {
        messages: vec![
            message(1, MessageKind::User, "hello", None),
            message(2, MessageKind::Agent, "Hi there", Some("m1")),
        ],
        has_more: false,
        cut: Vec::new(),
    };
    reply(&mut app, 1, Request::LoadMessages { session_id: "s-1".into() }, Reply::Messages(backlog));
    app
}

fn agent_text(app: &App) -> Vec<String> {
    let transcript = app.transcript("s-1").expect("transcript loaded");
    transcript
        .entries()
        .iter()
        .filter_map(|e| match &e.body {
            baton_tui::transcript::EntryBody::Agent { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn opening_a_session_asks_status_and_loads_its_backlog() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    assert_eq!(app.opened_session(), Some("s-1"));
    assert_eq!(
        requests(&mut app),
        vec![
            Request::SessionStatus { session_id: "s-1".into() },
            Request::QueueList { session_id: "s-1".into() },
            Request::LoadMessages { session_id: "s-1".into() },
            Request::Usage { session_id: Some("s-1".into()) },
        ]
    );
}

#[test]
fn a_session_that_needs_resume_is_resumed_once_per_selection() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.take_commands();
    let needs = status("s-1", "t-1", SessionState::WaitingForInput, true);
    let ask = || Request::SessionStatus { session_id: "s-1".into() };
    let auto_resume = Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: true };

    reply(&mut app, 1, ask(), Reply::Status(needs.clone()));
    assert_eq!(requests(&mut app), vec![auto_resume.clone()]);
    // Another answer for the same selection (a refresh, a reconnect) does not resume again.
    reply(&mut app, 1, ask(), Reply::Status(needs.clone()));
    assert_eq!(requests(&mut app), vec![]);

    // Selecting another session and coming back is a new selection.
    open(&mut app, "s-3");
    open(&mut app, "s-1");
    app.take_commands();
    reply(&mut app, 1, ask(), Reply::Status(needs));
    assert_eq!(requests(&mut app), vec![auto_resume]);
}

#[test]
fn no_resume_when_the_server_says_it_is_not_needed_or_not_possible() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    app.take_commands();
    let running = status("s-3", "t-2", SessionState::Running, false);
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-3".into() }, Reply::Status(running));
    let mut blocked = status("s-3", "t-2", SessionState::Running, true);
    blocked.is_resumable = false;
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-3".into() }, Reply::Status(blocked));
    assert_eq!(requests(&mut app), vec![]);
}

#[test]
fn the_newest_backlog_entry_is_rebuilt_from_a_subscription_without_duplicates() {
    let mut app = opened_with_backlog();
    // The agent message started at seq 2 may still grow: subscribe from just before it.
    assert_eq!(requests(&mut app), vec![Request::Subscribe { session_id: "s-1".into(), since_seq: Some(1) }]);
    for (seq, text) in [(2, "Hi "), (3, "there"), (3, "there"), (2, "Hi "), (4, "!")] {
        app.on_notification(Notification::Event(record("s-1", seq, chunk("m1", text))));
    }
    assert_eq!(agent_text(&app), vec!["Hi there!"]);
}

#[test]
fn reconnect_resubscribes_from_the_last_seq_held() {
    let mut app = opened_with_backlog();
    app.take_commands();
    for (seq, text) in [(2, "Hi "), (3, "there")] {
        app.on_notification(Notification::Event(record("s-1", seq, chunk("m1", text))));
    }
    let base = Instant::now();
    app.on_disconnected("gone", base);
    assert_eq!(app.take_commands(), vec![Command::Connect { after: Duration::from_millis(500) }]);
    assert!(matches!(app.connection(), ConnectionState::Reconnecting { .. }));

    app.on_connected(2);
    let sent = requests(&mut app);
    assert!(sent.contains(&Request::ListSessions));
    assert!(sent.contains(&Request::SessionStatus { session_id: "s-1".into() }));
    assert!(sent.contains(&Request::Subscribe { session_id: "s-1".into(), since_seq: Some(3) }));

    // The new subscription replays from seq 4; a duplicate of seq 3 changes nothing.
    app.on_notification(Notification::Event(record("s-1", 3, chunk("m1", "there"))));
    app.on_notification(Notification::Event(record("s-1", 4, chunk("m1", ", again"))));
    assert_eq!(agent_text(&app), vec!["Hi there, again"]);
}

#[test]
fn reconnect_delays_follow_the_backoff_schedule() {
    let mut app = listed_app();
    let base = Instant::now();
    app.on_disconnected("gone", base);
    let error = ClientError::Connect("connection refused".into());
    for _ in 0..6 {
        app.on_connect_failed(&error, base);
    }
    let delays: Vec<u64> = app
        .take_commands()
        .into_iter()
        .filter_map(|c| match c {
            Command::Connect { after } => Some(after.as_millis() as u64),
            Command::Send(_)
            | Command::StartServer
            | Command::Copy(_)
            | Command::StopServer
            | Command::Alert(_)
            | Command::Mouse(_)
            | Command::Shell(_) => None,
        })
        .collect();
    assert_eq!(delays, vec![500, 1000, 2000, 4000, 8000, 10000, 10000]);
    // A successful connection starts the schedule over.
    app.on_connected(2);
    app.on_disconnected("gone again", base);
    let after: Vec<Command> =
        app.take_commands().into_iter().filter(|c| matches!(c, Command::Connect { .. })).collect();
    assert_eq!(after, vec![Command::Connect { after: Duration::from_millis(500) }]);
}

#[test]
fn a_refused_token_goes_offline_instead_of_retrying() {
    let mut app = App::new(SERVER, None);
    let refused = ClientError::Server(ErrorPayload::new(baton_protocol::ErrorCode::Unauthorized, "bad token"));
    app.on_connect_failed(&refused, Instant::now());
    assert!(matches!(app.connection(), ConnectionState::Offline { .. }));
    assert_eq!(app.take_commands(), vec![]);
}

/// The commands after a failed connection attempt, as `StartServer` / `Connect <ms>` words.
fn after_failure(app: &mut App) -> Vec<String> {
    app.on_connect_failed(&ClientError::Connect("connection refused".into()), Instant::now());
    app.take_commands()
        .into_iter()
        .filter_map(|c| match c {
            Command::StartServer => Some("StartServer".to_string()),
            Command::Connect { after } => Some(format!("Connect {}", after.as_millis())),
            Command::Send(_)
            | Command::Copy(_)
            | Command::StopServer
            | Command::Alert(_)
            | Command::Mouse(_)
            | Command::Shell(_) => None,
        })
        .collect()
}

#[test]
fn a_lost_local_server_is_started_again_once_per_outage() {
    let mut app = listed_app();
    app.set_may_start_server(true);
    app.on_disconnected("the server closed the connection", Instant::now());
    assert_eq!(app.take_commands(), vec![Command::Connect { after: Duration::from_millis(500) }]);
    // The first reconnect attempt failed: start a server, and keep to the backoff.
    assert_eq!(after_failure(&mut app), vec!["StartServer", "Connect 1000"]);
    // The launcher's error is shown; later failures of this outage start nothing more.
    app.on_server_started(Err("something else holds 127.0.0.1:7777 but does not answer as batond".into()));
    assert!(
        app.flash_text().is_some_and(|t| t.contains("something else holds 127.0.0.1:7777")),
        "{:?}",
        app.flash_text()
    );
    assert_eq!(after_failure(&mut app), vec!["Connect 2000"]);
    assert_eq!(after_failure(&mut app), vec!["Connect 4000"]);
    // Connected again, then lost again: a new outage gets its own attempt.
    app.on_connected(2);
    app.take_commands();
    app.on_disconnected("gone again", Instant::now());
    app.take_commands();
    assert_eq!(after_failure(&mut app), vec!["StartServer", "Connect 1000"]);
}

/// The launcher found no `batond.url` in our data dir: the server was shut down on purpose (or
/// was never ours), so it is left stopped and the status says so for the rest of the outage.
#[test]
fn a_server_stopped_on_purpose_is_not_started_again_and_the_status_says_so() {
    let mut app = listed_app();
    app.set_may_start_server(true);
    app.on_disconnected("the server closed the connection", Instant::now());
    app.take_commands();
    assert_eq!(after_failure(&mut app), vec!["StartServer", "Connect 1000"]);
    app.on_server_started(Ok(ServerRestart::Stopped));
    let stopped = "the server was stopped (start it with batond or restart baton)";
    assert!(render(&app).contains(stopped), "{}", render(&app));
    assert_eq!(app.flash_text(), None);
    assert_eq!(after_failure(&mut app), vec!["Connect 2000"], "still retrying: it may be started by hand");
    assert!(matches!(app.connection(), ConnectionState::Reconnecting { problem: Some(p), .. } if p == stopped));
    // Back, then lost again: a new outage is looked at anew.
    app.on_connected(2);
    app.on_disconnected("gone again", Instant::now());
    app.take_commands();
    assert!(
        matches!(app.connection(), ConnectionState::Reconnecting { problem: Some(p), .. } if p == "the server is gone")
    );
    assert_eq!(after_failure(&mut app), vec!["StartServer", "Connect 1000"]);
    app.on_server_started(Ok(ServerRestart::Started));
    assert_eq!(app.flash_text(), Some("started the local server again"));
}

#[test]
fn no_server_is_started_when_not_allowed_or_before_the_first_connection() {
    // --no-spawn or a remote server.
    let mut app = listed_app();
    app.on_disconnected("gone", Instant::now());
    app.take_commands();
    assert_eq!(after_failure(&mut app), vec!["Connect 1000"]);
    // Never connected: the launcher already started a server at startup, or decided not to.
    let mut app = App::new(SERVER, None);
    app.set_may_start_server(true);
    assert_eq!(after_failure(&mut app), vec!["Connect 500"]);
    assert_eq!(after_failure(&mut app), vec!["Connect 1000"]);
}

#[test]
fn state_changes_update_the_row_and_refresh_the_list_once_debounced() {
    let mut app = listed_app();
    app.take_commands();
    let change = |state| {
        Notification::StateChanged(StateChanged {
            session_id: "s-1".into(),
            task_id: "t-1".into(),
            state,
            previous_state: None,
            task_state: TaskState::Review,
            task_title: "Task".into(),
            last_seq: 0,
            updated_at: "2025-06-02T14:03:12.004Z".into(),
            needs_resume: false,
            attention: None,
            attention_since: None,
            change_seq: 0,
        })
    };
    app.on_notification(change(SessionState::Starting));
    app.on_notification(change(SessionState::WaitingForInput));
    // In the list (the status bar names the highlighted s-3's state too).
    let screen = render(&app);
    let badges = screen.lines().filter(|row| row.starts_with("\"│")).filter(|row| row.contains("NEEDS RESUME")).count();
    assert_eq!(badges, 1, "only s-3 still needs resuming: {screen}");
    app.on_tick(Instant::now() + Duration::from_millis(400));
    assert_eq!(requests(&mut app), vec![Request::ListSessions]);
    app.on_tick(Instant::now() + Duration::from_millis(800));
    assert_eq!(requests(&mut app), vec![], "one refresh in flight at a time");
}

#[test]
fn a_prompt_is_sent_with_message_add_and_given_back_if_it_fails() {
    let mut app = opened_with_backlog();
    app.take_commands();
    app.handle_action(Action::FocusInput);
    for c in "go on".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    app.handle_action(Action::Submit);
    let send = Request::SendMessage { session_id: "s-1".into(), content: "go on".into(), steer: false };
    assert_eq!(requests(&mut app), vec![send.clone()]);
    assert_eq!(send.timeout(), Duration::from_secs(120));
    assert!(render(&app).contains("sending…"));

    app.on_outcome(Outcome { epoch: 1, request: send, result: Err(ClientError::Timeout(Duration::from_secs(120))) });
    assert!(render(&app).contains("go on"), "the prompt is back in the input");
    assert!(app.flash_text().is_some_and(|t| t.contains("could not send the message")));
}

#[test]
fn permission_keys_answer_the_pending_request() {
    let mut app = opened_with_backlog();
    app.take_commands();
    let option = |id: &str, kind: &str| PermissionOption { option_id: id.into(), name: id.into(), kind: kind.into() };
    let ask = SessionEvent::PermissionRequest {
        request_id: "p-1".into(),
        tool_call: json!({"title": "Run tests"}),
        options: vec![option("always", "allow_always"), option("once", "allow_once"), option("no", "reject_once")],
    };
    app.on_notification(Notification::Event(record("s-1", 2, ask)));
    let respond = |option_id: &str| Request::RespondPermission {
        session_id: "s-1".into(),
        request_id: "p-1".into(),
        option_id: option_id.into(),
    };
    app.handle_action(Action::AllowPermission);
    assert_eq!(requests(&mut app), vec![respond("once")]);
    app.handle_action(Action::RejectPermission);
    assert_eq!(requests(&mut app), vec![respond("no")]);
    app.handle_action(Action::ChooseOption(0));
    assert_eq!(requests(&mut app), vec![respond("always")]);
    app.handle_action(Action::ChooseOption(5));
    assert_eq!(requests(&mut app), vec![]);
}

#[test]
fn resume_fresh_and_stop_ask_for_confirmation_first() {
    let mut app = opened_with_backlog();
    app.take_commands();
    app.handle_action(Action::ResumeFresh);
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::Confirm);
    assert_eq!(
        requests(&mut app),
        vec![Request::Resume { session_id: "s-1".into(), fresh: true, retry_failed: false, automatic: false }]
    );
    app.handle_action(Action::Stop);
    app.handle_action(Action::CloseOverlay);
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::Resume);
    assert_eq!(
        requests(&mut app),
        vec![Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false }]
    );
    // Cancelling a turn asks too: a stray key must not throw the turn's work away.
    app.handle_action(Action::CancelTurn);
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::Confirm);
    assert_eq!(requests(&mut app), vec![Request::Cancel { session_id: "s-1".into() }]);
}

#[test]
fn failures_from_an_old_connection_are_ignored() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.take_commands();
    app.on_disconnected("gone", Instant::now());
    app.on_connected(2);
    app.take_commands();
    app.on_outcome(Outcome {
        epoch: 1,
        request: Request::LoadMessages { session_id: "s-1".into() },
        result: Err(ClientError::Closed),
    });
    assert_eq!(app.flash_text(), None);
    // The load restarted on the new connection still completes.
    let backlog = MessageListResult { messages: vec![], has_more: false, cut: Vec::new() };
    reply(&mut app, 2, Request::LoadMessages { session_id: "s-1".into() }, Reply::Messages(backlog));
    assert_eq!(requests(&mut app), vec![Request::Subscribe { session_id: "s-1".into(), since_seq: Some(0) }]);
    reply(
        &mut app,
        2,
        Request::Subscribe { session_id: "s-1".into(), since_seq: Some(0) },
        Reply::Subscribed(SubscribeResult { session_id: "s-1".into(), current_seq: 0 }),
    );
    assert!(app.transcript("s-1").is_some());
}

#[test]
fn a_subscription_beyond_the_servers_journal_reloads_the_backlog() {
    let mut app = opened_with_backlog();
    app.take_commands();
    // The server lost its database: it rejects our since_seq as ahead of its journal.
    let rejected = ClientError::Server(ErrorPayload::new(
        baton_protocol::ErrorCode::ValidationError,
        "since_seq 1 is ahead of the session's journal (last seq 0)",
    ));
    app.on_outcome(Outcome {
        epoch: 1,
        request: Request::Subscribe { session_id: "s-1".into(), since_seq: Some(1) },
        result: Err(rejected),
    });
    assert_eq!(requests(&mut app), vec![Request::LoadMessages { session_id: "s-1".into() }]);
    assert!(app.transcript("s-1").is_none());
}

/// `n` sessions, one task each, created a second apart (`s-0` the oldest).
fn many_rows(from: usize, n: usize) -> Vec<baton_protocol::SessionInfo> {
    (from..from + n)
        .rev()
        .map(|i| {
            let created = format!("2025-06-02T{:02}:{:02}:{:02}.000Z", i / 3600, i / 60 % 60, i % 60);
            row(status(&format!("s-{i}"), &format!("t-{i}"), SessionState::Completed, false), "t", &created)
        })
        .collect()
}

#[test]
fn the_list_loads_the_next_page_when_the_cursor_nears_the_last_row() {
    let mut app = App::new("ws://127.0.0.1:7777/ws", None);
    app.on_connected(1);
    app.take_commands();
    // The first page: the 200 newest of 300 sessions.
    let first = Reply::SessionPage {
        rows: many_rows(100, 200),
        next_cursor: Some("c1".into()),
        appended: false,
        attention_count: 0,
    };
    reply(&mut app, 1, Request::ListSessions, first);
    assert_eq!(requests(&mut app), vec![], "the cursor is at the top: nothing more yet");
    for _ in 0..140 {
        app.handle_action(Action::MoveDown);
    }
    assert_eq!(requests(&mut app), vec![], "still more than a screen from the end");
    for _ in 0..20 {
        app.handle_action(Action::MoveDown);
    }
    assert_eq!(requests(&mut app), vec![Request::MoreSessions { cursor: "c1".into() }]);
    app.handle_action(Action::MoveDown);
    assert_eq!(requests(&mut app), vec![], "one page at a time");
    let next = Reply::SessionPage { rows: many_rows(0, 100), next_cursor: None, appended: true, attention_count: 0 };
    reply(&mut app, 1, Request::MoreSessions { cursor: "c1".into() }, next);
    assert_eq!(app.sessions_loaded(), 300);
    for _ in 0..200 {
        app.handle_action(Action::MoveDown);
    }
    assert_eq!(requests(&mut app), vec![], "the last page has been loaded");
    assert_eq!(app.cursor_session(), Some("s-0"), "down to the oldest");

    // A refresh of the first page keeps the older rows loaded and the cursor on its session.
    let refreshed = Reply::SessionPage {
        rows: many_rows(101, 200),
        next_cursor: Some("c2".into()),
        appended: false,
        attention_count: 0,
    };
    reply(&mut app, 1, Request::ListSessions, refreshed);
    assert_eq!(app.sessions_loaded(), 301, "one new session, none lost");
    assert_eq!(app.cursor_session(), Some("s-0"));
}

/// What the screen showed at the last quit comes back on the same server: the open session is
/// opened again once listed, and thoughts stay as they were; another server's state is ignored.
#[test]
fn the_session_open_at_quit_and_the_thoughts_setting_come_back() {
    let mut before = listed_app();
    open(&mut before, "s-3");
    before.handle_action(Action::ToggleThoughts);
    let state = before.view_state();
    assert_eq!(state.opened.as_deref(), Some("s-3"));

    let mut app = App::new(SERVER, None);
    app.restore_view_state(state.clone());
    app.on_connected(1);
    app.take_commands();
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(session_rows()));
    assert_eq!(app.opened_session(), Some("s-3"));
    assert!(requests(&mut app).contains(&Request::LoadMessages { session_id: "s-3".into() }));
    assert_eq!(app.view_state().show_thoughts, state.show_thoughts);

    let mut elsewhere = App::new("ws://127.0.0.1:9999/ws", None);
    elsewhere.restore_view_state(state);
    elsewhere.on_connected(1);
    elsewhere.take_commands();
    reply(&mut elsewhere, 1, Request::ListSessions, Reply::Sessions(session_rows()));
    assert!(elsewhere.opened_session().is_none(), "another server's sessions are not these");
}
