//! Older history: scrolling up past the top of a transcript loads the page of `message.list`
//! before the oldest entry held, puts it in front without duplicates, and keeps the view where
//! it was.

use baton_protocol::{ClientError, MessageKind, MessageListResult};
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::{Outcome, Reply, Request};
use baton_tui::transcript::EntryBody;

use crate::common::*;

/// The session under the cursor of [`listed_app`]: the newest one.
const SESSION: &str = "s-3";

fn users(seqs: std::ops::RangeInclusive<u64>) -> Vec<baton_protocol::Message> {
    seqs.map(|seq| message(seq, MessageKind::User, &format!("message {seq}"), None)).collect()
}

fn row_of(screen: &[String], text: &str) -> Option<usize> {
    screen.iter().position(|line| line.contains(text))
}

/// The first listed session (`s-3`) opened on the newest page of a long history: seq 41..=80, older ones on the server.
fn opened_on_the_newest_page() -> App {
    let mut app = listed_app();
    app.handle_action(Action::OpenSelected);
    assert_eq!(app.opened_session(), Some(SESSION));
    app.take_commands();
    let newest = MessageListResult { messages: users(41..=80), has_more: true, cut: Vec::new() };
    reply(&mut app, 1, Request::LoadMessages { session_id: SESSION.to_string() }, Reply::Messages(newest));
    app.take_commands();
    draw(&mut app);
    app
}

fn older(before_seq: u64) -> Request {
    Request::LoadOlderMessages { session_id: SESSION.to_string(), before_seq }
}

fn seqs(app: &App) -> Vec<u64> {
    app.transcript(SESSION).expect("transcript held").entries().iter().map(|e| e.seq).collect()
}

#[test]
fn page_up_at_the_top_asks_for_the_page_before_the_oldest_seq_held() {
    let mut app = opened_on_the_newest_page();
    // Scrolling up within what is held asks for nothing.
    app.handle_action(Action::ScrollUp);
    assert_eq!(requests(&mut app), vec![]);
    for _ in 0..20 {
        app.handle_action(Action::ScrollUp);
    }
    // At the top, PgUp asks once; pressing it again while that page loads does not.
    assert_eq!(requests(&mut app), vec![older(41)]);
    assert!(app.is_loading_older(SESSION));
    assert!(draw(&mut app)[1].contains("… loading older messages"));
}

#[test]
fn home_loads_the_previous_page_and_prepends_it_without_duplicates() {
    let mut app = opened_on_the_newest_page();
    app.handle_action(Action::ScrollTop);
    assert_eq!(requests(&mut app), vec![older(41)]);
    let before = draw(&mut app);
    let anchor = row_of(&before, "you: message 41").expect("the oldest message is on screen");

    // The page reaches the oldest seq held (a message can end a page and start the next):
    // it is not added twice.
    let page = MessageListResult { messages: users(21..=41), has_more: true, cut: Vec::new() };
    reply(&mut app, 1, older(41), Reply::Messages(page));
    assert_eq!(seqs(&app), (21..=79).collect::<Vec<u64>>());
    // The view stays anchored on what it showed.
    let after = draw(&mut app);
    assert_eq!(row_of(&after, "you: message 41"), Some(anchor), "{after:#?}");
    assert!(row_of(&after, "you: message 40").is_some_and(|row| row < anchor));

    // Home again asks for the page before the new oldest; the last page drops the notice.
    app.handle_action(Action::ScrollTop);
    assert_eq!(requests(&mut app), vec![older(21)]);
    let page = MessageListResult { messages: users(1..=20), has_more: false, cut: Vec::new() };
    reply(&mut app, 1, older(21), Reply::Messages(page));
    assert_eq!(seqs(&app), (1..=79).collect::<Vec<u64>>());
    let transcript = app.transcript(SESSION).expect("transcript held");
    assert!(!transcript.older_omitted());
    let first = transcript.entries().first().map(|e| e.body.clone());
    assert_eq!(first, Some(EntryBody::User("message 1".into())));
    app.handle_action(Action::ScrollTop);
    let screen = draw(&mut app);
    assert!(row_of(&screen, "older messages").is_none(), "{screen:#?}");
    // Nothing older to ask for.
    assert_eq!(requests(&mut app), vec![]);
}

#[test]
fn a_failed_or_stale_page_changes_nothing_and_can_be_asked_again() {
    let mut app = opened_on_the_newest_page();
    app.handle_action(Action::ScrollTop);
    assert_eq!(requests(&mut app), vec![older(41)]);
    let failed =
        Outcome { epoch: 1, request: older(41), result: Err(ClientError::Timeout(std::time::Duration::from_secs(30))) };
    app.on_outcome(failed);
    assert!(app.flash_text().is_some_and(|t| t.contains("load older messages")));
    assert_eq!(seqs(&app), (41..=79).collect::<Vec<u64>>());

    app.handle_action(Action::ScrollTop);
    assert_eq!(requests(&mut app), vec![older(41)]);
    // An answer for another starting point (the transcript was reloaded meanwhile) is dropped.
    let page = MessageListResult { messages: users(1..=30), has_more: false, cut: Vec::new() };
    reply(&mut app, 1, older(31), Reply::Messages(page));
    assert_eq!(seqs(&app), (41..=79).collect::<Vec<u64>>());
    assert!(app.transcript(SESSION).is_some_and(|t| t.older_omitted()));
}

/// An answer `message.list` cut (longer than 256 KiB) shows its start and says how much is not
/// shown and how to read it whole (an older entry: the newest is rebuilt from its events).
#[test]
fn a_cut_answer_says_how_much_is_not_shown_and_how_to_read_it() {
    let mut app = listed_app();
    app.handle_action(Action::OpenSelected);
    app.take_commands();
    let mut messages = users(1..=1);
    messages.push(message(2, MessageKind::Agent, "the start of a very long answer", Some("m1")));
    // The newest entry is rebuilt from the session's events (whole), not from this page.
    messages.push(message(3, MessageKind::User, "thanks", None));
    let cut = vec![baton_protocol::CutText { seq: 2, total_bytes: 3_250_000 }];
    let page = MessageListResult { messages, has_more: false, cut };
    reply(&mut app, 1, Request::LoadMessages { session_id: SESSION.to_string() }, Reply::Messages(page));
    let screen = draw_sized(&mut app, 200, 40).join("\n");
    assert!(screen.contains("the start of a very long answer"), "{screen}");
    assert!(screen.contains("3.1 MB more not shown here (3.1 MB in all)"), "{screen}");
    assert!(screen.contains("export the transcript (x)"), "{screen}");
}
