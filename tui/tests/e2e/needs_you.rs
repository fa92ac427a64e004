//! What needs you: the status bar counts the sessions that need the user, `w` opens the one
//! waiting longest (then the next), `W` lists only those, and a session the user is not looking
//! at that starts needing them raises one terminal alert per transition.

use baton_protocol::{Attention, AttentionChanged, Notification, SessionInfo, SessionState, StateChanged, TaskState};
use baton_tui::action::Action;
use baton_tui::alerts::AlertMode;
use baton_tui::app::App;
use baton_tui::command::{Command, Reply, Request};

use crate::common::*;

/// The list of `session_rows`, where `s-1` and `s-3` need resuming: `s-3` for longer.
fn rows() -> Vec<SessionInfo> {
    let mut rows = session_rows();
    for row in &mut rows {
        let since = match row.status.session_id.as_str() {
            "s-1" => "2026-11-29T17:56:00Z",
            "s-3" => "2026-11-29T17:50:00Z",
            _ => continue,
        };
        row.status.attention = Some(Attention::Resume);
        row.status.attention_since = Some(since.into());
    }
    rows
}

fn app() -> App {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.take_commands();
    reply(&mut app, 1, Request::ListSessions, Reply::Sessions(rows()));
    app
}

fn change(session_id: &str, state: SessionState, attention: Option<Attention>) -> Notification {
    Notification::StateChanged(StateChanged {
        session_id: session_id.into(),
        task_id: "t-2".into(),
        task_title: "Write the release notes".into(),
        state,
        previous_state: None,
        task_state: TaskState::InProgress,
        needs_resume: false,
        last_seq: 0,
        updated_at: NOW.into(),
        attention,
        attention_since: attention.map(|_| NOW.into()),
        change_seq: 0,
    })
}

fn alerts(app: &mut App) -> Vec<String> {
    app.take_commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Alert(bytes) => Some(bytes),
            _ => None,
        })
        .collect()
}

#[test]
fn the_status_bar_counts_the_sessions_that_need_you() {
    let mut app = app();
    let screen = render(&app);
    assert!(screen.contains("2 ask you"), "{screen}");
    insta::assert_snapshot!("needs_you_status_bar", screen);
    // The server's count covers sessions beyond the rows held.
    app.on_notification(Notification::AttentionChanged(AttentionChanged { count: 5 }));
    assert!(render(&app).contains("2 ask you · 3 more need you"));
    // Never fewer than the rows held say (the rows' changes come just before the count).
    app.on_notification(Notification::AttentionChanged(AttentionChanged { count: 0 }));
    let screen = render(&app);
    assert!(screen.contains("2 ask you") && !screen.contains("more need you"), "{screen}");
}

#[test]
fn w_opens_the_session_waiting_longest_then_the_next() {
    let mut app = app();
    app.handle_action(Action::NextNeedingYou);
    assert_eq!(app.cursor_session(), Some("s-3"), "s-3 has waited longest");
    assert!(requests(&mut app).contains(&Request::LoadMessages { session_id: "s-3".into() }), "s-3 is opened");
    app.handle_action(Action::NextNeedingYou);
    assert_eq!(app.cursor_session(), Some("s-1"));
    app.handle_action(Action::NextNeedingYou);
    assert_eq!(app.cursor_session(), Some("s-3"), "round again");
}

#[test]
fn shift_w_lists_only_the_sessions_that_need_you() {
    let mut app = app();
    app.handle_action(Action::ToggleNeedsYouOnly);
    let screen = render(&app);
    insta::assert_snapshot!("needs_you_only", screen);
    app.handle_action(Action::ToggleNeedsYouOnly);
    assert_ne!(render(&app), screen, "every session again");
}

#[test]
fn a_session_not_shown_that_starts_needing_you_raises_one_alert() {
    let mut app = app();
    app.set_alerts(AlertMode::Notify);
    open(&mut app, "s-1");
    app.on_notification(change("s-3", SessionState::Running, None));
    assert_eq!(alerts(&mut app), Vec::<String>::new(), "working needs nothing");
    app.on_notification(change("s-3", SessionState::WaitingForInput, Some(Attention::Input)));
    assert_eq!(
        alerts(&mut app),
        vec!["\x1b]9;Baton: Write the release notes: waits for your next prompt\x07\
              \x1b]777;notify;Baton;Write the release notes: waits for your next prompt\x07\x07"
            .to_string()]
    );
    app.on_notification(change("s-3", SessionState::WaitingForInput, Some(Attention::Input)));
    assert_eq!(alerts(&mut app), Vec::<String>::new(), "one alert per transition");
    // The session on screen needs no alert.
    app.on_notification(change("s-1", SessionState::WaitingForInput, Some(Attention::Input)));
    assert_eq!(alerts(&mut app), Vec::<String>::new());
}

#[test]
fn alerts_off_write_nothing_and_bell_only_rings() {
    let mut app = app();
    app.set_alerts(AlertMode::Off);
    app.on_notification(change("s-3", SessionState::WaitingForInput, Some(Attention::Input)));
    assert_eq!(alerts(&mut app), Vec::<String>::new());
    app.set_alerts(AlertMode::Bell);
    app.on_notification(change("s-3", SessionState::Failed, Some(Attention::Failed)));
    assert_eq!(alerts(&mut app), vec!["\x07".to_string()]);
}

#[test]
fn the_list_answer_brings_the_server_wide_count() {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.take_commands();
    let page = Reply::SessionPage { rows: rows(), next_cursor: Some("c1".into()), appended: false, attention_count: 7 };
    reply(&mut app, 1, Request::ListSessions, page);
    assert!(render(&app).contains("2 ask you · 5 more need you"), "sessions beyond the first page are counted");
}

/// A finished turn ("your turn") is told apart from what asks something (a permission, a
/// failure, a resume), and looking at the session for a moment marks it seen: it no longer
/// counts, `w` skips it; the next finished turn counts again. What asks something stays.
#[test]
fn a_finished_turn_counts_until_the_session_has_been_looked_at() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = app();
        app.on_notification(change("s-2", SessionState::WaitingForInput, Some(Attention::Input)));
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("2 ask you · 1 your turn"), "{screen}");
        insta::assert_snapshot!(format!("needs_you_split_{width}x{height}"), screen);
    }
    let mut app = app();
    app.on_notification(change("s-2", SessionState::WaitingForInput, Some(Attention::Input)));
    open(&mut app, "s-2");
    draw_sized(&mut app, 100, 30);
    // A glance is not a look.
    app.on_tick(std::time::Instant::now());
    assert!(render(&app).contains("1 your turn"));
    app.on_tick(std::time::Instant::now() + baton_tui::app::SEEN_AFTER);
    let screen = render(&app);
    assert!(screen.contains("2 ask you") && !screen.contains("your turn"), "{screen}");
    // Seen: w goes to what still needs the user, not to it.
    app.handle_action(Action::NextNeedingYou);
    assert_ne!(app.cursor_session(), Some("s-2"));
    // Looking at a session that needs resuming does not make it need less.
    app.on_tick(std::time::Instant::now() + 2 * baton_tui::app::SEEN_AFTER);
    assert!(render(&app).contains("2 ask you"));

    // The next turn of s-2 finishes while another session is on screen: it counts again.
    let mut again = match change("s-2", SessionState::WaitingForInput, Some(Attention::Input)) {
        Notification::StateChanged(change) => change,
        _ => unreachable!(),
    };
    again.attention_since = Some("2026-11-29T18:05:00Z".into());
    app.on_notification(Notification::StateChanged(again));
    assert!(render(&app).contains("1 your turn"));
}
