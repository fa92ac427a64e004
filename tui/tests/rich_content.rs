//! What agents send beyond plain text, drawn whole-screen: Markdown answers (through a
//! CommonMark parser, code blocks with their language) and the edits of tool calls as coloured
//! unified diffs.

mod common;

use baton_protocol::Notification;
use baton_tui::action::Action;
use baton_tui::app::App;
use baton_tui::command::Command;
use baton_tui::layout::markdown;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;

use common::*;

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
