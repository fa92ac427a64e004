//! `/` filters the session list as it is typed; Esc in the list cancels the highlighted
//! session's running turn (and only then); the prompt keeps a history of what was sent.

use baton_protocol::SessionState;
use baton_tui::action::Action;
use baton_tui::app::{App, Confirmation, Overlay};
use baton_tui::command::Request;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::*;

fn list_pane(app: &App) -> String {
    // The list is the left part of each row.
    render(app).lines().map(|line| line.chars().take(44).collect::<String>()).collect::<Vec<_>>().join("\n")
}

#[test]
fn slash_filters_the_list_incrementally_and_esc_clears_it() {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "rel");
    let screen = list_pane(&app);
    assert!(screen.contains("Write the release notes"), "{screen}");
    assert!(!screen.contains("Fix the login redirect"), "{screen}");
    assert!(screen.contains("/rel"), "the filter is shown: {screen}");
    // Keys typed in the filter are text, not commands: 'q' did not quit, 'n' opened no form.
    type_text(&mut app, "xq");
    assert!(!app.should_quit() && app.overlay().is_none());
    assert!(list_pane(&app).contains("No session matches “relxq”."));
    for _ in 0..2 {
        press(&mut app, KeyCode::Backspace);
    }
    // By state, and by the NEEDS RESUME flag, case aside.
    for _ in 0..3 {
        press(&mut app, KeyCode::Backspace);
    }
    type_text(&mut app, "completed");
    let screen = list_pane(&app);
    assert_eq!(app.cursor_session(), Some("s-2"), "the cursor moves to what is shown");
    assert!(screen.contains("done") && !screen.contains("waiting for you"), "{screen}");

    press(&mut app, KeyCode::Esc);
    assert_eq!(app.filter_text(), "");
    let screen = list_pane(&app);
    assert!(screen.contains("Write the release notes") && screen.contains("Fix the login redirect"), "{screen}");
}

#[test]
fn a_kept_filter_narrows_what_the_cursor_and_enter_reach() {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "needs resume login");
    press(&mut app, KeyCode::Enter);
    // Back in the list: keys act again, on the one session shown.
    assert_eq!(app.cursor_session(), Some("s-1"));
    press(&mut app, KeyCode::Char('j'));
    assert_eq!(app.cursor_session(), Some("s-1"), "s-2 is hidden");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.opened_session(), Some("s-1"));
    assert!(requests(&mut app).contains(&Request::SessionStatus { session_id: "s-1".into() }));
    // Esc with no turn running and no message clears a kept filter.
    app.handle_action(Action::Dismiss);
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.filter_text(), "");
    assert!(list_pane(&app).contains("Write the release notes"));
}

#[test]
fn esc_in_the_list_asks_before_cancelling_the_running_turn_of_the_highlighted_session() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    // Nothing runs: Esc cancels nothing.
    press(&mut app, KeyCode::Esc);
    assert_eq!(requests(&mut app), vec![]);

    let mut running = status("s-1", "t-1", SessionState::Running, false);
    running.is_agent_running = true;
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::SessionStatus { session_id: "s-1".into() },
        result: Ok(baton_tui::command::Reply::Status(running)),
    });
    app.take_commands();
    // Esc asks; a second Esc (the old trap) only closes the question.
    press(&mut app, KeyCode::Esc);
    assert!(matches!(app.overlay(), Some(Overlay::Confirm(Confirmation::CancelTurn { .. }))));
    press(&mut app, KeyCode::Esc);
    assert!(app.overlay().is_none());
    assert_eq!(requests(&mut app), vec![], "nothing cancelled without a yes");
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(requests(&mut app), vec![Request::Cancel { session_id: "s-1".into() }]);
    assert!(app.flash_text().is_some_and(|t| t.starts_with("cancelling the turn of “Fix the login redirect”")));
    // The message goes by itself once the turn has ended.
    state(&mut app, "s-1", "t-1", SessionState::WaitingForInput);
    assert_eq!(app.flash_text(), None, "'cancelling…' outlived the turn");
    press(&mut app, KeyCode::Esc);
    assert_eq!(requests(&mut app), vec![], "no turn runs any more");
    assert!(app.overlay().is_none());

    // Esc in the prompt leaves it without cancelling (Esc, then y answers a permission).
    state(&mut app, "s-1", "t-1", SessionState::Running);
    press(&mut app, KeyCode::Char('i'));
    press(&mut app, KeyCode::Esc);
    assert_eq!(requests(&mut app), vec![]);
    // No key stops the agent without a question.
    press(&mut app, KeyCode::Char('s'));
    assert!(app.overlay().is_some());
    assert_eq!(requests(&mut app), vec![]);
}

