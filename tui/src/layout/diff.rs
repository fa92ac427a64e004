//! An edit an agent reports in a tool call (ACP `{"type": "diff", "path", "oldText", "newText"}`)
//! drawn as a unified diff: the path with the lines added and removed, then each hunk with
//! three lines of context, removed lines red, added lines green (16 standard colours).

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::wrap::wrap;

/// Lines of context around each change.
const CONTEXT: usize = 3;
/// Above this many lines (old and new together) the texts are not compared: the diff would
/// take long and fill the transcript; the sizes are shown instead.
const MAX_DIFF_LINES: usize = 20_000;

/// One ACP diff content item, borrowed from the tool call's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiffContent<'a> {
    pub path: &'a str,
    /// `None` for a file the edit creates.
    pub old: Option<&'a str>,
    pub new: &'a str,
}

impl<'a> DiffContent<'a> {
    /// The item as a diff, when it is one (`type: "diff"` with a path and a new text).
    pub fn from_item(item: &'a Value) -> Option<DiffContent<'a>> {
        if item.get("type").and_then(Value::as_str) != Some("diff") {
            return None;
        }
        Some(DiffContent {
            path: item.get("path").and_then(Value::as_str)?,
            old: item.get("oldText").and_then(Value::as_str),
            new: item.get("newText").and_then(Value::as_str)?,
        })
    }
}

/// The diff items among a tool call's content.
pub fn diffs_in(content: &[Value]) -> impl Iterator<Item = DiffContent<'_>> {
    content.iter().filter_map(DiffContent::from_item)
}

fn removed() -> Style {
    Style::new().fg(Color::Red)
}

fn added() -> Style {
    Style::new().fg(Color::Green)
}

fn hunk_style() -> Style {
    Style::new().fg(Color::Cyan)
}

/// `old` → `new` of the file at `path` as a unified diff, in rows of at most `width` columns
/// (long lines wrap; a continued row keeps its line's colour). `old` is `None` for a new file.
pub fn render_diff(path: &str, old: Option<&str>, new: &str, width: usize) -> Vec<Line<'static>> {
    let old_text = old.unwrap_or("");
    let mut logical = Vec::new();
    let sizes = old_text.lines().count() + new.lines().count();
    if sizes > MAX_DIFF_LINES {
        logical.push(header(path, old, None));
        logical.push(Line::styled(
            format!("  too large to compare here: {} lines → {} lines", old_text.lines().count(), new.lines().count()),
            Style::new().fg(Color::DarkGray),
        ));
        return wrap_all(logical, width);
    }
    let diff = TextDiff::from_lines(old_text, new);
    let (mut plus, mut minus) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => plus += 1,
            ChangeTag::Delete => minus += 1,
            ChangeTag::Equal => {}
        }
    }
    logical.push(header(path, old, Some((plus, minus))));
    if plus + minus == 0 {
        logical.push(Line::styled("  no changes", Style::new().fg(Color::DarkGray)));
    }
    for hunk in diff.unified_diff().context_radius(CONTEXT).iter_hunks() {
        logical.push(Line::styled(hunk.header().to_string(), hunk_style()));
        for change in hunk.iter_changes() {
            let (sign, style) = match change.tag() {
                ChangeTag::Delete => ("-", removed()),
                ChangeTag::Insert => ("+", added()),
                ChangeTag::Equal => (" ", Style::new()),
            };
            let text = change.value().trim_end_matches(['\n', '\r']);
            let mut spans = vec![Span::styled(sign, style), Span::styled(text.to_string(), style)];
            if change.missing_newline() {
                spans.push(Span::styled(" ⏎̸", Style::new().fg(Color::DarkGray)));
            }
            logical.push(Line::from(spans));
        }
    }
    wrap_all(logical, width)
}

/// The path, whether the file is new, and the count of lines added and removed.
fn header(path: &str, old: Option<&str>, counts: Option<(usize, usize)>) -> Line<'static> {
    let mut spans = vec![Span::styled(path.to_string(), Style::new().add_modifier(Modifier::BOLD))];
    if old.is_none() {
        spans.push(Span::styled(" (new file)", Style::new().fg(Color::DarkGray)));
    }
    if let Some((plus, minus)) = counts {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(format!("+{plus}"), added()));
        spans.push(Span::raw(" "));
        spans.push(Span::styled(format!("-{minus}"), removed()));
    }
    Line::from(spans)
}

fn wrap_all(lines: Vec<Line<'static>>, width: usize) -> Vec<Line<'static>> {
    lines.iter().flat_map(|line| wrap(line, width)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(Line::to_string).collect()
    }

    #[test]
    fn a_changed_line_is_removed_and_added_within_its_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let lines = render_diff("src/x.rs", Some(old), new, 80);
        assert_eq!(
            text(&lines),
            vec!["src/x.rs  +1 -1", "@@ -2,7 +2,7 @@", " b", " c", " d", "-e", "+E", " f", " g", " h"]
        );
        assert_eq!(lines[5].spans[0].style, removed());
        assert_eq!(lines[6].spans[0].style, added());
    }

    #[test]
    fn a_new_file_is_all_added_and_long_lines_wrap_in_colour() {
        let lines = render_diff("notes.md", None, "one two three four five six\n", 16);
        assert_eq!(
            text(&lines),
            vec!["notes.md (new", "file)  +1 -0", "@@ -0,0 +1 @@", "+one two three", "four five six"]
        );
        assert!(lines[4].spans.iter().all(|s| s.style == added()), "a continued row keeps the colour");
    }

    #[test]
    fn only_diff_items_with_a_path_and_new_text_are_diffs() {
        let content = vec![
            json!({"type": "content", "content": {"type": "text", "text": "x"}}),
            json!({"type": "diff", "path": "a.rs", "oldText": "x\n", "newText": "y\n"}),
            json!({"type": "diff", "path": "b.rs", "oldText": null, "newText": "new\n"}),
            json!({"type": "diff", "oldText": "x"}),
        ];
        let found: Vec<_> = diffs_in(&content).collect();
        assert_eq!(
            found,
            vec![
                DiffContent { path: "a.rs", old: Some("x\n"), new: "y\n" },
                DiffContent { path: "b.rs", old: None, new: "new\n" },
            ]
        );
    }

    #[test]
    fn a_huge_edit_is_summed_up_not_compared() {
        let old = "x\n".repeat(MAX_DIFF_LINES);
        let lines = render_diff("big.txt", Some(&old), "y\n", 200);
        assert_eq!(text(&lines), vec!["big.txt", "  too large to compare here: 20000 lines → 1 lines"]);
    }
}
