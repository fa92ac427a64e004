//! Writing and answering: drafts per session and Ctrl-C, Esc read as Alt, permissions answered
//! from the prompt and shown in the list, the end of a cancelled turn, messages that go when
//! what they announce is over, and a subscription answer racing the first event.

use baton_protocol::{Notification, SessionEvent, SessionState, SubscribeResult};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Reply, Request};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::*;

fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
    KeyEvent::new(code, modifiers)
}

#[test]
fn drafts_belong_to_their_session_and_ctrl_c_clears_before_it_quits() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    app.handle_action(Action::FocusInput);
    type_text(&mut app, "half a thought");
    app.handle_action(Action::LeaveInput);
    open(&mut app, "s-1");
    assert_eq!(app.input_text(), "", "s-1 has its own, empty draft");
    app.handle_action(Action::FocusInput);
    type_text(&mut app, "for s-1");
    app.handle_action(Action::LeaveInput);
    for _ in 0..5 {
        app.handle_action(Action::MoveUp);
    }
    open(&mut app, "s-3");
    assert_eq!(app.input_text(), "half a thought");

    app.handle_action(Action::FocusInput);
    let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.handle_key(ctrl_c);
    assert_eq!(app.input_text(), "");
    assert!(!app.should_quit(), "the first Ctrl-C only cleared the draft");
    app.handle_key(ctrl_c);
    assert!(app.should_quit());
}

#[test]
fn a_permission_is_answered_from_the_prompt_with_esc_read_as_alt() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    state(&mut app, "s-1", "t-1", SessionState::Running);
    ask_permission(&mut app, "s-1", 1);
    app.handle_action(Action::FocusInput);
    type_text(&mut app, "draft");
    let screen = render(&app);
    assert!(screen.contains("permission waiting: Esc, then y/N"), "{screen}");
    assert!(screen.contains("Esc, then y allow"), "{screen}");
    // Esc then y, typed quickly, arrives as Alt-y.
    app.handle_key(key(KeyCode::Char('y'), KeyModifiers::ALT));
    let respond =
        Request::RespondPermission { session_id: "s-1".into(), request_id: "p-1".into(), option_id: "allow".into() };
    assert_eq!(requests(&mut app), vec![respond]);
    assert_eq!(app.input_text(), "draft", "the y did not go into the text");
}

#[test]
fn a_pending_permission_shows_in_the_list_while_its_turn_runs() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    state(&mut app, "s-1", "t-1", SessionState::Running);
    ask_permission(&mut app, "s-1", 1);
    let badge_row = |app: &App| render(app).lines().filter(|l| l.contains("PERMISSION")).count();
    assert_eq!(badge_row(&app), 1);
    // Looking at another session: the request still waits there while its turn runs...
    for _ in 0..5 {
        app.handle_action(Action::MoveUp);
    }
    open(&mut app, "s-3");
    assert_eq!(badge_row(&app), 1);
    // ...and cannot outlive the turn.
    state(&mut app, "s-1", "t-1", SessionState::WaitingForInput);
    assert_eq!(badge_row(&app), 0);
}

#[test]
fn a_cancelled_turn_ends_with_the_servers_status_line() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.on_notification(Notification::Event(record("s-1", 1, chunk("m1", "working"))));
    app.handle_action(Action::CancelTurn);
    reply(&mut app, 1, Request::Cancel { session_id: "s-1".into() }, Reply::Cancelled);
    assert_eq!(app.flash_text(), None, "no passing message: the transcript says it");
    let cancelled = SessionEvent::TurnCompleted { stop_reason: "cancelled".into(), turn_id: None };
    app.on_notification(Notification::Event(record("s-1", 2, cancelled)));
    let screen = render(&app);
    let working = screen.find("agent: working").expect("the partial answer");
    // The line the server's folded view has (StopReason::turn_end_note), drawn as a status.
    let ended = screen.find("• Turn cancelled.").expect("the end of the turn");
    assert!(working < ended, "{screen}");
    assert!(!screen.contains("— turn"), "no TUI-only line: {screen}");
}

#[test]
fn resume_started_goes_when_the_agent_is_ready() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.handle_action(Action::Resume);
    let resumed =
        baton_protocol::SessionResumeResult { session_id: "s-1".into(), state: SessionState::Starting, launched: true };
    reply(
        &mut app,
        1,
        Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false },
        Reply::Resumed(resumed),
    );
    assert_eq!(app.flash_text(), Some("resume started: the agent is starting"));
    state(&mut app, "s-3", "t-2", SessionState::WaitingForInput);
    assert!(app.flash_text().is_some(), "another session's change is not this one's");
    state(&mut app, "s-1", "t-1", SessionState::WaitingForInput);
    assert_eq!(app.flash_text(), None);
}

