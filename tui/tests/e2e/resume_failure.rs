//! A resume that fails, either way: the request is refused, or the launch it started fails and
//! the session comes back still needing a resume. Both show RESUME FAILED in the list and, for
//! the opened session, why and the keys that retry (r) or start over (R); success clears it.

use baton_protocol::{ClientError, ErrorCode, ErrorPayload, Notification, SessionResumeResult, SessionState};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Outcome, Reply, Request};

use crate::common::*;

fn changed(state: SessionState, needs_resume: bool) -> Notification {
    state_changed("s-1", "t-1", state, needs_resume)
}

/// `s-1` (needing a resume) opened: the auto-resume was sent and the server launched it.
fn auto_resumed() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    let needs = status("s-1", "t-1", SessionState::WaitingForInput, true);
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-1".into() }, Reply::Status(needs));
    let resume = Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: true };
    assert!(requests(&mut app).contains(&resume));
    let launched = SessionResumeResult { session_id: "s-1".into(), state: SessionState::Starting, launched: true };
    reply(&mut app, 1, resume, Reply::Resumed(launched));
    app.on_notification(changed(SessionState::Starting, false));
    app
}

#[test]
fn a_launch_that_fails_shows_why_and_the_keys_to_retry_or_start_over() {
    let mut app = auto_resumed();
    assert!(app.is_resuming("s-1"));
    assert!(render(&app).contains("resuming"), "{}", render(&app));
    // The agent could not restore: back to needing a resume. The status says why.
    app.on_notification(changed(SessionState::WaitingForInput, true));
    assert_eq!(app.resume_failure("s-1"), Some(None));
    assert!(requests(&mut app).contains(&Request::SessionStatus { session_id: "s-1".into() }));
    let mut failed = status("s-1", "t-1", SessionState::WaitingForInput, true);
    failed.last_error = Some("session/resume failed: Internal error".into());
    reply(&mut app, 1, Request::SessionStatus { session_id: "s-1".into() }, Reply::Status(failed));
    let screen = render(&app);
    let row = screen.lines().find(|line| line.contains("›●")).expect("the opened row");
    assert!(row.contains("RESUME FAILED") && !row.contains("NEEDS RESUME"), "{screen}");
    assert!(screen.contains("Resume failed") && screen.contains("session/resume failed: Internal error"), "{screen}");
    assert!(screen.contains("r retry · R start fresh with the conversation so far"), "{screen}");

    // r retries; the agent comes up this time: the failure is gone.
    app.handle_action(Action::Resume);
    assert!(requests(&mut app).contains(&Request::Resume {
        session_id: "s-1".into(),
        fresh: false,
        retry_failed: false,
        automatic: false
    }));
    assert_eq!(app.resume_failure("s-1"), None);
    app.on_notification(changed(SessionState::Starting, false));
    app.on_notification(changed(SessionState::WaitingForInput, false));
    assert!(!app.is_resuming("s-1"));
    let screen = render(&app);
    assert!(!screen.contains("RESUME FAILED") && !screen.contains("Resume failed"), "{screen}");
}

#[test]
fn a_refused_resume_shows_the_servers_reason() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.handle_action(Action::Resume);
    let refused = ClientError::Server(ErrorPayload::new(ErrorCode::Unavailable, "claude-agent-acp is not installed"));
    app.on_outcome(Outcome {
        epoch: 1,
        request: Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false },
        result: Err(refused),
    });
    assert_eq!(app.resume_failure("s-1"), Some(Some("claude-agent-acp is not installed")));
    let screen = render(&app);
    assert!(screen.contains("claude-agent-acp is not installed") && screen.contains("r retry"), "{screen}");
    // Another session shows no banner; its row keeps its own badge.
    app.handle_action(Action::MoveUp);
    app.handle_action(Action::MoveUp);
    app.handle_action(Action::OpenSelected);
    assert_eq!(app.opened_session(), Some("s-3"));
    assert!(!render(&app).contains("Resume failed"));
}
