//! The transcript with the focus: `v` gives it the focus and Esc hands it back, j/k and
//! PgUp/PgDn/Space scroll it, `[`/`]` and `{`/`}` select entries and tool calls (scrolling them
//! into view), Enter expands a tool call to its input and output and folds it again, and the
//! permission keys still answer a request from there.

use baton_protocol::{Notification, SessionEvent, SessionState};
use baton_tui::app::{App, Overlay};
use baton_tui::command::Request;
use baton_tui::keymap::KeyMode;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;

use crate::common::*;

fn event(app: &mut App, seq: u64, event: SessionEvent) {
    app.on_notification(Notification::Event(record("s-3", seq, event)));
}

/// `s-3` opened with a conversation: questions and answers, an edit (with a diff) and a read,
/// then 30 more exchanges, so that the tool calls are far above the bottom.
fn opened_with_tool_calls() -> App {
    let mut app = listed_app();
    open(&mut app, "s-3");
    let mut seq = 0;
    let mut next = |app: &mut App, e: SessionEvent| {
        seq += 1;
        event(app, seq, e);
    };
    next(&mut app, SessionEvent::UserMessage { text: "Fix the typo in the notes".into(), turn_id: None });
    next(
        &mut app,
        SessionEvent::ToolCall {
            tool_call_id: "edit-1".into(),
            title: "Edit NOTES.md".into(),
            tool_kind: Some("edit".into()),
            status: Some("pending".into()),
            content: None,
            raw_input: Some(json!({"path": "NOTES.md", "replace": "teh"})),
        },
    );
    next(
        &mut app,
        SessionEvent::ToolCallUpdate {
            tool_call_id: "edit-1".into(),
            title: None,
            status: Some("completed".into()),
            content: Some(
                json!([{"type": "diff", "path": "NOTES.md", "oldText": "teh release", "newText": "the release"}]),
            ),
            raw_output: None,
        },
    );
    next(
        &mut app,
        SessionEvent::ToolCall {
            tool_call_id: "read-1".into(),
            title: "Read NOTES.md".into(),
            tool_kind: Some("read".into()),
            status: Some("completed".into()),
            content: Some(json!([{"type": "content", "content": {"type": "text", "text": "# Notes\nthe release"}}])),
            raw_input: Some(json!({"path": "NOTES.md"})),
        },
    );
    next(&mut app, SessionEvent::MessageChunk { message_id: Some("m-1".into()), text: "Fixed the typo.".into() });
    for i in 1..=30 {
        next(&mut app, SessionEvent::UserMessage { text: format!("question {i}"), turn_id: None });
        let answer = SessionEvent::MessageChunk { message_id: Some(format!("a-{i}")), text: format!("answer {i}") };
        next(&mut app, answer);
    }
    draw(&mut app);
    app
}

/// The rows of the transcript pane (right of the list) with the selection mark on its left
/// border (`▐`).
fn marked(screen: &[String]) -> Vec<String> {
    screen
        .iter()
        .filter_map(|row| row.split_once("│▐").map(|(_, rest)| rest.trim_end_matches(['│', '"', ' ']).to_string()))
        .collect()
}

#[test]
fn v_focuses_the_transcript_and_esc_gives_the_focus_back() {
    let mut app = opened_with_tool_calls();
    press(&mut app, KeyCode::Char('v'));
    assert_eq!(app.key_mode(), KeyMode::Transcript);
    let screen = draw(&mut app);
    // The newest entry on screen is selected; the status bar says what the keys do.
    assert_eq!(marked(&screen), vec!["agent: answer 30"]);
    assert!(screen.last().is_some_and(|row| row.contains("[ ] { } select · Enter expand")), "{screen:#?}");
    insta::assert_snapshot!("transcript_focused", screen.join("\n"));
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.key_mode(), KeyMode::List);
    assert!(marked(&draw(&mut app)).is_empty(), "no mark without the focus");

    // From the prompt (Ctrl-O), Esc goes back to the prompt, with the draft kept.
    press(&mut app, KeyCode::Char('i'));
    press(&mut app, KeyCode::Char('x'));
    app.handle_key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL));
    assert_eq!(app.key_mode(), KeyMode::Transcript);
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.key_mode(), KeyMode::Input);
    assert_eq!(app.input_text(), "x");
}

#[test]
fn the_focused_transcript_scrolls_by_line_and_page() {
    let mut app = opened_with_tool_calls();
    press(&mut app, KeyCode::Char('v'));
    draw(&mut app);
    let offset = |app: &App| app.frame_metrics().transcript_scroll;
    press(&mut app, KeyCode::Char('k'));
    draw(&mut app);
    assert_eq!(offset(&app), 1);
    press(&mut app, KeyCode::Up);
    draw(&mut app);
    assert_eq!(offset(&app), 2);
    press(&mut app, KeyCode::Char('j'));
    draw(&mut app);
    assert_eq!(offset(&app), 1);
    let page = app.frame_metrics().transcript_height - 2;
    press(&mut app, KeyCode::PageUp);
    draw(&mut app);
    assert_eq!(offset(&app), 1 + page);
    press(&mut app, KeyCode::Char(' '));
    draw(&mut app);
    assert_eq!(offset(&app), 1);
    press(&mut app, KeyCode::Char('b'));
    press(&mut app, KeyCode::Char('G'));
    draw(&mut app);
    assert_eq!(offset(&app), 0);
}

