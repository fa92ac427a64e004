//! The auto-resume over a session's life while it stays open: once per selection and
//! connection, once more when the agent is lost after it was ready, never in a loop on a
//! failing launch; and "working…" only while an agent runs the turn.

use std::time::Instant;

use baton_protocol::SessionState;
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Reply, Request};

use crate::common::*;

fn ask() -> Request {
    Request::SessionStatus { session_id: "s-1".into() }
}

fn auto_resume() -> Request {
    Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: true }
}

fn changed(app: &mut App, state: SessionState, needs_resume: bool) {
    app.on_notification(state_changed("s-1", "t-1", state, needs_resume));
}

/// `s-1` opened and auto-resumed once on connection 1.
fn resumed_once() -> App {
    let mut app = listed_app();
    app.handle_action(Action::MoveDown);
    app.handle_action(Action::MoveDown);
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    reply(&mut app, 1, ask(), Reply::Status(status("s-1", "t-1", SessionState::WaitingForInput, true)));
    assert_eq!(requests(&mut app), vec![auto_resume()]);
    app
}

/// What the app asks after the server restarted under it (connection `epoch`).
fn after_server_restart(app: &mut App, epoch: u64) -> Vec<Request> {
    app.on_disconnected("the server closed the connection", Instant::now());
    app.on_connected(epoch);
    let sent = requests(app);
    assert!(sent.contains(&ask()), "{sent:?}");
    // The restarted server kept the turn's RUNNING state, with no agent.
    reply(app, epoch, ask(), Reply::Status(status("s-1", "t-1", SessionState::Running, true)));
    requests(app)
}

#[test]
fn every_server_restart_gets_its_own_auto_resume_while_the_session_stays_open() {
    let mut app = resumed_once();
    changed(&mut app, SessionState::Starting, false);
    changed(&mut app, SessionState::WaitingForInput, false);
    assert_eq!(after_server_restart(&mut app, 2), vec![auto_resume()]);
    assert_eq!(after_server_restart(&mut app, 3), vec![auto_resume()]);
    // Once per connection: another status answer on it does not resume again.
    reply(&mut app, 3, ask(), Reply::Status(status("s-1", "t-1", SessionState::Running, true)));
    assert_eq!(requests(&mut app), vec![]);
}

#[test]
fn an_agent_lost_after_it_was_ready_is_resumed_again_but_a_failing_launch_is_not_retried() {
    let mut app = resumed_once();
    // The launch fails: STARTING, then back to needing a resume without being ready.
    changed(&mut app, SessionState::Starting, false);
    changed(&mut app, SessionState::WaitingForInput, true);
    assert_eq!(requests(&mut app).into_iter().filter(|r| matches!(r, Request::Resume { .. })).count(), 0);

    // r works as ever; this time the agent comes up, and later dies.
    app.handle_action(Action::Resume);
    changed(&mut app, SessionState::Starting, false);
    changed(&mut app, SessionState::WaitingForInput, false);
    app.take_commands();
    changed(&mut app, SessionState::WaitingForInput, true);
    assert_eq!(requests(&mut app), vec![ask()], "the edge asks whether it can be resumed");
    reply(&mut app, 1, ask(), Reply::Status(status("s-1", "t-1", SessionState::WaitingForInput, true)));
    assert_eq!(requests(&mut app), vec![auto_resume()]);
}

#[test]
fn working_is_shown_only_while_an_agent_runs_the_turn() {
    let mut app = resumed_once();
    changed(&mut app, SessionState::Starting, false);
    changed(&mut app, SessionState::Running, false);
    assert!(render(&app).contains("working…"));
    // A server restart leaves the session RUNNING with no agent: nothing is working.
    app.on_disconnected("gone", Instant::now());
    app.on_connected(2);
    app.take_commands();
    reply(&mut app, 2, ask(), Reply::Status(status("s-1", "t-1", SessionState::Running, true)));
    let screen = render(&app);
    assert!(screen.contains("interrupted") && screen.contains("NEEDS RESUME"), "{screen}");
    assert!(!screen.contains("working…"), "{screen}");
}

/// A session the server is still reconnecting to (its agent outlived the previous server) shows
/// "reconnecting" and is not auto-resumed; the notification that ends the reconnection says
/// whether it needs a resume, and only then is it resumed.
#[test]
fn a_reconnecting_session_is_shown_so_and_resumed_only_if_the_reconnection_fails() {
    let mut app = App::new("ws://127.0.0.1:1/ws", None);
    app.on_connected(1);
    app.take_commands();
    let mut reconnecting = status("s-1", "t-1", SessionState::WaitingForInput, false);
    reconnecting.resume_reason = baton_protocol::ResumeReason::AgentReconnecting;
    reconnecting.has_resume_token = true;
    reply(
        &mut app,
        1,
        Request::ListSessions,
        Reply::Sessions(vec![row(reconnecting.clone(), "Boxed", "2026-11-29T17:55:00Z")]),
    );
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    reply(&mut app, 1, ask(), Reply::Status(reconnecting));
    assert!(!requests(&mut app).contains(&auto_resume()), "nothing to resume while the server reconnects");
    assert!(render(&app).contains("reconnecting"), "{}", render(&app));
    // The server could not reconnect: the session needs a resume now.
    changed(&mut app, SessionState::WaitingForInput, true);
    assert!(!render(&app).contains("reconnecting"), "{}", render(&app));
    let asked = requests(&mut app);
    assert!(asked.contains(&auto_resume()) || asked.contains(&ask()), "{asked:?}");
}
