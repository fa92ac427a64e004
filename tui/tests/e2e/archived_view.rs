//! Archiving asks first and says what happens to running agents; the archived view (`z`)
//! lists archived tasks' sessions, marks an agent still running, and `u` unarchives.

use baton_protocol::{SessionState, Task, TaskArchiveResult, TaskState};
use baton_tui::action::Action;
use baton_tui::app::{App, Overlay};
use baton_tui::command::{Reply, Request};
use crossterm::event::KeyCode;

use crate::common::*;

fn task(id: &str, title: &str, archived: bool) -> Task {
    Task {
        id: id.into(),
        title: title.into(),
        description: String::new(),
        state: TaskState::Review,
        agent: "mock".into(),
        workdir: "/tmp".into(),
        repository: None,
        worktree_branch: None,
        base_commit: None,
        base_branch: None,
        pull_request_url: None,
        created_at: NOW.into(),
        updated_at: NOW.into(),
        archived,
        mcp_servers: Vec::new(),
    }
}

/// `s-3` (task `t-2`) opened with its agent running.
fn opened_running() -> App {
    let mut app = listed_app();
    open(&mut app, "s-3");
    let mut running = status("s-3", "t-2", SessionState::WaitingForInput, false);
    running.is_agent_running = true;
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-3".into() }, Reply::Status(running));
    app.take_commands();
    app
}

#[test]
fn archiving_asks_first_names_the_running_agent_and_closes_the_pane() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = opened_running();
        press(&mut app, KeyCode::Char('a'));
        assert_eq!(requests(&mut app), vec![], "nothing is archived before the answer");
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("running agent is") && screen.contains("stopped"), "{screen}");
        insta::assert_snapshot!(format!("archive_question_{width}x{height}"), screen);
    }

    let mut app = opened_running();
    press(&mut app, KeyCode::Char('a'));
    press(&mut app, KeyCode::Char('n'));
    assert!(app.overlay().is_none());
    assert_eq!(requests(&mut app), vec![], "n keeps the task");
    press(&mut app, KeyCode::Char('a'));
    press(&mut app, KeyCode::Char('y'));
    let archive = Request::ArchiveTask { task_id: "t-2".into() };
    assert_eq!(requests(&mut app), vec![archive.clone()]);
    let result =
        TaskArchiveResult { task: task("t-2", "Write the release notes", true), stopped_sessions: vec!["s-3".into()] };
    reply(&mut app, 1, archive, Reply::TaskArchived(Box::new(result)));
    let text = app.flash_text().expect("a message").to_string();
    assert!(text.contains("archived “Write the release notes”, its running agent stopped"), "{text}");
    assert!(text.contains("z lists"), "says where it went: {text}");
    // The pane no longer shows the archived session under a bare id.
    assert_eq!(app.opened_session(), None);
    assert!(requests(&mut app).contains(&Request::Unsubscribe { session_id: "s-3".into() }));
    let screen = render(&app);
    assert!(!screen.contains("Write the release notes ·"), "{screen}");
}

#[test]
fn z_lists_the_archived_tasks_and_u_brings_one_back() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        press(&mut app, KeyCode::Char('z'));
        assert_eq!(requests(&mut app), vec![Request::ListArchived]);
        let mut old = row(status("s-7", "t-7", SessionState::Completed, false), "Old spike", "2026-11-29T12:00:00Z");
        old.task_archived = true;
        let mut running =
            row(status("s-8", "t-8", SessionState::WaitingForInput, false), "Left running", "2026-11-29T17:00:00Z");
        running.task_archived = true;
        running.status.is_agent_running = true;
        reply(&mut app, 1, Request::ListArchived, Reply::ArchivedSessions(vec![running, old]));
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("Archived tasks") && screen.contains("agent running"), "{screen}");
        insta::assert_snapshot!(format!("archived_view_{width}x{height}"), screen);

        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::Char('u'));
        let unarchive = Request::UnarchiveTask { task_id: "t-7".into() };
        assert_eq!(requests(&mut app), vec![unarchive.clone()]);
        reply(&mut app, 1, unarchive, Reply::TaskChanged(Box::new(task("t-7", "Old spike", false))));
        assert!(app.flash_text().is_some_and(|t| t.contains("unarchived")));
        // The view lists again; the main list is refreshed.
        assert!(requests(&mut app).contains(&Request::ListArchived));
        assert!(matches!(app.overlay(), Some(Overlay::Archived(_))));
        app.handle_action(Action::CloseOverlay);
    }
}
