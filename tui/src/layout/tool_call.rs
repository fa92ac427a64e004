//! An expanded tool call: what it was given (ACP `rawInput`), what it produced (its content:
//! text, diffs, terminals) and what it returned (`rawOutput`), under its one-line summary.

use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::transcript::ToolCall;

/// Lines shown of one part at most: a tool that printed a whole log stays readable, and the
/// rest is one line that says how much was left out.
const MAX_LINES: usize = 1000;

const INDENT: &str = "    ";

/// The lines under an expanded call's summary.
pub fn details(call: &ToolCall, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let label = |text: &str| Line::from(Span::styled(format!("  {text}"), Style::new().dark_gray().bold()));
    if let Some(input) = call.raw_input() {
        out.push(label("input:"));
        section(&mut out, value_lines(input), Style::new());
    }
    if !call.content().is_empty() {
        out.push(label("output:"));
        let mut lines = Vec::new();
        for item in call.content() {
            content_lines(&mut lines, item, width.saturating_sub(INDENT.len()).max(1));
        }
        capped(&mut out, lines);
    }
    if call.terminal().is_some() {
        out.push(label("terminal:"));
        super::terminal_lines(&mut out, call, MAX_LINES);
    }
    if let Some(output) = call.raw_output() {
        out.push(label("raw output:"));
        section(&mut out, value_lines(output), Style::new());
    }
    if out.is_empty() {
        out.push(Line::from(format!("{INDENT}(the agent sent no input or output for this call)").dark_gray()));
    }
    out
}

fn section(out: &mut Vec<Line<'static>>, lines: Vec<String>, style: Style) {
    capped(out, lines.into_iter().map(|line| Line::styled(line, style)).collect());
}

/// The lines, indented, up to [`MAX_LINES`].
fn capped(out: &mut Vec<Line<'static>>, lines: Vec<Line<'static>>) {
    let total = lines.len();
    for line in lines.into_iter().take(MAX_LINES) {
        let mut spans = vec![Span::raw(INDENT)];
        spans.extend(line.spans);
        out.push(Line::from(spans).style(line.style));
    }
    if total > MAX_LINES {
        out.push(Line::from(format!("{INDENT}… {} more lines", total - MAX_LINES).dark_gray()));
    }
}

/// A JSON value as a person reads it: a string as its text, an object as `key: value` lines
/// (string values unquoted), anything else as indented JSON.
fn value_lines(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) => text.lines().map(str::to_string).collect(),
        Value::Object(fields) if fields.values().all(|v| !v.is_object() && !v.is_array()) => fields
            .iter()
            .flat_map(|(key, value)| {
                let text = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut lines = text.lines().map(str::to_string).collect::<Vec<_>>();
                match lines.first_mut() {
                    Some(first) => *first = format!("{key}: {first}"),
                    None => lines.push(format!("{key}:")),
                }
                lines
            })
            .collect(),
        other => serde_json::to_string_pretty(other).unwrap_or_default().lines().map(str::to_string).collect(),
    }
}

/// One ACP tool call content item; a diff is drawn `width` columns wide.
fn content_lines(out: &mut Vec<Line<'static>>, item: &Value, width: usize) {
    if let Some(edit) = super::diff::DiffContent::from_item(item) {
        out.extend(super::diff::render_diff(edit.path, edit.old, edit.new, width));
        return;
    }
    match item.get("type").and_then(Value::as_str) {
        Some("content") => match item.get("content") {
            Some(block) if block.get("type").and_then(Value::as_str) == Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or_default();
                out.extend(text.lines().map(|line| Line::from(line.to_string())));
            }
            Some(other) => out.push(Line::from(other.to_string().dark_gray())),
            None => {}
        },
        Some("terminal") => {
            let id = item.get("terminalId").and_then(Value::as_str).unwrap_or("?");
            out.push(Line::from(format!("(terminal {id}: its output is in the agent's terminal)").dark_gray()));
        }
        _ => out.push(Line::from(item.to_string().dark_gray())),
    }
}