/// The warning seen on task creation: the subscription answer (through a request task) came
/// after the first live event (through the notification channel).
#[test]
fn a_first_event_applied_before_the_subscription_answer_is_not_a_server_behind() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    assert_eq!(app.take_commands(), vec![]);
    let subscribe = Request::Subscribe { session_id: "s-1".into(), since_seq: Some(0) };
    let user = SessionEvent::UserMessage { text: "go".into(), turn_id: None };
    app.on_notification(Notification::Event(record("s-1", 1, user)));
    reply(&mut app, 1, subscribe, Reply::Subscribed(SubscribeResult { session_id: "s-1".into(), current_seq: 0 }));
    assert_eq!(requests(&mut app), vec![], "nothing reloaded");
    assert_eq!(app.transcript("s-1").map(|t| t.entries().len()), Some(1));
    // A server really behind the seq we subscribed from is still caught.
    let since_5 = Request::Subscribe { session_id: "s-1".into(), since_seq: Some(5) };
    reply(&mut app, 1, since_5, Reply::Subscribed(SubscribeResult { session_id: "s-1".into(), current_seq: 2 }));
    assert_eq!(requests(&mut app), vec![Request::LoadMessages { session_id: "s-1".into() }]);
}

#[test]
fn a_long_error_is_cut_whole_behind_e_and_shown_until_esc() {
    let mut app = listed_app();
    let long = "could not resume: server error UNAVAILABLE: the agent did not become ready within 90 s; \
                its last words were: error: failed to read the configuration file at \
                /home/ana/.config/agent/settings.json: permission denied (os error 13)";
    let failed = baton_protocol::ClientError::Server(baton_protocol::ErrorPayload::new(
        baton_protocol::ErrorCode::Unavailable,
        "the agent did not become ready within 90 s; its last words were: error: failed to read the \
         configuration file at /home/ana/.config/agent/settings.json: permission denied (os error 13)",
    ));
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false },
        result: Err(failed),
    });
    assert_eq!(app.flash_text(), Some(long));
    let screen: String = render(&app).lines().map(|l| l.trim_matches('"').trim()).collect::<Vec<_>>().join(" ");
    assert!(screen.contains("… E: details") && !screen.contains("(os error 13)"), "{screen}");
    app.handle_key(key(KeyCode::Char('E'), KeyModifiers::NONE));
    let screen: String = render(&app).lines().map(|l| l.trim_matches('"').trim()).collect::<Vec<_>>().join(" ");
    assert!(screen.contains("permission denied (os error 13)"), "{screen}");
    // The first Esc closes the popup, the second hides the message.
    app.handle_key(key(KeyCode::Esc, KeyModifiers::NONE));
    assert_eq!(app.flash_text(), Some(long));
    app.handle_key(key(KeyCode::Esc, KeyModifiers::NONE));
    assert_eq!(app.flash_text(), None);
}

/// The acceptance round's stale messages: a failed cancel stayed after a later action worked,
/// and "task created" stayed while the turn ran.
#[test]
fn a_later_action_replaces_an_old_message_and_successes_go_after_five_seconds() {
    let mut app = listed_app();
    let conflict = baton_protocol::ClientError::Server(baton_protocol::ErrorPayload::new(
        baton_protocol::ErrorCode::Conflict,
        "no turn is running",
    ));
    let cancel = Request::Cancel { session_id: "s-3".into() };
    app.on_outcome(baton_tui::command::Outcome { epoch: 1, request: cancel.clone(), result: Err(conflict) });
    assert!(app.flash_text().is_some_and(|t| t.starts_with("could not cancel")));
    // The next cancel works and says nothing (the transcript shows the turn's end): the old
    // error goes at once.
    app.handle_action(Action::CancelTurn);
    assert_eq!(app.flash_text(), None);
    reply(&mut app, 1, cancel, Reply::Cancelled);
    assert_eq!(app.flash_text(), None);
    // Moving and scrolling keep a message.
    app.handle_action(Action::Resume);
    app.handle_action(Action::MoveDown);
    assert!(app.flash_text().is_some_and(|t| t.starts_with("resuming")));

    let at = std::time::Instant::now();
    app.on_tick(at + std::time::Duration::from_millis(5100));
    assert_eq!(app.flash_text(), None, "a success message is gone after 5 s");
    let failed = baton_protocol::ClientError::Timeout(std::time::Duration::from_secs(30));
    let stop = Request::Stop { session_id: "s-3".into() };
    app.on_outcome(baton_tui::command::Outcome { epoch: 1, request: stop, result: Err(failed) });
    let at = std::time::Instant::now();
    app.on_tick(at + std::time::Duration::from_millis(5100));
    assert!(app.flash_text().is_some(), "an error stays longer (Esc hides it)");
}
