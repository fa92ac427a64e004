//! The search view, the export form, fork and usage, driven with scripted server data and drawn
//! as whole screens (100x30): what each key sends, what each answer shows.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use baton_protocol::{
    Cost, ExportFormat, ForkOrigin, MessageKind, MessageListResult, MessageSearchResult, SearchHit, SessionState,
    SessionUsage, SnippetPart, UsageGetResult, UsageSummary,
};
use baton_tui::action::{Action, EditOp};
use baton_tui::app::{App, Overlay, SEARCH_DEBOUNCE};
use baton_tui::command::{Outcome, Reply, Request};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::common::*;

/// The requests sent, usage reads left out (they have their own test below).
fn sent(app: &mut App) -> Vec<Request> {
    requests(app).into_iter().filter(|r| !matches!(r, Request::Usage { .. })).collect()
}

fn hit(session_id: &str, seq: u64, title: &str, before: &str, word: &str, after: &str) -> SearchHit {
    SearchHit {
        session_id: session_id.into(),
        task_id: "t-1".into(),
        task_title: title.into(),
        seq,
        kind: MessageKind::Agent,
        snippet: vec![
            SnippetPart { text: before.into(), matched: false },
            SnippetPart { text: word.into(), matched: true },
            SnippetPart { text: after.into(), matched: false },
        ],
        created_at: "2026-11-29T17:50:00Z".into(),
    }
}

fn search(query: &str, cursor: Option<&str>) -> Request {
    Request::Search { query: query.into(), cursor: cursor.map(str::to_string) }
}

/// `f`, "redirect" typed, the pause that sends it, and its first page (two hits, more on the
/// server).
fn searched_app() -> App {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('f'));
    type_text(&mut app, "redirect");
    app.on_tick(Instant::now() + SEARCH_DEBOUNCE + Duration::from_millis(10));
    assert_eq!(sent(&mut app), vec![search("redirect*", None)]);
    let page = MessageSearchResult {
        hits: vec![
            hit("s-1", 42, "Fix the login redirect", "the ", "redirect", " drops the next parameter"),
            hit("s-3", 7, "Write the release notes", "mention the ", "redirect", " fix in the notes"),
        ],
        next_cursor: Some("c2".into()),
    };
    reply(&mut app, 1, search("redirect*", None), Reply::SearchHits(page));
    app
}

#[test]
fn the_query_is_sent_once_typing_pauses_not_per_key() {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('f'));
    assert!(matches!(app.overlay(), Some(Overlay::Search(_))));
    type_text(&mut app, "pine");
    app.on_tick(Instant::now());
    assert_eq!(sent(&mut app), vec![], "still typing");
    app.on_tick(Instant::now() + SEARCH_DEBOUNCE + Duration::from_millis(10));
    assert_eq!(sent(&mut app), vec![search("pine*", None)], "the word being typed is a prefix");
    // More typed before the answer: the old answer is dropped, the new query is sent.
    type_text(&mut app, "apple");
    let stale = MessageSearchResult { hits: vec![hit("s-1", 3, "x", "", "pine", "")], next_cursor: None };
    reply(&mut app, 1, search("pine*", None), Reply::SearchHits(stale));
    assert!(!render(&app).contains("hit 1 of 1"), "a stale page is not shown");
    app.on_tick(Instant::now() + SEARCH_DEBOUNCE + Duration::from_millis(10));
    assert_eq!(sent(&mut app), vec![search("pineapple*", None)]);
    // A space ends the word: it is then searched whole.
    type_text(&mut app, " ");
    app.on_tick(Instant::now() + SEARCH_DEBOUNCE + Duration::from_millis(10));
    assert_eq!(sent(&mut app), vec![search("pineapple", None)]);
}

#[test]
fn search_view_screen() {
    let app = searched_app();
    insta::assert_snapshot!("search_view", render(&app));
}

#[test]
fn moving_past_the_last_hit_loaded_asks_for_the_next_page() {
    let mut app = searched_app();
    press(&mut app, KeyCode::Down);
    assert_eq!(sent(&mut app), vec![search("redirect*", Some("c2"))]);
    press(&mut app, KeyCode::Down);
    assert_eq!(sent(&mut app), vec![], "one page at a time");
    let more = MessageSearchResult {
        hits: vec![hit("s-2", 5, "Fix the login redirect", "", "redirect", "s")],
        next_cursor: None,
    };
    reply(&mut app, 1, search("redirect*", Some("c2")), Reply::SearchHits(more));
    press(&mut app, KeyCode::Down);
    assert!(render(&app).contains("hit 3 of 3"), "{}", render(&app));
}