#[test]
fn up_and_down_in_the_prompt_recall_sent_prompts_and_keep_the_draft() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    press(&mut app, KeyCode::Char('i'));
    for prompt in ["first prompt", "second prompt"] {
        type_text(&mut app, prompt);
        press(&mut app, KeyCode::Enter);
    }
    type_text(&mut app, "half written");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.input_text(), "second prompt");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.input_text(), "first prompt");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.input_text(), "first prompt", "nothing older");
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    assert_eq!(app.input_text(), "half written", "the draft comes back");

    // Ctrl-P recalls; Enter sends the recalled prompt again.
    app.handle_key(KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL));
    assert_eq!(app.input_text(), "second prompt");
    app.take_commands();
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        requests(&mut app),
        vec![Request::SendMessage { session_id: "s-1".into(), content: "second prompt".into(), steer: false }]
    );
}

#[test]
fn up_and_down_move_inside_a_multi_line_prompt_before_recalling() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    press(&mut app, KeyCode::Char('i'));
    type_text(&mut app, "sent before");
    press(&mut app, KeyCode::Enter);
    type_text(&mut app, "line one");
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    type_text(&mut app, "line two");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.input_text(), "line one\nline two", "Up moved to the first line");
    press(&mut app, KeyCode::Char('!'));
    assert_eq!(app.input_text(), "line one!\nline two");
    press(&mut app, KeyCode::Up);
    assert_eq!(app.input_text(), "sent before");
    press(&mut app, KeyCode::Down);
    assert_eq!(app.input_text(), "line one!\nline two");
}

#[test]
fn t_folds_thoughts_to_one_dim_line_and_shows_them_again() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    let thought = baton_protocol::SessionEvent::ThoughtChunk {
        message_id: Some("th".into()),
        text: "The next parameter is dropped\nsomewhere in the form.".into(),
    };
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 1, thought)));
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 2, chunk("m", "Found it."))));
    let screen = render(&app);
    assert!(screen.contains("thinking: The next parameter is dropped") && screen.contains("somewhere in the form."));
    press(&mut app, KeyCode::Char('t'));
    assert!(!app.shows_thoughts());
    let screen = render(&app);
    assert!(screen.contains("▸ thought (9 words)") && !screen.contains("somewhere"), "{screen}");
    assert!(screen.contains("agent: Found it."));
    press(&mut app, KeyCode::Char('t'));
    assert!(render(&app).contains("somewhere in the form."));
}

/// The form opened before `agent.list` answered: the first installed agent is chosen when it
/// does, unless the user chose one meanwhile.
#[test]
fn the_new_task_form_picks_the_first_installed_agent_when_the_list_arrives_late() {
    let mut app = listed_app();
    app.take_commands();
    press(&mut app, KeyCode::Char('n'));
    assert!(requests(&mut app).contains(&Request::ListAgents));
    let agents = vec![agent_info("claude-code", "Claude Code", false), agent_info("mock", "Mock agent", true)];
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::ListAgents,
        result: Ok(baton_tui::command::Reply::Agents(agents.clone())),
    });
    assert!(render(&app).contains("◂ Mock agent (mock) ▸"), "{}", render(&app));
    // Chosen by hand: a later list keeps it.
    for _ in 0..2 {
        press(&mut app, KeyCode::Tab);
    }
    press(&mut app, KeyCode::Left);
    app.on_outcome(baton_tui::command::Outcome {
        epoch: 1,
        request: Request::ListAgents,
        result: Ok(baton_tui::command::Reply::Agents(agents)),
    });
    assert!(render(&app).contains("◂ Claude Code (claude-code)"), "{}", render(&app));
}
