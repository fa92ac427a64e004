//! The keys that act on a session act on the one under the list cursor, opened or not, and
//! their questions name it; `S` starts a new session of its task; `R` on a session whose agent
//! runs says what to do instead.

use baton_protocol::{ResumeReason, SessionResumeResult, SessionState};
use baton_tui::action::{Action, EditOp};
use baton_tui::app::{App, Confirmation, Overlay};
use baton_tui::command::{Reply, Request};

use crate::common::*;

/// `s-1` opened, then the cursor moved to `s-3` (the first row) without opening it.
fn opened_s1_pointing_at_s3() -> App {
    let mut app = listed_app();
    app.handle_action(Action::MoveDown);
    app.handle_action(Action::MoveDown);
    app.handle_action(Action::OpenSelected);
    assert_eq!(app.opened_session(), Some("s-1"));
    app.handle_action(Action::MoveUp);
    app.handle_action(Action::MoveUp);
    assert_eq!(app.cursor_session(), Some("s-3"));
    app.take_commands();
    app
}

fn question(app: &App) -> String {
    match app.overlay() {
        Some(Overlay::Confirm(confirmation)) => confirmation.question(),
        other => panic!("no confirmation open: {other:?}"),
    }
}

#[test]
fn resume_cancel_and_stop_act_on_the_highlighted_session() {
    let mut app = opened_s1_pointing_at_s3();
    app.handle_action(Action::Resume);
    assert_eq!(
        requests(&mut app),
        vec![Request::Resume { session_id: "s-3".into(), fresh: false, retry_failed: false, automatic: false }]
    );
    app.handle_action(Action::CancelTurn);
    assert!(question(&app).starts_with("Cancel the running turn of “Write the release notes” · mock · s-3?"));
    app.handle_action(Action::Confirm);
    assert_eq!(requests(&mut app), vec![Request::Cancel { session_id: "s-3".into() }]);
    app.handle_action(Action::Stop);
    assert!(question(&app).contains("“Write the release notes” · mock · s-3"), "{}", question(&app));
    assert!(render(&app).contains("Stop “Write the release notes” · mock · s-3?"));
    app.handle_action(Action::Confirm);
    assert_eq!(requests(&mut app), vec![Request::Stop { session_id: "s-3".into() }]);
    // The opened session is still the one shown.
    assert_eq!(app.opened_session(), Some("s-1"));
}

#[test]
fn resume_fresh_of_a_session_that_needs_resume_is_asked_from_the_list_without_opening_it() {
    let mut app = listed_app();
    assert_eq!(app.cursor_session(), Some("s-3"));
    app.handle_action(Action::ResumeFresh);
    assert!(question(&app).starts_with("Resume “Write the release notes” · mock · s-3 fresh?"));
    app.handle_action(Action::Confirm);
    // Only the fresh resume: nothing opened, so no status and no auto-resume first.
    assert_eq!(
        requests(&mut app),
        vec![Request::Resume { session_id: "s-3".into(), fresh: true, retry_failed: false, automatic: false }]
    );
    assert_eq!(app.opened_session(), None);
}

#[test]
fn resume_fresh_with_a_running_agent_says_how_to_start_over_instead() {
    let mut app = listed_app();
    let mut running = status("s-3", "t-2", SessionState::WaitingForInput, false);
    running.is_agent_running = true;
    running.resume_reason = ResumeReason::AgentRunning;
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-3".into() }, Reply::Status(running));
    app.handle_action(Action::ResumeFresh);
    assert!(app.overlay().is_none(), "no question: the server would not do it");
    let text = app.flash_text().expect("a message").to_string();
    assert!(text.contains("stop it (s)") && text.contains("new session of the task (S)"), "{text}");

    // The same answer when the server is the one to notice (an agent attached meanwhile).
    app.handle_action(Action::Dismiss);
    assert_eq!(app.flash_text(), None);
    let fresh = Request::Resume { session_id: "s-1".into(), fresh: true, retry_failed: false, automatic: false };
    let attached = SessionResumeResult { session_id: "s-1".into(), state: SessionState::Running, launched: false };
    reply(&mut app, 1, fresh, Reply::Resumed(attached));
    assert!(app.flash_text().is_some_and(|t| t.contains("stop it (s)")));
}