#[test]
fn a_refused_query_is_said_in_the_view() {
    let mut app = searched_app();
    let error = baton_protocol::ClientError::Server(baton_protocol::ErrorPayload::validation(
        "query must have 1 to 500 characters besides spaces",
    ));
    app.on_outcome(Outcome { epoch: 1, request: search("redirect*", None), result: Err(error) });
    let screen = render(&app);
    assert!(screen.contains("could not search: server error"), "{screen}");
    assert!(matches!(app.overlay(), Some(Overlay::Search(_))), "the view stays open");
}

/// Enter on a hit older than the newest page: the session is opened, older pages are loaded
/// until one holds the entry, and the focused transcript selects it.
#[test]
fn enter_opens_the_hit_in_context_loading_older_pages_until_it_is_held() {
    let mut app = searched_app();
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.overlay(), None);
    assert_eq!(app.opened_session(), Some("s-1"));
    let sent_now = sent(&mut app);
    assert!(sent_now.contains(&Request::LoadMessages { session_id: "s-1".into() }), "{sent_now:?}");
    let users = |range: std::ops::RangeInclusive<u64>| {
        range.map(|seq| message(seq, MessageKind::User, &format!("message {seq}"), None)).collect::<Vec<_>>()
    };
    let newest = MessageListResult { messages: users(61..=100), has_more: true, cut: Vec::new() };
    reply(&mut app, 1, Request::LoadMessages { session_id: "s-1".into() }, Reply::Messages(newest));
    let older = Request::LoadOlderMessages { session_id: "s-1".into(), before_seq: 61 };
    assert!(sent(&mut app).contains(&older));
    let mut page = users(30..=60);
    page[12] = message(42, MessageKind::Agent, "the redirect drops the next parameter", Some("m42"));
    reply(&mut app, 1, older, Reply::Messages(MessageListResult { messages: page, has_more: true, cut: Vec::new() }));
    assert_eq!(sent(&mut app), vec![], "the page holds the hit: nothing more to load");
    let screen = draw(&mut app);
    assert_eq!(app.selected_entry(), Some(42));
    assert_eq!(app.key_mode(), baton_tui::keymap::KeyMode::Transcript);
    let row = screen.iter().find(|line| line.contains("the redirect drops the next parameter")).expect("on screen");
    assert!(row.contains('▐'), "marked selected: {row}");
    insta::assert_snapshot!("search_hit_opened_in_context", screen.join("\n"));
    // f again: the same query and its hits.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('f'));
    assert!(render(&app).contains("hit 1 of 2"));
}

fn export_request(path: &str, format: ExportFormat, thoughts: bool, overwrite: bool) -> Request {
    Request::Export { session_id: "s-3".into(), format, thoughts, path: PathBuf::from(path), overwrite }
}

#[test]
fn export_form_screen_and_what_enter_sends() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    press(&mut app, KeyCode::Char('x'));
    insta::assert_snapshot!("export_form", render(&app));
    press(&mut app, KeyCode::Enter);
    let default = "./write-the-release-notes-s-3.md";
    assert_eq!(sent(&mut app), vec![export_request(default, ExportFormat::Markdown, false, false)]);
    reply(
        &mut app,
        1,
        export_request(default, ExportFormat::Markdown, false, false),
        Reply::Exported { path: PathBuf::from("/home/u/write-the-release-notes-s-3.md"), bytes: 12_700 },
    );
    assert_eq!(app.overlay(), None);
    assert_eq!(app.flash_text(), Some("exported the transcript to /home/u/write-the-release-notes-s-3.md (12.4 KB)"));
}

#[test]
fn an_existing_file_is_replaced_only_after_a_second_enter() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    press(&mut app, KeyCode::Char('x'));
    // Tab: JSON Lines (the default name follows); Ctrl-T: with thoughts.
    press(&mut app, KeyCode::Tab);
    app.handle_key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL));
    press(&mut app, KeyCode::Enter);
    let path = "./write-the-release-notes-s-3.jsonl";
    assert_eq!(sent(&mut app), vec![export_request(path, ExportFormat::Jsonl, true, false)]);
    let exists = Reply::ExportNotWritten { reason: "File exists (os error 17)".into(), exists: true };
    reply(&mut app, 1, export_request(path, ExportFormat::Jsonl, true, false), exists);
    let screen = render(&app);
    assert!(screen.contains("the file exists: Enter again replaces it"), "{screen}");
    assert!(screen.contains("Enter replace the file"), "{screen}");
    press(&mut app, KeyCode::Enter);
    assert_eq!(sent(&mut app), vec![export_request(path, ExportFormat::Jsonl, true, true)]);
    // A name typed anew is a new question.
    let failed = Reply::ExportNotWritten { reason: "No such file or directory (os error 2)".into(), exists: false };
    reply(&mut app, 1, export_request(path, ExportFormat::Jsonl, true, true), failed);
    app.handle_action(Action::Edit(EditOp::Insert('x')));
    press(&mut app, KeyCode::Enter);
    assert_eq!(sent(&mut app), vec![export_request(&format!("{path}x"), ExportFormat::Jsonl, true, false)]);
}

