//! How a session's transcript is written out (`session.export`, `batond export`): the Markdown
//! of one folded entry, the header of a Markdown export and the file name. `paging` cuts an
//! export into pages over the store's reads (`store::export`).

use std::fmt::Write as _;
use std::path::Path;

use baton_protocol::{ExportFormat, Message, MessageKind, PermissionStatus, PlanEntry, PlanEntryStatus};
use serde_json::Value;

mod paging;

pub use paging::{export_page, export_page_from, ExportError, ExportPage};

/// Bytes `batond export` reads per page before writing them out.
const CLI_PAGE_BYTES: usize = 1024 * 1024;

/// `batond export`: writes the whole export of `session_id` to `out`, reading the database of
/// `data_dir` read-only page by page (a server may run on it or not).
pub fn write_export(
    data_dir: &Path,
    session_id: &str,
    format: ExportFormat,
    thoughts: bool,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    baton_protocol::validate_id("session_id", session_id).map_err(|e| anyhow::anyhow!(e.message))?;
    let database = data_dir.join("baton.db");
    let conn = crate::store::open_read_only(&database)?;
    let mut cursor: Option<String> = None;
    loop {
        // One read transaction per page: the server's writes go on meanwhile.
        let page = export_page(&conn, session_id, format, thoughts, cursor.as_deref(), CLI_PAGE_BYTES)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        out.write_all(page.content.as_bytes())?;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    out.flush()?;
    Ok(())
}

/// What the Markdown header says about the session.
pub struct ExportHeader<'a> {
    pub session_id: &'a str,
    pub task_id: &'a str,
    pub task_title: &'a str,
    pub agent: &'a str,
    pub workdir: &'a str,
    pub created_at: &'a str,
    pub state: &'a str,
}

/// The title and facts that open a Markdown export.
pub fn markdown_header(header: &ExportHeader<'_>) -> String {
    let title = one_line(header.task_title);
    let title = if title.is_empty() { "Untitled task".to_string() } else { title };
    let header = format!(
        "# {title}\n\n- Session: `{}`\n- Task: `{}`\n- Agent: {}\n- Working directory: `{}`\n- Started: {}\n- State: {}\n\n---\n\n",
        header.session_id,
        header.task_id,
        one_line(header.agent),
        header.workdir,
        header.created_at,
        header.state,
    );
    baton_protocol::strip_terminal_controls(&header)
}

/// A file name for the export of `session_id` of the task titled `title` (the rule is the
/// protocol crate's, which clients share).
pub fn file_name(title: &str, session_id: &str, format: ExportFormat) -> String {
    format.file_name(title, session_id)
}

/// The Markdown of one folded entry (empty for a thought unless `thoughts`), ending in a blank
/// line.
pub fn markdown_entry(message: &Message, thoughts: bool) -> String {
    let mut out = String::new();
    let at = &message.created_at;
    match message.kind {
        // What was said is quoted, the agent's and the user's alike: a line of it cannot start
        // a heading of the transcript (a forged `## User`), and a fence left open ends with the
        // quote.
        MessageKind::User => {
            let _ = write!(out, "## User · {at}\n\n");
            quoted(&mut out, &message.text);
        }
        MessageKind::Agent => {
            let _ = write!(out, "## Agent · {at}\n\n");
            quoted(&mut out, &message.text);
        }
        MessageKind::Thought if thoughts => {
            let _ = write!(out, "### Thought · {at}\n\n");
            quoted(&mut out, &message.text);
        }
        MessageKind::Thought => {}
        MessageKind::ToolCall => tool_call(&mut out, message),
        MessageKind::Plan => {
            let _ = write!(out, "### Plan · {at}\n\n");
            // A stored plan that does not decode is exported as an empty plan, not an error.
            let entries: Vec<PlanEntry> = data_field(message, "entries")
                .and_then(|entries| serde_json::from_value(entries.clone()).ok())
                .unwrap_or_default();
            for entry in entries {
                let mark = match entry.status {
                    PlanEntryStatus::Completed => "[x]",
                    PlanEntryStatus::InProgress => "[~]",
                    _ => "[ ]",
                };
                let _ = writeln!(out, "- {mark} {}", one_line(&entry.content));
            }
            out.push('\n');
        }
        MessageKind::Permission => permission(&mut out, message),
        MessageKind::Status => {
            let _ = write!(out, "*{}* · {at}\n\n", one_line(&message.text));
        }
        MessageKind::Error => {
            let _ = write!(out, "**Error:** {} · {at}\n\n", one_line(&message.text));
        }
    }
    // What agents wrote may hold terminal escapes (a clipboard write, a title, a cleared
    // screen, a hidden link): a transcript is read with `cat` and `less` too.
    baton_protocol::strip_terminal_controls(&out)
}

/// `text` as a Markdown block quote, every line of it (blank ones too, so that the quote is one).
fn quoted(out: &mut String, text: &str) {
    for line in text.trim_end().lines() {
        match line.is_empty() {
            true => out.push_str(">\n"),
            false => {
                let _ = writeln!(out, "> {line}");
            }
        }
    }
    out.push('\n');
}

fn data_field<'a>(message: &'a Message, field: &str) -> Option<&'a Value> {
    message.data.as_ref().and_then(|d| d.get(field)).filter(|v| !v.is_null())
}

