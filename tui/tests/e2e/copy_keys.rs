//! Y and B copy the opened session's last answer, or its last code block, to the terminal's
//! clipboard (OSC 52, written by the event loop); a terminal that cannot take it is told so.

use baton_tui::action::Action;
use baton_tui::app::{App, ClipboardSupport};
use baton_tui::clipboard::Multiplexer;
use baton_tui::command::Command;

use crate::common::*;

fn copies(app: &mut App) -> Vec<String> {
    app.take_commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Copy(text) => Some(text),
            _ => None,
        })
        .collect()
}

fn answered() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    let answer = "Run this:\n```sh\ncargo test -p baton-tui\n```\nThen check the output.";
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 1, chunk("m1", "An older answer."))));
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 2, chunk("m2", answer))));
    app.take_commands();
    app
}

#[test]
fn y_copies_the_whole_last_answer_and_b_its_code_block() {
    let mut app = answered();
    app.handle_action(Action::CopyAnswer);
    assert_eq!(
        copies(&mut app),
        vec!["Run this:\n```sh\ncargo test -p baton-tui\n```\nThen check the output.".to_string()]
    );
    assert!(app.flash_text().is_some_and(|t| t.starts_with("copied the last answer (5 lines)")));
    app.handle_action(Action::CopyCodeBlock);
    assert_eq!(copies(&mut app), vec!["cargo test -p baton-tui".to_string()]);
}

#[test]
fn in_tmux_the_message_says_what_tmux_needs() {
    let mut app = answered();
    app.set_clipboard(ClipboardSupport { may_copy: true, multiplexer: Multiplexer::Tmux });
    app.handle_action(Action::CopyAnswer);
    assert_eq!(copies(&mut app).len(), 1);
    assert!(app.flash_text().is_some_and(|t| t.contains("set-clipboard on")));
}

#[test]
fn a_terminal_without_osc52_gets_a_message_instead_of_a_silent_nothing() {
    let mut app = answered();
    app.set_clipboard(ClipboardSupport { may_copy: false, multiplexer: Multiplexer::None });
    app.handle_action(Action::CopyAnswer);
    assert_eq!(copies(&mut app), Vec::<String>::new());
    assert!(app.flash_text().is_some_and(|t| t.contains("cannot take a copy")));
}

#[test]
fn nothing_to_copy_says_so() {
    let mut app = App::new(SERVER, None);
    app.on_connected(1);
    app.handle_action(Action::CopyAnswer);
    assert_eq!(copies(&mut app), Vec::<String>::new());
    assert!(app.flash_text().is_some_and(|t| t.starts_with("nothing to copy")));
    // The highlighted session is opened to copy from it; its transcript is not there yet.
    let mut app = listed_app();
    app.handle_action(Action::CopyAnswer);
    assert_eq!(app.opened_session(), Some("s-3"));
    assert_eq!(copies(&mut app), Vec::<String>::new());
    assert!(app.flash_text().is_some_and(|t| t.contains("still loading")), "{:?}", app.flash_text());
    let mut app = answered();
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 3, chunk("m3", "No code here."))));
    app.handle_action(Action::CopyCodeBlock);
    assert_eq!(copies(&mut app), Vec::<String>::new());
    assert!(app.flash_text().is_some_and(|t| t.contains("no code block")));
}

/// `O`: the web page's address, logged in with the token this client uses, shown and copied
/// (a TUI that starts the server keeps batond's output, so this is where the page is said).
#[test]
fn capital_o_shows_and_copies_the_web_page_address() {
    for (width, height) in [(80, 24), (60, 20)] {
        let mut app = listed_app();
        app.set_page_token(Some("tok123".into()));
        press(&mut app, crossterm::event::KeyCode::Char('O'));
        assert_eq!(copies(&mut app), vec!["http://127.0.0.1:7777/?token=tok123".to_string()]);
        let screen = render_sized(&app, width, height);
        assert!(screen.contains("the web page:") && screen.contains("http://127.0.0.1:7777/?token=tok123"), "{screen}");
        insta::assert_snapshot!(format!("page_address_{width}x{height}"), screen);
    }
}

#[test]
fn a_one_line_copy_says_one_line() {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.on_notification(baton_protocol::Notification::Event(record("s-1", 1, chunk("m1", "Done."))));
    app.handle_action(Action::CopyAnswer);
    assert_eq!(copies(&mut app), vec!["Done.".to_string()]);
    assert!(
        app.flash_text().is_some_and(|t| t.starts_with("copied the last answer (1 line)")),
        "{:?}",
        app.flash_text()
    );
}
