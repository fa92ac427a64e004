//! y, N and 1-9 act on the highlighted session like the other session keys, and never answer a
//! request the user cannot see: on the opened session they answer its request and say whose;
//! on another session with a request waiting they open it first.

use baton_protocol::{Notification, SessionEvent, SessionState};
use baton_tui::action::Action;
use baton_tui::app::{App, Overlay};
use baton_tui::command::{Reply, Request};
use baton_tui::keymap::KeyMode;
use crossterm::event::KeyCode;

use crate::common::*;

fn respond(session_id: &str, option_id: &str) -> Request {
    Request::RespondPermission { session_id: session_id.into(), request_id: "p-1".into(), option_id: option_id.into() }
}

/// Moves the list cursor to `session_id` without opening it.
fn point_at(app: &mut App, session_id: &str) {
    for _ in 0..5 {
        app.handle_action(Action::MoveUp);
    }
    while app.cursor_session() != Some(session_id) {
        app.handle_action(Action::MoveDown);
    }
}

/// `s-1` (running) asks for permission; then `s-3` is opened, so s-1's request waits unseen.
fn s1_asks_while_s3_is_open() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    state(&mut app, "s-1", "t-1", SessionState::Running);
    ask_permission(&mut app, "s-1", 1);
    point_at(&mut app, "s-3");
    open(&mut app, "s-3");
    assert_eq!(app.opened_session(), Some("s-3"));
    app
}

/// The acceptance round's first case: the request of the opened session was answered by a key
/// pressed with another session highlighted.
#[test]
fn a_permission_key_on_another_row_does_not_answer_the_opened_sessions_request() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    state(&mut app, "s-1", "t-1", SessionState::Running);
    ask_permission(&mut app, "s-1", 1);
    point_at(&mut app, "s-3");
    app.handle_action(Action::AllowPermission);
    assert_eq!(requests(&mut app), vec![], "s-1's request is not answered from s-3's row");
    let said = app.flash_text().unwrap_or_default().to_string();
    assert_eq!(said, "no permission request is waiting in “Write the release notes” · mock · s-3");
    assert_eq!(app.opened_session(), Some("s-1"));
}

/// The second case: the row with the PERMISSION badge, not opened, said nothing was waiting.
#[test]
fn a_permission_key_on_a_waiting_row_opens_it_and_the_second_press_answers() {
    let mut app = s1_asks_while_s3_is_open();
    assert!(render(&app).contains("PERMISSION"));
    point_at(&mut app, "s-1");

    app.handle_action(Action::AllowPermission);
    assert_eq!(app.opened_session(), Some("s-1"), "opened, so that the request can be read");
    let sent = requests(&mut app);
    assert!(!sent.iter().any(|r| matches!(r, Request::RespondPermission { .. })), "{sent:?}");
    let said = app.flash_text().unwrap_or_default().to_string();
    assert!(said.contains("“Fix the login redirect” · mock · s-1") && said.contains("press y or N again"), "{said}");
    assert!(render(&app).contains("? permission: Write file"));

    app.handle_action(Action::RejectPermission);
    assert_eq!(requests(&mut app), vec![respond("s-1", "reject")]);
    reply(&mut app, 1, respond("s-1", "reject"), Reply::PermissionAnswered);
    assert_eq!(app.flash_text(), Some("answered “Fix the login redirect” · mock · s-1: reject"));
}

#[test]
fn numbers_follow_the_same_rule() {
    let mut app = s1_asks_while_s3_is_open();
    app.handle_action(Action::ChooseOption(0));
    assert_eq!(requests(&mut app), vec![], "s-3 has no request");
    point_at(&mut app, "s-1");
    app.handle_action(Action::ChooseOption(0));
    assert_eq!(app.opened_session(), Some("s-1"));
    requests(&mut app);
    app.handle_action(Action::ChooseOption(0));
    assert_eq!(requests(&mut app), vec![respond("s-1", "allow")]);
    app.handle_action(Action::ChooseOption(7));
    assert_eq!(app.flash_text(), Some("the request in “Fix the login redirect” · mock · s-1 has no such option"));
}

/// A key that answers an agent is never one that means something else a moment later: `n` is
/// always New task (it never rejects a request), `N` rejects; the new-task form opened while a
/// request waits says how to answer it, and nothing was answered.
#[test]
fn n_is_always_new_task_and_capital_n_rejects() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        open(&mut app, "s-1");
        state(&mut app, "s-1", "t-1", SessionState::Running);
        ask_permission(&mut app, "s-1", 1);
        assert_eq!(app.key_mode(), KeyMode::Permission);
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("N reject"), "the keys are said where the request is: {screen}");
        insta::assert_snapshot!(format!("permission_keys_{width}x{height}"), screen);
        press(&mut app, KeyCode::Char('n'));
        assert!(matches!(app.overlay(), Some(Overlay::NewTask(_))), "n opened the new-task form");
        assert!(!requests(&mut app).iter().any(|r| matches!(r, Request::RespondPermission { .. })), "nothing answered");
        assert!(app.flash_text().is_some_and(|t| t.contains("N rejects")), "{:?}", app.flash_text());
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Char('N'));
        assert_eq!(requests(&mut app), vec![respond("s-1", "reject")]);
    }
}

#[test]
fn option_numbers_answer_by_position() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    state(&mut app, "s-1", "t-1", SessionState::Running);
    ask_permission(&mut app, "s-1", 1);
    press(&mut app, KeyCode::Char('2'));
    assert_eq!(requests(&mut app), vec![respond("s-1", "reject")]);
    press(&mut app, KeyCode::Char('1'));
    assert_eq!(requests(&mut app), vec![respond("s-1", "allow")]);
}

/// What would be approved is shown where the question is asked: the tool call's input and its
/// diff, with the options and keys kept whole below them.
#[test]
fn the_permission_box_shows_the_input_and_the_diff() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        open(&mut app, "s-1");
        state(&mut app, "s-1", "t-1", SessionState::Running);
        let option = |id: &str, kind: &str| baton_protocol::PermissionOption {
            option_id: id.into(),
            name: id.into(),
            kind: kind.into(),
        };
        let tool_call = serde_json::json!({
            "title": "Write file",
            "kind": "edit",
            "rawInput": {"path": "src/lib.rs"},
            "content": [{"type": "diff", "path": "src/lib.rs", "oldText": "fn answer() -> u32 {\n    41\n}\n", "newText": "fn answer() -> u32 {\n    42\n}\n"}],
        });
        let ask = SessionEvent::PermissionRequest {
            request_id: "p-1".into(),
            tool_call,
            options: vec![option("allow", "allow_once"), option("reject", "reject_once")],
        };
        app.on_notification(Notification::Event(record("s-1", 1, ask)));
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("input: {\"path\":\"src/lib.rs\"}"), "{screen}");
        assert!(screen.contains("+    42"), "{screen}");
        assert!(screen.contains("[1] allow") && screen.contains("N reject"), "{screen}");
        insta::assert_snapshot!(format!("permission_box_details_{width}x{height}"), screen);
    }
}