#[test]
fn brackets_step_between_entries_and_braces_between_tool_calls_scrolling_them_into_view() {
    let mut app = opened_with_tool_calls();
    press(&mut app, KeyCode::Char('v'));
    draw(&mut app);
    press(&mut app, KeyCode::Char('['));
    assert_eq!(marked(&draw(&mut app)), vec!["you: question 30"]);
    press(&mut app, KeyCode::Char(']'));
    assert_eq!(marked(&draw(&mut app)), vec!["agent: answer 30"]);

    // The read is far above the view: selecting it scrolls up to it.
    press(&mut app, KeyCode::Char('{'));
    let screen = draw(&mut app);
    assert_eq!(marked(&screen), vec!["▸ read Read NOTES.md  [completed]"]);
    assert!(app.frame_metrics().transcript_scroll > 0);
    press(&mut app, KeyCode::Char('{'));
    assert_eq!(marked(&draw(&mut app))[0], "▸ edit Edit NOTES.md  [completed]");
    press(&mut app, KeyCode::Char('{'));
    assert_eq!(app.flash_text(), Some("no tool call above this one"));
    press(&mut app, KeyCode::Char('['));
    assert_eq!(marked(&draw(&mut app)), vec!["you: Fix the typo in the notes"]);
    press(&mut app, KeyCode::Char('}'));
    assert_eq!(marked(&draw(&mut app))[0], "▸ edit Edit NOTES.md  [completed]");

    // Scrolled away, the selection follows to the nearest entry on screen: the one at the top.
    press(&mut app, KeyCode::End);
    let screen = draw(&mut app);
    let top = screen.iter().find_map(|row| {
        let pane = row.split_once("││").or_else(|| row.split_once("│▐"))?.1.trim_end_matches(['│', '"', ' ']);
        (!pane.is_empty() && !pane.starts_with('─')).then(|| pane.to_string())
    });
    assert_eq!(marked(&screen), vec![top.unwrap_or_default()]);
    assert_eq!(app.frame_metrics().transcript_scroll, 0);
}

#[test]
fn enter_expands_a_tool_call_to_its_input_and_output_and_folds_it_again() {
    let mut app = opened_with_tool_calls();
    press(&mut app, KeyCode::Char('v'));
    draw(&mut app);
    press(&mut app, KeyCode::Char('{'));
    press(&mut app, KeyCode::Char('{'));
    let folded = draw(&mut app);
    // Folded, an edit shows its diff (up to a few rows); expanded, its input and output too.
    assert_eq!(marked(&folded)[0], "▸ edit Edit NOTES.md  [completed]");
    press(&mut app, KeyCode::Enter);
    let expanded = draw(&mut app);
    assert_eq!(
        marked(&expanded),
        vec![
            "▾ edit Edit NOTES.md  [completed]",
            "  input:",
            "    path: NOTES.md",
            "    replace: teh",
            "  output:",
            "    NOTES.md  +1 -1",
            "    @@ -1 +1 @@",
            "    -teh release ⏎\u{338}",
            "    +the release ⏎\u{338}",
        ]
    );
    insta::assert_snapshot!("tool_call_expanded", expanded.join("\n"));
    press(&mut app, KeyCode::Enter);
    assert_eq!(draw(&mut app), folded, "Enter again folds it back");

    // Enter on an entry that is no tool call says how to find one.
    press(&mut app, KeyCode::Char('['));
    press(&mut app, KeyCode::Enter);
    assert!(app.flash_text().is_some_and(|t| t.starts_with("Enter expands a tool call")));
}

#[test]
fn the_permission_keys_answer_from_the_focused_transcript_and_n_never_answers() {
    let mut app = opened_with_tool_calls();
    press(&mut app, KeyCode::Char('v'));
    state(&mut app, "s-3", "t-2", SessionState::Running);
    ask_permission(&mut app, "s-3", 200);
    press(&mut app, KeyCode::Char('n'));
    assert!(matches!(app.overlay(), Some(baton_tui::app::Overlay::NewTask(_))), "n is the new task");
    assert!(!requests(&mut app).iter().any(|r| matches!(r, Request::RespondPermission { .. })));
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('N'));
    let reject =
        Request::RespondPermission { session_id: "s-3".into(), request_id: "p-1".into(), option_id: "reject".into() };
    assert_eq!(requests(&mut app), vec![reject]);
    press(&mut app, KeyCode::Char('1'));
    let allow =
        Request::RespondPermission { session_id: "s-3".into(), request_id: "p-1".into(), option_id: "allow".into() };
    assert_eq!(requests(&mut app), vec![allow.clone()]);
    press(&mut app, KeyCode::Char('y'));
    assert_eq!(requests(&mut app), vec![allow]);
    assert_eq!(app.key_mode(), KeyMode::Transcript);
    assert!(!matches!(app.overlay(), Some(Overlay::NewTask(_))));
}