#[test]
fn capital_s_starts_a_new_session_of_the_highlighted_task_and_opens_it() {
    let mut app = opened_s1_pointing_at_s3();
    app.handle_action(Action::StartSession);
    assert!(
        matches!(app.overlay(), Some(Overlay::Confirm(Confirmation::StartSession { task_id, .. })) if task_id == "t-2")
    );
    assert!(question(&app).contains("“Write the release notes” with mock"));
    app.handle_action(Action::Confirm);
    let start = Request::StartSession { task_id: "t-2".into() };
    // The agents are asked for, to warn about one that is not installed.
    assert_eq!(requests(&mut app), vec![Request::ListAgents, start.clone()]);

    let started = row(status("s-4", "t-2", SessionState::Starting, false), "Write the release notes", NOW);
    reply(&mut app, 1, start, Reply::SessionStarted(Box::new(started)));
    assert_eq!(app.opened_session(), Some("s-4"));
    assert_eq!(app.cursor_session(), Some("s-4"));
    assert!(render(&app).contains("starting"));
}

/// As the new-task form marks it: `S` on a task whose agent the server did not find.
#[test]
fn capital_s_warns_when_the_tasks_agent_is_not_installed() {
    let mut app = opened_s1_pointing_at_s3();
    app.handle_action(Action::StartSession);
    assert!(!render(&app).contains("(not installed)"), "the agents are not known yet");
    let agent = agent_info;
    let agents = vec![agent("claude-code", "Claude Code", true), agent("mock", "Mock agent", false)];
    reply(&mut app, 1, Request::ListAgents, Reply::Agents(agents.clone()));
    let screen = render(&app);
    assert!(screen.contains("Mock agent (not installed)"), "{screen}");

    // An installed agent gets no warning.
    app.handle_action(Action::CloseOverlay);
    let mut installed = agents;
    installed[1].installed = true;
    reply(&mut app, 1, Request::ListAgents, Reply::Agents(installed));
    app.handle_action(Action::StartSession);
    assert!(!render(&app).contains("(not installed)"));
}

#[test]
fn rename_archive_and_delete_act_on_the_highlighted_sessions_task() {
    let mut app = opened_s1_pointing_at_s3();
    // e: the title, ready to edit; Enter saves it.
    app.handle_action(Action::RenameTask);
    assert!(render(&app).contains("Rename task"));
    for _ in 0.."Write the release notes".len() {
        app.handle_action(Action::Edit(EditOp::Backspace));
    }
    for c in "Release notes 1.2".chars() {
        app.handle_action(Action::Edit(EditOp::Insert(c)));
    }
    app.handle_action(Action::Submit);
    assert!(app.overlay().is_none());
    assert_eq!(
        requests(&mut app),
        vec![Request::RenameTask { task_id: "t-2".into(), title: "Release notes 1.2".into() }]
    );
    // An empty title is refused in the form.
    app.handle_action(Action::RenameTask);
    app.handle_action(Action::Edit(EditOp::Clear));
    app.handle_action(Action::Submit);
    assert!(render(&app).contains("the title must not be empty"));
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::CloseOverlay);

    // a asks first too.
    app.handle_action(Action::ArchiveTask);
    assert!(question(&app).starts_with("Archive the task “Write the release notes”"), "{}", question(&app));
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::Confirm);
    assert_eq!(requests(&mut app), vec![Request::ArchiveTask { task_id: "t-2".into() }]);

    // D asks first, naming the task and its sessions; n keeps everything.
    app.handle_action(Action::DeleteTask);
    assert!(
        question(&app).starts_with("Delete the task “Write the release notes” with its 1 session(s)"),
        "{}",
        question(&app)
    );
    app.handle_action(Action::CloseOverlay);
    assert_eq!(requests(&mut app), vec![]);
    app.handle_action(Action::DeleteTask);
    app.handle_action(Action::Confirm);
    assert_eq!(requests(&mut app), vec![Request::DeleteTask { task_id: "t-2".into(), stop_agents: true }]);

    // Every client hears of the deletion: the task leaves the list.
    app.on_notification(baton_protocol::Notification::TaskDeleted(baton_protocol::TaskDeleted {
        task_id: "t-2".into(),
        session_ids: vec!["s-3".into()],
    }));
    assert!(!render(&app).contains("Write the release notes"));
    assert_eq!(app.opened_session(), Some("s-1"));
}