fn forked_row() -> baton_protocol::SessionInfo {
    let mut row =
        row(status("s-4", "t-2", SessionState::Starting, false), "Write the release notes", "2026-11-29T17:59:50Z");
    row.forked_from = Some(ForkOrigin { session_id: "s-3".into(), seq: 12 });
    row
}

#[test]
fn fork_asks_first_then_opens_the_fork_which_shows_its_origin() {
    let mut app = listed_app();
    press(&mut app, KeyCode::Char('F'));
    insta::assert_snapshot!("fork_confirmation", render(&app));
    assert_eq!(sent(&mut app), vec![], "nothing before the answer");
    press(&mut app, KeyCode::Char('y'));
    let fork = Request::Fork { session_id: "s-3".into(), agent: None };
    assert_eq!(sent(&mut app), vec![fork.clone()]);
    reply(&mut app, 1, fork, Reply::Forked(Box::new(forked_row())));
    assert_eq!(app.opened_session(), Some("s-4"));
    let empty = MessageListResult { messages: vec![], has_more: false, cut: Vec::new() };
    reply(&mut app, 1, Request::LoadMessages { session_id: "s-4".into() }, Reply::Messages(empty));
    let screen = render(&app);
    assert!(screen.contains("fork of s-3"), "the header says where it came from:\n{screen}");
    app.handle_action(Action::Dismiss);
    insta::assert_snapshot!("fork_opened", render(&app));
}

fn summary(input: Option<u64>, output: Option<u64>, cost: Option<f64>) -> UsageSummary {
    UsageSummary {
        turns_reported: u64::from(input.is_some()),
        input_tokens: input,
        output_tokens: output,
        cost: cost.map(|amount| Cost { amount, currency: "USD".into() }).into_iter().collect(),
        sessions: 1,
        ..Default::default()
    }
}

#[test]
fn usage_in_the_header_and_the_total_in_the_status_bar_and_unknown_shows_nothing() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    let usage = Request::Usage { session_id: Some("s-3".into()) };
    // Unknown: the agent reported nothing, so nothing is shown (not 0).
    let unknown = UsageGetResult {
        session: Some(SessionUsage { session_id: "s-3".into(), summary: summary(None, None, None), turns: vec![] }),
        total: summary(None, None, None),
    };
    reply(&mut app, 1, usage.clone(), Reply::Usage(Box::new(unknown)));
    let screen = render(&app);
    assert!(!screen.contains(" in ·") && !screen.contains('Σ') && !screen.contains("0 in"), "{screen}");

    let known = UsageGetResult {
        session: Some(SessionUsage {
            session_id: "s-3".into(),
            summary: summary(Some(1200), Some(80), Some(0.25)),
            turns: vec![],
        }),
        total: UsageSummary { sessions: 2, ..summary(Some(5400), Some(610), Some(0.25)) },
    };
    reply(&mut app, 1, usage, Reply::Usage(Box::new(known)));
    let screen = render(&app);
    assert!(screen.contains("1.2k in · 80 out · $0.25"), "{screen}");
    assert!(screen.contains("Σ 5.4k in · 610 out · $0.25"), "{screen}");
    insta::assert_snapshot!("usage_in_header_and_status_bar", screen);

    // A turn's end reads it again: the total, with the opened session's own.
    requests(&mut app);
    let mut ended = state_changed("s-3", "t-2", SessionState::WaitingForInput, false);
    if let baton_protocol::Notification::StateChanged(change) = &mut ended {
        change.previous_state = Some(SessionState::Running);
    }
    app.on_notification(ended);
    assert!(requests(&mut app).contains(&Request::Usage { session_id: Some("s-3".into()) }));
}

#[test]
fn an_export_cut_short_by_a_lost_connection_says_so_in_the_form() {
    let mut app = listed_app();
    open(&mut app, "s-3");
    press(&mut app, KeyCode::Char('x'));
    press(&mut app, KeyCode::Enter);
    let request = export_request("./write-the-release-notes-s-3.md", ExportFormat::Markdown, false, false);
    assert_eq!(sent(&mut app), vec![request.clone()]);
    // The answer comes after a reconnect (a newer epoch): the form is still told.
    app.on_connected(2);
    app.on_outcome(Outcome { epoch: 1, request, result: Err(baton_protocol::ClientError::Closed) });
    let screen = render(&app);
    assert!(screen.contains("could not export the transcript: the connection is closed"), "{screen}");
    assert!(screen.contains("Enter export"), "the form stays open to try again: {screen}");
}
