//! Long errors in the status line: cut to one row with "E: details", and `E` shows the whole
//! error in a popup that scrolls and closes. An error that fits is shown whole, without the hint.

use baton_protocol::{ClientError, ErrorCode, ErrorPayload};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Outcome, Request};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::*;

const AGENT_SAID: &str = "the agent did not become ready within 90 s; it said: error: failed to read the \
    configuration file at /home/ana/.config/agent/settings.json: permission denied (os error 13)";

/// The three sessions listed, and a resume of `s-1` that failed with `message`.
fn resume_failed_with(message: &str) -> App {
    let mut app = listed_app();
    let failed = ClientError::Server(ErrorPayload::new(ErrorCode::Unavailable, message));
    app.on_outcome(Outcome {
        epoch: 1,
        request: Request::Resume { session_id: "s-1".into(), fresh: false, retry_failed: false, automatic: false },
        result: Err(failed),
    });
    app
}

/// The status rows: everything under the prompt box.
fn status_rows(screen: &str) -> Vec<&str> {
    let lines: Vec<&str> = screen.lines().collect();
    let prompt_bottom = lines.iter().rposition(|line| line.contains('└')).unwrap_or(0);
    lines[prompt_bottom + 1..].to_vec()
}

#[test]
fn a_long_error_is_cut_to_one_row_with_the_hint() {
    let app = resume_failed_with(AGENT_SAID);
    for (width, height) in [(100, 30), (60, 20)] {
        let screen = render_sized(&app, width, height);
        let rows = status_rows(&screen);
        let error_rows: Vec<&&str> = rows.iter().filter(|row| row.contains("could not resume")).collect();
        assert_eq!(error_rows.len(), 1, "{screen}");
        assert!(error_rows[0].contains("… E: details"), "{screen}");
        assert!(!screen.contains("os error 13"), "the end of the error is cut:\n{screen}");
        insta::assert_snapshot!(format!("long_error_cut_{width}x{height}"), screen);
    }
}

#[test]
fn an_error_that_fits_is_whole_without_the_hint() {
    let app = resume_failed_with("gone");
    for (width, height) in [(100, 30), (60, 20)] {
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("could not resume: server error UNAVAILABLE: gone"), "{screen}");
        assert!(!screen.contains("E: details"), "{screen}");
    }
}

#[test]
fn e_shows_the_whole_error_in_a_popup_that_scrolls_and_closes() {
    let mut app = resume_failed_with(AGENT_SAID);
    press(&mut app, KeyCode::Char('E'));
    let screen = render_sized(&app, 100, 30);
    assert!(screen.contains("┌ Error "), "{screen}");
    // The whole error, wrapped, the part the status line cut included.
    assert!(screen.contains("os error 13"), "{screen}");
    insta::assert_snapshot!("error_details_100x30", screen);
    press(&mut app, KeyCode::Char('q'));
    assert!(app.overlay().is_none());
}

#[test]
fn an_error_taller_than_the_popup_scrolls_with_j_k_and_pages() {
    let many_lines: String = (1..=40).map(|n| format!("line {n} of the agent's output\n")).collect();
    let mut app = resume_failed_with(&format!("the agent failed:\n{many_lines}"));
    // The status line shows the first line, cut since more follow.
    let screen = render_sized(&app, 100, 30);
    assert!(status_rows(&screen).iter().any(|row| row.contains("the agent failed:… E: details")), "{screen}");

    // A 60x20 frame hands the app its metrics: a page is the screen's height less 6 rows.
    draw_sized(&mut app, 60, 20);
    press(&mut app, KeyCode::Char('E'));
    let screen = render_sized(&app, 60, 20);
    assert!(screen.contains("┌ Error 1-16 of 42 · j/k scroll"), "{screen}");
    insta::assert_snapshot!("error_details_60x20", screen);
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Char('j'));
    let screen = draw_sized(&mut app, 60, 20).join("\n");
    assert!(screen.contains("Error 3-18 of 42"), "{screen}");
    // Pages of 14 rows (the screen's height less 6); past the end it stops at the last row.
    for _ in 0..3 {
        app.handle_key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE));
    }
    let screen = draw_sized(&mut app, 60, 20).join("\n");
    assert!(screen.contains("Error 27-42 of 42") && screen.contains("line 40 of"), "{screen}");
    // From the end, a line up and a page up move at once.
    press(&mut app, KeyCode::Char('k'));
    app.handle_key(KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE));
    let screen = draw_sized(&mut app, 60, 20).join("\n");
    assert!(screen.contains("Error 12-27 of 42"), "a line and a page up: {screen}");
    app.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(app.overlay().is_none());
    // Esc closed the popup only: the message is still on the status line.
    assert!(app.flash_text().is_some());
}

#[test]
fn e_without_an_error_says_so() {
    let mut app = listed_app();
    app.handle_action(Action::ShowError);
    assert!(app.overlay().is_none());
    assert_eq!(app.flash_text(), Some("no error to show"));
}

/// Right after a turn failed (its error is in the transcript, no message of this client's is
/// held), `E` shows that error whole rather than "no error to show".
#[test]
fn e_shows_the_error_of_a_failed_turn() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    let failed = baton_protocol::SessionEvent::Error { message: "the agent crashed: exit status 101".into() };
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 1, failed)));
    assert_eq!(app.last_error(), None);
    app.handle_action(baton_tui::action::Action::ShowError);
    assert!(matches!(app.overlay(), Some(baton_tui::app::Overlay::ErrorDetails)), "{:?}", app.flash_text());
    assert!(render_sized(&app, 80, 24).contains("the agent crashed: exit status 101"));
}
