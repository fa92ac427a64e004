//! The mouse, on the app and the frames it drew: off by default (nothing reacts), on with
//! `set_mouse` (as `--mouse` does) or `m`; the wheel scrolls the pane under the pointer, a
//! click on a session opens it, a click in the transcript focuses it.

use baton_tui::action::Action;
use baton_tui::command::{Command, Request};
use baton_tui::keymap::KeyMode;
use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use crate::common::*;

fn mouse(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
    MouseEvent { kind, column, row, modifiers: KeyModifiers::NONE }
}

fn click(column: u16, row: u16) -> MouseEvent {
    mouse(MouseEventKind::Down(MouseButton::Left), column, row)
}

/// The screen position of the first row containing `text` (its first column).
fn find(screen: &[String], text: &str) -> (u16, u16) {
    let row = screen.iter().position(|line| line.contains(text)).unwrap_or_else(|| panic!("{text} not on screen"));
    // The rows are quoted: the column counts from after the quote.
    let column = screen[row][..screen[row].find(text).unwrap_or(0)].chars().count() - 1;
    (column as u16, row as u16)
}

#[test]
fn with_the_mouse_off_a_click_and_the_wheel_change_nothing() {
    let mut app = opened_with_history();
    assert!(!app.mouse_enabled());
    let screen = draw(&mut app);
    let (x, y) = find(&screen, "done");
    app.handle_mouse(click(x, y));
    app.handle_mouse(mouse(MouseEventKind::ScrollUp, 70, 10));
    assert_eq!(app.opened_session(), Some("s-3"));
    assert_eq!(app.take_commands(), vec![]);
    assert_eq!(draw(&mut app), screen);
}

#[test]
fn set_mouse_and_m_switch_the_terminal_s_mouse_reporting() {
    let mut app = listed_app();
    app.set_mouse(true);
    assert_eq!(app.take_commands(), vec![Command::Mouse(true)]);
    app.handle_key(crossterm::event::KeyEvent::new(crossterm::event::KeyCode::Char('m'), KeyModifiers::NONE));
    assert!(!app.mouse_enabled());
    assert_eq!(app.take_commands(), vec![Command::Mouse(false)]);
    assert!(app.flash_text().is_some_and(|text| text.starts_with("mouse off")), "{:?}", app.flash_text());
    app.handle_action(Action::ToggleMouse);
    assert!(app.mouse_enabled());
    assert_eq!(app.take_commands(), vec![Command::Mouse(true)]);
    assert!(app.flash_text().is_some_and(|text| text.starts_with("mouse on")), "{:?}", app.flash_text());
}

#[test]
fn a_click_on_a_session_row_opens_that_session() {
    let mut app = opened_with_history();
    app.set_mouse(true);
    app.take_commands();
    // s-2 ("done") is the first session of the other task.
    let screen = draw(&mut app);
    let (x, y) = find(&screen, "done");
    app.handle_mouse(click(x + 3, y));
    assert_eq!(app.cursor_session(), Some("s-2"));
    assert_eq!(app.opened_session(), Some("s-2"));
    assert!(requests(&mut app).contains(&Request::LoadMessages { session_id: "s-2".into() }));
    // A task's title opens its first session.
    let screen = draw(&mut app);
    let (x, y) = find(&screen, "Write the release notes  to rev");
    app.handle_mouse(click(x, y));
    assert_eq!(app.opened_session(), Some("s-3"));
}

#[test]
fn the_wheel_scrolls_the_pane_under_the_pointer() {
    let mut app = opened_with_history();
    app.set_mouse(true);
    let screen = draw(&mut app);
    let (x, y) = find(&screen, "message 35");
    app.handle_mouse(mouse(MouseEventKind::ScrollUp, x, y));
    app.handle_mouse(mouse(MouseEventKind::ScrollUp, x, y));
    let screen = draw(&mut app);
    assert_eq!(app.frame_metrics().transcript_scroll, 6, "three lines a notch");
    assert!(screen.iter().any(|row| row.contains("↑ 6 lines up")), "{screen:#?}");
    app.handle_mouse(mouse(MouseEventKind::ScrollDown, x, y));
    draw(&mut app);
    assert_eq!(app.frame_metrics().transcript_scroll, 3);
    // Over the list, the wheel moves through the sessions; the transcript stays.
    assert_eq!(app.cursor_session(), Some("s-3"));
    let (x, y) = find(&screen, "Fix the login redirect");
    app.handle_mouse(mouse(MouseEventKind::ScrollDown, x, y));
    assert_eq!(app.cursor_session(), Some("s-2"));
    draw(&mut app);
    assert_eq!(app.frame_metrics().transcript_scroll, 3);
}

#[test]
fn a_click_in_the_transcript_focuses_it_and_one_in_the_list_gives_the_focus_back() {
    let mut app = opened_with_history();
    app.set_mouse(true);
    let screen = draw(&mut app);
    let (x, y) = find(&screen, "message 30");
    app.handle_mouse(click(x, y));
    assert_eq!(app.key_mode(), KeyMode::Transcript);
    let (x, y) = find(&screen, "Fix the login redirect");
    app.handle_mouse(click(x, y));
    assert_eq!(app.key_mode(), KeyMode::List);
    assert_eq!(app.opened_session(), Some("s-2"), "a task's title opens its first session");
}

#[test]
fn with_the_help_open_the_wheel_scrolls_it_and_a_click_does_nothing() {
    let mut app = opened_with_history();
    app.set_mouse(true);
    app.handle_action(Action::ToggleHelp);
    let screen = draw(&mut app);
    assert!(screen[0].contains("Help 1-28 of"), "{screen:#?}");
    app.handle_mouse(mouse(MouseEventKind::ScrollDown, 50, 10));
    let screen = draw(&mut app);
    assert!(screen[0].contains("Help 4-31 of"), "{screen:#?}");
    app.handle_mouse(click(5, 4));
    assert_eq!(app.opened_session(), Some("s-3"));
    assert!(app.overlay().is_some());
}
