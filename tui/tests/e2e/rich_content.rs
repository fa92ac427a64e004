//! What agents send beyond plain text, drawn whole-screen: Markdown answers (through a
//! CommonMark parser, code blocks with their language) and the edits of tool calls as coloured
//! unified diffs.

use baton_protocol::Notification;
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::Command;
use baton_tui::layout::markdown;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;

use crate::common::*;

/// An answer with every element the transcript draws specially.
const ANSWER: &str = "\
## Fixing the redirect

The form *drops* the **`next`** parameter; see [the handler](https://example.org/auth#redirect).

1. Keep `next` in the form
2. Check it on the server:
   - same origin only
   - ~~absolute URLs~~ relative paths only

> Tested on the staging server.

```rust
fn safe_next(next: &str) -> bool {
    next.starts_with('/') && !next.starts_with(\"//\")
}
```
Done.";

fn answered() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    app.on_notification(Notification::Event(record("s-1", 1, chunk("m1", ANSWER))));
    app.take_commands();
    app
}

#[test]
fn a_markdown_answer() {
    let app = answered();
    insta::assert_snapshot!(render(&app));
}

/// Lines with their spans' colours and attributes written out: `«text»{fg +ATTRIBUTES}`, plain
/// text as it is.
pub fn styled(lines: &[Line<'_>]) -> String {
    let mut out = String::new();
    for line in lines {
        for span in &line.spans {
            let style = span.style;
            if style == Style::default() {
                out.push_str(&span.content);
                continue;
            }
            let mut marks = Vec::new();
            if let Some(fg) = style.fg {
                marks.push(format!("{fg}"));
            }
            if style.add_modifier != Modifier::empty() {
                marks.push(format!("+{:?}", style.add_modifier).replace("Modifier(", "").replace(')', ""));
            }
            out.push_str(&format!("«{}»{{{}}}", span.content, marks.join(" ")));
        }
        out.push('\n');
    }
    out
}

/// Emphasis, code, links and the code block's frame, with their styles.
#[test]
fn a_markdown_answer_styled() {
    insta::assert_snapshot!(styled(&markdown::lines(ANSWER, Style::new())));
}

/// The block drawn with its "rust" label is the one `B` copies, without fences or label.
#[test]
fn b_copies_the_labelled_code_block() {
    let mut app = answered();
    app.handle_action(Action::CopyCodeBlock);
    let copied: Vec<String> = app
        .take_commands()
        .into_iter()
        .filter_map(|command| match command {
            Command::Copy(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(
        copied,
        vec![
            "fn safe_next(next: &str) -> bool {\n    next.starts_with('/') && !next.starts_with(\"//\")\n}".to_string()
        ]
    );
}

const OLD_REDIRECT: &str = "\
pub fn redirect_target(query: &Query) -> String {
    let next = query.get(\"next\");
    match next {
        Some(path) => path.to_string(),
        None => \"/\".to_string(),
    }
}
";

const NEW_REDIRECT: &str = "\
pub fn redirect_target(query: &Query) -> String {
    let next = query.get(\"next\");
    match next {
        Some(path) if safe_next(path) => path.to_string(),
        _ => \"/\".to_string(),
    }
}
";

/// An edit tool call whose content is a diff, completed.
fn edited() -> App {
    let mut app = listed_app();
    open(&mut app, "s-1");
    let call = baton_protocol::SessionEvent::ToolCall {
        tool_call_id: "tc-1".into(),
        title: "Edit src/auth/redirect.rs".into(),
        tool_kind: Some("edit".into()),
        status: Some("in_progress".into()),
        content: None,
        raw_input: None,
    };
    app.on_notification(Notification::Event(record("s-1", 1, call)));
    let update = baton_protocol::SessionEvent::ToolCallUpdate {
        tool_call_id: "tc-1".into(),
        title: None,
        status: Some("completed".into()),
        content: Some(serde_json::json!([
            {"type": "diff", "path": "src/auth/redirect.rs", "oldText": OLD_REDIRECT, "newText": NEW_REDIRECT},
            {"type": "diff", "path": "src/auth/safe.rs", "oldText": null, "newText": "pub fn safe_next(p: &str) -> bool {\n    p.starts_with('/')\n}\n"},
        ])),
        raw_output: None,
    };
    app.on_notification(Notification::Event(record("s-1", 2, update)));
    app.on_notification(Notification::Event(record("s-1", 3, chunk("m1", "Done: `next` is checked now."))));
    app.take_commands();
    app
}

/// The tool call's diffs are drawn under it, as the update brought them.
#[test]
fn an_edit_tool_call_with_its_diff() {
    let app = edited();
    insta::assert_snapshot!(render(&app));
}

/// Removed lines red, added green, hunk headers cyan.
#[test]
fn a_diff_styled() {
    let lines = baton_tui::layout::diff::render_diff("src/auth/redirect.rs", Some(OLD_REDIRECT), NEW_REDIRECT, 80);
    insta::assert_snapshot!(styled(&lines));
}
