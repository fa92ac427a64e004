//! Scrolling the transcript: a view scrolled up stays put while the agent streams below it,
//! End follows again, and Ctrl-Up/Ctrl-Down move by one line.

use baton_protocol::{Notification, SessionEvent};
use baton_tui::action::Action;
use baton_tui::app::App;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::*;

/// The first message on screen in the transcript pane (right of the list's border: `││`),
/// with the row it is on.
fn top_line(screen: &[String]) -> String {
    let pane =
        |row: &String| row.split("││").nth(1).unwrap_or_default().trim_end_matches(['│', '"']).trim().to_string();
    screen
        .iter()
        .skip(1)
        .enumerate()
        .map(|(i, row)| (i, pane(row)))
        .find(|(_, text)| !text.is_empty())
        .map(|(i, text)| format!("row {i}: {text}"))
        .unwrap_or_default()
}

fn stream(app: &mut App, seqs: std::ops::RangeInclusive<u64>) {
    for seq in seqs {
        let event = SessionEvent::UserMessage { text: format!("message {seq}"), turn_id: None };
        app.on_notification(Notification::Event(record("s-3", seq, event)));
    }
}

#[test]
fn a_view_scrolled_up_stays_put_while_lines_are_added_below() {
    let mut app = opened_with_history();
    app.handle_action(Action::ScrollUp);
    let before = draw(&mut app);
    let top = top_line(&before);
    assert!(top.contains(": you: message"), "{top:?}");
    let offset = app.frame_metrics().transcript_scroll;
    assert!(before.iter().any(|row| row.contains(&format!("↑ {offset} lines up · End to follow"))));

    // Seq 40 (the newest backlog entry, rebuilt from the subscription) and 41..=45: six
    // messages of two rows each (a blank line separates user messages).
    stream(&mut app, 40..=45);
    let after = draw(&mut app);
    assert_eq!(top_line(&after), top, "the view did not move");
    assert_eq!(app.frame_metrics().transcript_scroll, offset + 12);
    assert!(after.iter().any(|row| row.contains(&format!("↑ {} lines up", offset + 12))));

    // End follows the output again.
    app.handle_action(Action::ScrollBottom);
    stream(&mut app, 46..=46);
    let following = draw(&mut app);
    assert!(following.iter().any(|row| row.contains("you: message 46")));
    assert_eq!(app.frame_metrics().transcript_scroll, 0);
    stream(&mut app, 47..=47);
    assert!(draw(&mut app).iter().any(|row| row.contains("you: message 47")), "still following");
}

#[test]
fn ctrl_up_and_down_scroll_by_one_line() {
    let mut app = opened_with_history();
    let ctrl = |code| KeyEvent::new(code, KeyModifiers::CONTROL);
    let bottom = top_line(&draw(&mut app));
    app.handle_key(ctrl(KeyCode::Up));
    app.handle_key(ctrl(KeyCode::Up));
    let up_two = draw(&mut app);
    assert_eq!(app.frame_metrics().transcript_scroll, 2);
    assert_ne!(top_line(&up_two), bottom);
    // From the prompt too.
    app.handle_action(Action::FocusInput);
    app.handle_key(ctrl(KeyCode::Down));
    app.handle_key(ctrl(KeyCode::Down));
    draw(&mut app);
    assert_eq!(app.frame_metrics().transcript_scroll, 0);
    assert_eq!(top_line(&draw(&mut app)), bottom);
    assert_eq!(app.input_text(), "", "the keys were not typed");
}