/// `r` on a FAILED session asks first, showing why it failed, then resumes it with
/// `retry_failed` (the server refuses a FAILED session without it).
#[test]
fn resume_of_a_failed_session_asks_and_retries_it_knowingly() {
    let mut app = App::new("ws://127.0.0.1:1/ws", None);
    app.on_connected(1);
    app.take_commands();
    let mut failed = status("s-9", "t-9", SessionState::Failed, false);
    failed.last_error = Some("image img:1 is not on the Docker daemon".into());
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(vec![row(failed, "Boxed", "2026-11-29T17:55:00Z")]));
    assert_eq!(app.cursor_session(), Some("s-9"));
    app.handle_action(Action::Resume);
    assert!(requests(&mut app).is_empty(), "nothing is sent before the answer");
    let asked = question(&app);
    assert!(asked.starts_with("Retry “Boxed”"), "{asked}");
    assert!(asked.contains("It failed: image img:1 is not on the Docker daemon."), "{asked}");
    app.handle_action(Action::Confirm);
    assert_eq!(
        requests(&mut app),
        vec![Request::Resume { session_id: "s-9".into(), fresh: false, retry_failed: true, automatic: false }]
    );
}

/// The keys that read or write the pane (`i`, `v`, `x`, `M`, `P`) act on the highlighted
/// session as the others do: the pane shows it first, and the prompt names where it writes.
#[test]
fn every_key_acts_on_the_highlighted_session_and_the_prompt_names_it() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = opened_s1_pointing_at_s3();
        press(&mut app, crossterm::event::KeyCode::Char('i'));
        assert_eq!(app.opened_session(), Some("s-3"), "i opens the highlighted session to write to it");
        type_text(&mut app, "hello");
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("To “Write the release notes” · s-3"), "{screen}");
        insta::assert_snapshot!(format!("prompt_names_its_session_{width}x{height}"), screen);
        app.take_commands();
        press(&mut app, crossterm::event::KeyCode::Enter);
        assert_eq!(
            requests(&mut app),
            vec![Request::SendMessage { session_id: "s-3".into(), content: "hello".into(), steer: false }]
        );
    }

    let mut app = opened_s1_pointing_at_s3();
    app.handle_action(Action::Export);
    assert!(matches!(app.overlay(), Some(Overlay::Export(form)) if form.session_id == "s-3"));
    app.handle_action(Action::CloseOverlay);

    let mut app = opened_s1_pointing_at_s3();
    app.handle_action(Action::FocusTranscript);
    assert_eq!(app.opened_session(), Some("s-3"));

    for key in [Action::OpenOptions, Action::OpenRules] {
        let mut app = opened_s1_pointing_at_s3();
        app.handle_action(key.clone());
        let asked = requests(&mut app);
        assert!(
            asked.contains(&Request::Options { session_id: "s-3".into() })
                || asked.contains(&Request::ListRules { session_id: "s-3".into() }),
            "{key:?}: {asked:?}"
        );
    }
}

/// Sessions of one task are numbered (oldest first) in the list and in the pane's title, so
/// that one started with `S` is told apart by more than its age.
#[test]
fn sessions_of_a_task_are_numbered() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        open(&mut app, "s-1");
        app.handle_action(Action::LeaveTranscript);
        let screen = render_sized(&app, width, height);
        if width == 80 {
            assert!(screen.contains("2h ago #1") && screen.contains("5m ago #2"), "{screen}");
        }
        assert!(screen.contains("Fix the login redirect #2 ·"), "the pane names its number: {screen}");
        insta::assert_snapshot!(format!("sessions_numbered_{width}x{height}"), screen);
    }
    // A task with one session has no number.
    let app = listed_app();
    assert!(!render(&app).contains("40s ago #"));
}