fn tool_call(out: &mut String, message: &Message) {
    let kind = data_field(message, "tool_kind").and_then(Value::as_str);
    let status = message.status.as_deref().unwrap_or("pending");
    let _ = write!(out, "### Tool call: {}", one_line(&message.text));
    if let Some(kind) = kind {
        let _ = write!(out, " ({kind})");
    }
    let _ = write!(out, " · {status} · {}\n\n", message.created_at);
    if let Some(input) = data_field(message, "raw_input") {
        out.push_str("Input:\n\n");
        fenced(out, "json", &pretty(input));
    }
    for item in data_field(message, "content").and_then(Value::as_array).into_iter().flatten() {
        match item.get("type").and_then(Value::as_str) {
            Some("diff") => {
                let path = item.get("path").and_then(Value::as_str).unwrap_or("file");
                let old = item.get("oldText").and_then(Value::as_str).unwrap_or_default();
                let new = item.get("newText").and_then(Value::as_str).unwrap_or_default();
                let _ = write!(out, "Diff of `{path}`:\n\n");
                let diff = similar::TextDiff::from_lines(old, new)
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{path}"), &format!("b/{path}"))
                    .to_string();
                fenced(out, "diff", &diff);
            }
            Some("content") => match item.get("content") {
                Some(block) if block.get("type").and_then(Value::as_str) == Some("text") => {
                    let text = block.get("text").and_then(Value::as_str).unwrap_or_default();
                    out.push_str("Result:\n\n");
                    fenced(out, "", text);
                }
                Some(block) => {
                    out.push_str("Result:\n\n");
                    fenced(out, "json", &pretty(block));
                }
                None => {}
            },
            Some("terminal") => {
                let id = item.get("terminalId").and_then(Value::as_str).unwrap_or("?");
                let _ = write!(out, "Terminal `{id}`\n\n");
            }
            _ => {
                out.push_str("Content:\n\n");
                fenced(out, "json", &pretty(item));
            }
        }
    }
    if let Some(output) = data_field(message, "raw_output") {
        out.push_str("Output:\n\n");
        fenced(out, "json", &pretty(output));
    }
}

fn permission(out: &mut String, message: &Message) {
    let _ = write!(out, "### Permission: {} · {}\n\n", one_line(&message.text), message.created_at);
    let options = data_field(message, "options").and_then(Value::as_array).cloned().unwrap_or_default();
    let option_name = |id: &str| {
        options
            .iter()
            .find(|o| o.get("option_id").and_then(Value::as_str) == Some(id))
            .map(|o| {
                let name = o.get("name").and_then(Value::as_str).unwrap_or(id);
                let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
                format!("{} (`{id}`, {kind})", one_line(name))
            })
            .unwrap_or_else(|| format!("`{id}`"))
    };
    if !options.is_empty() {
        let offered: Vec<String> =
            options.iter().filter_map(|o| o.get("option_id").and_then(Value::as_str)).map(option_name).collect();
        let _ = write!(out, "Options: {}\n\n", offered.join(", "));
    }
    match PermissionStatus::parse(message.status.as_deref()) {
        Some(PermissionStatus::Selected(option)) => {
            let _ = write!(out, "Decision: {} · {}\n\n", option_name(&option), message.updated_at);
        }
        Some(PermissionStatus::Cancelled) => {
            let _ = write!(out, "Decision: none, the request went away unanswered · {}\n\n", message.updated_at);
        }
        Some(PermissionStatus::Pending) | None => out.push_str("Decision: pending\n\n"),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Text on one line (newlines become spaces).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A fenced code block around `body`, its fence one backtick longer than any run of backticks
/// in the body so that nothing inside can close it.
fn fenced(out: &mut String, language: &str, body: &str) {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = body.strip_suffix('\n').unwrap_or(body);
    let _ = write!(out, "{fence}{language}\n{body}\n{fence}\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(kind: MessageKind, text: &str) -> Message {
        Message {
            seq: 1,
            kind,
            text: text.into(),
            message_id: None,
            tool_call_id: None,
            status: None,
            data: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:05Z".into(),
        }
    }

    #[test]
    fn a_fence_is_longer_than_any_backticks_inside() {
        let mut out = String::new();
        fenced(&mut out, "", "a ```` b");
        assert!(out.starts_with("`````\n"), "{out}");
        assert!(out.ends_with("\n`````\n\n"), "{out}");
    }

    #[test]
    fn an_edit_becomes_a_diff_block_and_a_decision_names_the_option() {
        let mut call = entry(MessageKind::ToolCall, "Edit src/lib.rs");
        call.status = Some("completed".into());
        call.data = Some(json!({"tool_kind": "edit", "raw_input": {"path": "src/lib.rs"}, "content": [
            {"type": "diff", "path": "src/lib.rs", "oldText": "a\nb\n", "newText": "a\nc\n"}
        ]}));
        let text = markdown_entry(&call, false);
        assert!(text.contains("### Tool call: Edit src/lib.rs (edit) · completed"), "{text}");
        assert!(
            text.contains("```diff\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n```"),
            "{text}"
        );
        assert!(text.contains("\"path\": \"src/lib.rs\""), "{text}");

        let mut asked = entry(MessageKind::Permission, "Write file");
        asked.status = Some("selected:allow".into());
        asked.data = Some(json!({"options": [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]}));
        let text = markdown_entry(&asked, false);
        assert!(text.contains("Decision: Allow (`allow`, allow_once) · 2026-01-01T00:00:05Z"), "{text}");
    }

    #[test]
    fn thoughts_are_left_out_unless_asked_for() {
        let thought = entry(MessageKind::Thought, "hmm\nyes");
        assert_eq!(markdown_entry(&thought, false), "");
        assert!(markdown_entry(&thought, true).contains("> hmm\n> yes\n"));
    }

    #[test]
    fn a_file_name_is_safe_whatever_the_title() {
        assert_eq!(file_name("Fix ../the Bug!", "sess-1", ExportFormat::Markdown), "fix-the-bug-sess-1.md");
        assert_eq!(file_name("///", "sess-1", ExportFormat::Jsonl), "sess-1.jsonl");
    }
}
