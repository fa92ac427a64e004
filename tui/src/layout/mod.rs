//! The opened transcript as styled lines and rows: what each entry looks like (Markdown,
//! tool calls, plan, permission requests), wrapped to the pane's width, and the row counts
//! kept between frames. Pure functions of a [`Transcript`] and [`LayoutOptions`]: the app owns
//! the [`TranscriptLayout`] (and scrolls by it), the `ui` module draws what it returns.

pub mod diff;
pub mod markdown;
mod tool_call;
pub mod wrap;

use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::{Line, Span};

use baton_protocol::{PermissionStatus, PlanEntry, PlanEntryStatus, ToolCallStatus};

use crate::transcript::{Entry, EntryBody, Permission, ToolCall, Transcript};
use unicode_width::UnicodeWidthStr;
use wrap::{row_count_hanging, wrap, wrap_hanging};

/// What an entry's rows depend on besides the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LayoutOptions {
    pub width: usize,
    pub show_thoughts: bool,
    /// Changes when a tool call is expanded or collapsed.
    pub expand_generation: u64,
}

/// Where an entry is in the rows shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySpan {
    pub seq: u64,
    pub rows: std::ops::Range<usize>,
}

/// How many rows an entry took when laid out at a revision.
#[derive(Debug, Clone, Copy)]
struct EntryRows {
    seq: u64,
    rev: u64,
    rows: u32,
    /// A user message, which a blank row separates from what is above it.
    user: bool,
}

impl EntryRows {
    fn of(entry: &Entry, options: LayoutOptions, expanded: &dyn Fn(u64) -> bool) -> EntryRows {
        EntryRows {
            seq: entry.seq,
            rev: entry.rev(),
            rows: entry_rows(&entry.body, options, expanded(entry.seq)) as u32,
            user: matches!(entry.body, EntryBody::User(_)),
        }
    }

    /// Rows with the separator above a user message.
    fn total(&self) -> usize {
        self.rows as usize + usize::from(self.user)
    }
}

/// The opened transcript's rows per entry, kept between frames, so that a frame wraps only
/// the entries it shows and those added or changed since the last one: a transcript of
/// 100,000 messages costs a pass over this list, not a layout of every message.
#[derive(Debug, Default)]
pub struct TranscriptLayout {
    session_id: String,
    /// The transcript revision the list matches.
    rev: u64,
    options: LayoutOptions,
    entries: Vec<EntryRows>,
    /// Rows of all entries, separators included (as if a header is above the first).
    rows: usize,
    /// Entries laid out by the last update (the others were reused).
    laid_out: usize,
}

impl TranscriptLayout {
    /// Brings the row counts up to date with `transcript`: entries whose revision changed, new
    /// ones, and those whose look depends on an option that changed are laid out again.
    /// `expanded` says which tool calls (by seq) are shown with their input and output.
    pub fn update(
        &mut self,
        session_id: &str,
        transcript: &Transcript,
        options: LayoutOptions,
        expanded: &dyn Fn(u64) -> bool,
    ) {
        let same_session = self.session_id == session_id;
        if same_session && self.rev == transcript.revision() && self.options == options {
            return;
        }
        if same_session && self.options == options && self.catch_up(transcript, expanded) {
            return;
        }
        let reusable = same_session && self.options.width == options.width;
        let old = std::mem::take(&mut self.entries);
        // Entries are in seq order in both lists; ones put in front or behind move the match.
        let mut at = 0;
        let mut rows = 0;
        let mut fresh = Vec::with_capacity(transcript.entries().len());
        let mut laid_out = 0;
        for entry in transcript.entries() {
            while at < old.len() && old[at].seq < entry.seq {
                at += 1;
            }
            let kept = old.get(at).filter(|cached| {
                reusable
                    && cached.seq == entry.seq
                    && cached.rev == entry.rev()
                    && !depends_on_changed_option(&entry.body, self.options, options)
            });
            let counted = match kept {
                Some(cached) => *cached,
                None => {
                    laid_out += 1;
                    EntryRows::of(entry, options, expanded)
                }
            };
            rows += counted.total();
            fresh.push(counted);
        }
        if laid_out > 1000 {
            tracing::debug!(session = %session_id, laid_out, "transcript laid out");
        }
        *self = TranscriptLayout {
            session_id: session_id.to_string(),
            rev: transcript.revision(),
            options,
            entries: fresh,
            rows,
            laid_out,
        };
    }

    /// Lays out only the entries changed or added since the revision laid out, when the
    /// transcript knows them all (the usual case: an answer streaming in). False when it does
    /// not, and every entry must be compared.
    fn catch_up(&mut self, transcript: &Transcript, expanded: &dyn Fn(u64) -> bool) -> bool {
        let Some(changes) = transcript.changes_since(self.rev) else {
            return false;
        };
        let entries = transcript.entries();
        let mut laid_out = 0;
        for index in changes {
            let Some(entry) = entries.get(index) else {
                return false;
            };
            if let Some(cached) = self.entries.get(index) {
                if cached.seq != entry.seq {
                    return false;
                }
                if cached.rev != entry.rev() {
                    let counted = EntryRows::of(entry, self.options, expanded);
                    self.rows = self.rows - cached.total() + counted.total();
                    self.entries[index] = counted;
                    laid_out += 1;
                }
                continue;
            }
            while self.entries.len() <= index {
                let counted = EntryRows::of(&entries[self.entries.len()], self.options, expanded);
                self.rows += counted.total();
                self.entries.push(counted);
                laid_out += 1;
            }
        }
        if self.entries.len() != entries.len() {
            return false;
        }
        self.rev = transcript.revision();
        self.laid_out = laid_out;
        true
    }

    /// All rows, with `header_rows` above the entries. The first entry has no separator when
    /// nothing is above it.
    pub fn total_rows(&self, header_rows: usize) -> usize {
        let first_user = self.entries.first().is_some_and(|e| e.user);
        self.rows + header_rows - usize::from(first_user && header_rows == 0)
    }

    /// The offset nearest `scroll` that shows the entry at `seq` whole, or its top when it is
    /// taller than the view; with `pin_row`, starting from the offset that puts its first row
    /// on that row of the view (an entry expanded or folded stays where it was).
    pub fn revealing(&self, seq: u64, scroll: usize, height: usize, pin_row: Option<usize>) -> usize {
        let Some(index) = self.entries.iter().position(|entry| entry.seq == seq) else {
            return scroll;
        };
        let below: usize = self.entries[index + 1..].iter().map(EntryRows::total).sum();
        let rows = self.entries[index].rows as usize;
        let scroll = match pin_row {
            // Row `r` from the top is `scroll + height - 1 - r` rows above the bottom.
            Some(row) => (below + rows + row.min(height)).saturating_sub(height),
            None => scroll,
        };
        if scroll > below {
            // Below the view: its last row at the bottom (or its top at the top, if taller).
            below + rows.saturating_sub(height)
        } else if scroll + height < below + rows {
            // Above the view, or cut at its top: its first row at the top.
            (below + rows).saturating_sub(height)
        } else {
            scroll
        }
    }

    /// The `height` rows that end `scroll` rows above the bottom, with where each entry in
    /// them is: only the entries that reach into them are laid out.
    pub fn visible_rows(
        &self,
        transcript: &Transcript,
        header: Vec<Line<'static>>,
        scroll: usize,
        height: usize,
        expanded: &dyn Fn(u64) -> bool,
    ) -> (Vec<Line<'static>>, Vec<EntrySpan>) {
        let rows_of = |index: usize| {
            let entry = &self.entries[index];
            let separator = entry.user && (index > 0 || !header.is_empty());
            entry.rows as usize + usize::from(separator)
        };
        // From the bottom up: first the entries wholly below the view, then those in it.
        let mut end = self.entries.len();
        let mut below = 0;
        while end > 0 && below + rows_of(end - 1) <= scroll {
            end -= 1;
            below += rows_of(end);
        }
        let cut_below = scroll - below;
        let mut first = end;
        let mut reached = 0;
        while first > 0 && reached < cut_below + height {
            first -= 1;
            reached += rows_of(first);
        }
        let mut rows: Vec<Line<'static>> = Vec::new();
        if first == 0 && reached < cut_below + height {
            rows.extend(header.iter().cloned());
        }
        let with_header = !header.is_empty();
        let mut spans = Vec::new();
        for (index, entry) in transcript.entries().iter().enumerate().take(end).skip(first) {
            if matches!(entry.body, EntryBody::User(_)) && (index > 0 || with_header) {
                rows.push(Line::default());
            }
            let from = rows.len();
            for (line, hang) in entry_lines(&entry.body, self.options, expanded(entry.seq)) {
                rows.extend(wrap_hanging(&line, &hang, self.options.width));
            }
            spans.push(EntrySpan { seq: entry.seq, rows: from..rows.len() });
        }
        let end = rows.len().saturating_sub(cut_below);
        let start = end.saturating_sub(height);
        rows.truncate(end);
        rows.drain(..start);
        // Row numbers on screen; entries with no row there are not shown.
        let spans = spans
            .into_iter()
            .map(|span| EntrySpan {
                seq: span.seq,
                rows: span.rows.start.max(start) - start..span.rows.end.min(end).max(start) - start,
            })
            .filter(|span| !span.rows.is_empty())
            .collect();
        (rows, spans)
    }
}

/// Whether the options that changed alter how this entry looks.
fn depends_on_changed_option(body: &EntryBody, old: LayoutOptions, new: LayoutOptions) -> bool {
    match body {
        EntryBody::Thought { .. } => old.show_thoughts != new.show_thoughts,
        EntryBody::ToolCall(_) => old.expand_generation != new.expand_generation,
        _ => false,
    }
}

fn entry_rows(body: &EntryBody, options: LayoutOptions, expanded: bool) -> usize {
    entry_lines(body, options, expanded).iter().map(|(line, hang)| row_count_hanging(line, hang, options.width)).sum()
}

/// The line above the entries when older messages exist, wrapped.
pub fn header_lines(transcript: &Transcript, loading_older: bool, width: usize) -> Vec<Line<'static>> {
    let line = if loading_older {
        Line::from("… loading older messages".dark_gray())
    } else if transcript.older_omitted() {
        Line::from("… older messages: PgUp at the top or Home loads them".dark_gray())
    } else {
        return Vec::new();
    };
    wrap(&line, width)
}

/// A logical line and what its wrapped rows start with (empty: nothing, the text wraps to the
/// pane's edge).
type HungLine = (Line<'static>, Vec<Span<'static>>);

/// One entry as logical lines, before wrapping.
fn entry_lines(body: &EntryBody, options: LayoutOptions, expanded: bool) -> Vec<HungLine> {
    let mut out = Vec::new();
    match body {
        EntryBody::User(text) => return labelled("you: ", Style::new().cyan().bold(), text, Style::new()),
        EntryBody::Agent { text, .. } => {
            let label = Span::styled("agent: ", Style::new().green().bold());
            return indented(label, markdown::hung_lines(text, Style::new()));
        }
        EntryBody::Thought { text, .. } if options.show_thoughts => {
            let dim = Style::new().dark_gray().add_modifier(Modifier::ITALIC);
            return indented(Span::styled("thinking: ", dim), markdown::hung_lines(text, dim));
        }
        EntryBody::Thought { text, .. } => {
            let words = text.split_whitespace().count();
            let plural = if words == 1 { "" } else { "s" };
            out.push(Line::from(format!("▸ thought ({words} word{plural})").dark_gray()));
        }
        EntryBody::ToolCall(call) => {
            out.push(tool_line(call, expanded));
            if expanded {
                // Input, output and the whole diff.
                out.extend(tool_call::details(call, options.width));
            } else {
                diff_lines(&mut out, call, options.width);
                terminal_lines(&mut out, call, TERMINAL_ROWS_SHOWN);
            }
        }
        EntryBody::Plan(entries) => plan_lines(&mut out, entries),
        EntryBody::Status(text) => return labelled("• ", Style::new().blue(), text, Style::new().blue()),
        EntryBody::Error(text) => {
            let red = Style::new().red();
            return labelled("✗ error: ", red.bold(), text, red);
        }
        EntryBody::Permission(permission) => return permission_lines(permission, options.width),
    }
    out.into_iter().map(|line| (line, Vec::new())).collect()
}

/// `label` in front of the first line; the following lines are indented. The rows of a list
/// item or a quote that wraps start under its text (or its bar), not at the pane's edge.
fn indented(label: Span<'static>, lines: Vec<HungLine>) -> Vec<HungLine> {
    const INDENT: &str = "  ";
    let mut out = Vec::new();
    for (i, (line, hang)) in lines.into_iter().enumerate() {
        let lead = if i == 0 { label.clone() } else { Span::raw(INDENT) };
        let mut spans = vec![lead];
        spans.extend(line.spans);
        let hang = if hang.is_empty() { hang } else { [vec![Span::raw(INDENT)], hang].concat() };
        out.push((Line::from(spans), hang));
    }
    out
}

/// A label on the first line of `text`; the following lines are indented, and every wrapped
/// row too (under the text, not at the pane's edge).
fn labelled(label: &str, label_style: Style, text: &str, style: Style) -> Vec<HungLine> {
    let mut out = Vec::new();
    for (i, line) in text.trim_end_matches('\n').split('\n').enumerate() {
        let lead = if i == 0 { Span::styled(label.to_string(), label_style) } else { Span::raw("  ") };
        out.push((Line::from(vec![lead, Span::styled(line.to_string(), style)]), vec![Span::raw("  ")]));
    }
    out
}

fn tool_line(call: &ToolCall, expanded: bool) -> Line<'static> {
    let status = call.status.as_ref().unwrap_or(&ToolCallStatus::Pending);
    let status_style = match status {
        ToolCallStatus::Completed => Style::new().green(),
        ToolCallStatus::Failed => Style::new().red(),
        _ => Style::new().yellow(),
    };
    let mark = if expanded { "▾ " } else { "▸ " };
    let mut spans = vec![Span::styled(mark, Style::new().magenta())];
    if let Some(kind) = &call.kind {
        spans.push(Span::styled(format!("{kind} "), Style::new().dark_gray()));
    }
    spans.push(Span::raw(call.title.clone()));
    spans.push(Span::styled(format!("  [{status}]"), status_style));
    Line::from(spans)
}

/// The last rows of a terminal's output shown under it while folded; `Enter` shows them all.
const TERMINAL_ROWS_SHOWN: usize = 8;

/// A terminal's output (its last `rows` lines, escapes removed) and how it exited, indented
/// under its line.
pub(crate) fn terminal_lines(out: &mut Vec<Line<'static>>, call: &ToolCall, rows: usize) {
    const INDENT: &str = "  ";
    let Some((output, exit)) = call.terminal() else { return };
    let text = baton_protocol::strip_terminal_controls(output);
    let lines: Vec<&str> = text.lines().collect();
    let hidden = lines.len().saturating_sub(rows);
    if hidden > 0 {
        out.push(Line::from(format!("{INDENT}… {hidden} earlier lines (Enter shows them)").dark_gray()));
    }
    for line in lines.into_iter().skip(hidden) {
        out.push(Line::from(vec![Span::raw(INDENT), Span::styled(line.to_string(), Style::new().dark_gray())]));
    }
    if let Some(exit) = exit {
        let said = match (
            exit.get("exit_code").and_then(serde_json::Value::as_i64),
            exit.get("signal").and_then(serde_json::Value::as_str),
        ) {
            (_, Some(signal)) => format!("killed ({signal})"),
            (Some(code), None) => format!("exit {code}"),
            (None, None) => "exited".to_string(),
        };
        let style = if said == "exit 0" { Style::new().green() } else { Style::new().red() };
        out.push(Line::from(vec![Span::raw(INDENT), Span::styled(said, style)]));
    }
}

/// Rows of a tool call's diffs shown under it in the transcript; the rest is counted.
const DIFF_ROWS_SHOWN: usize = 40;

/// The edits a tool call reports, as unified diffs indented under its line.
fn diff_lines(out: &mut Vec<Line<'static>>, call: &ToolCall, width: usize) {
    const INDENT: &str = "  ";
    let inner = width.saturating_sub(INDENT.len()).max(1);
    let mut rows = Vec::new();
    for edit in diff::diffs_in(call.content()) {
        rows.extend(diff::render_diff(edit.path, edit.old, edit.new, inner));
    }
    let hidden = rows.len().saturating_sub(DIFF_ROWS_SHOWN);
    for row in rows.into_iter().take(DIFF_ROWS_SHOWN) {
        let mut spans = vec![Span::raw(INDENT)];
        spans.extend(row.spans);
        out.push(Line::from(spans));
    }
    if hidden > 0 {
        out.push(Line::from(format!("{INDENT}… {hidden} more diff rows").dark_gray()));
    }
}

fn plan_lines(out: &mut Vec<Line<'static>>, entries: &[PlanEntry]) {
    out.push(Line::from("Plan".yellow().bold()));
    for entry in entries {
        let (mark, style) = match entry.status {
            PlanEntryStatus::Completed => ("✓", Style::new().green()),
            PlanEntryStatus::InProgress => ("◐", Style::new().yellow()),
            _ => ("○", Style::new().dark_gray()),
        };
        out.push(Line::from(vec![Span::styled(format!("  {mark} "), style), Span::raw(entry.content.clone())]));
    }
}

fn permission_lines(permission: &Permission, width: usize) -> Vec<HungLine> {
    let magenta = Style::new().magenta().bold();
    let hang = || vec![Span::raw("    ")];
    let mut out =
        vec![(Line::from(vec![Span::styled("? permission: ", magenta), Span::raw(permission.title.clone())]), hang())];
    // The options, packed on rows without cutting a label: a row starts a new option, indented.
    let mut row: Vec<Span<'static>> = vec![Span::raw("  ")];
    let mut row_width = 2;
    for (i, option) in permission.options.iter().enumerate() {
        let number = format!("  [{}] ", i + 1);
        let label_width = number.width() + option.name.width();
        if row.len() > 1 && row_width + label_width > width {
            out.push((Line::from(std::mem::replace(&mut row, vec![Span::raw("  ")])), hang()));
            row_width = 2;
        }
        row_width += label_width;
        row.extend([Span::styled(number, Style::new().bold()), Span::raw(option.name.clone())]);
    }
    out.push((Line::from(row), hang()));
    let answer = match &permission.answer {
        // The dialog under the transcript says which keys answer it.
        PermissionStatus::Pending => Line::from("    → waiting for your answer".magenta()),
        PermissionStatus::Selected(option_id) => {
            let name = permission
                .options
                .iter()
                .find(|o| &o.option_id == option_id)
                .map_or(option_id.as_str(), |o| o.name.as_str());
            Line::from(format!("    → {name}").dark_gray())
        }
        PermissionStatus::Cancelled => Line::from("    → not answered".dark_gray()),
    };
    out.push((answer, hang()));
    out
}

#[cfg(test)]
mod tests {
    use baton_protocol::{EventRecord, Message, MessageKind, SessionEvent};

    use super::*;

    fn record(seq: u64, event: SessionEvent) -> EventRecord {
        EventRecord { session_id: "s".into(), seq, event, created_at: String::new() }
    }

    fn message(seq: u64, kind: MessageKind, text: &str) -> Message {
        Message {
            seq,
            kind,
            text: text.into(),
            message_id: None,
            tool_call_id: None,
            status: None,
            data: None,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    /// Messages `from..to`: users, agents with Markdown, thoughts, in turn.
    fn messages(from: u64, to: u64) -> Vec<Message> {
        (from..to)
            .map(|seq| match seq % 3 {
                0 => message(seq, MessageKind::User, &format!("question {seq} about the redirect handler")),
                1 => message(seq, MessageKind::Agent, &format!("answer **{seq}**:\n```\nlet x = {seq};\n```\ndone")),
                _ => message(seq, MessageKind::Thought, &format!("thinking about {seq} for a while")),
            })
            .collect()
    }

    fn text(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter().map(Line::to_string).collect()
    }

    /// What a layout built from nothing shows: the reference for a layout kept across changes.
    fn fresh(transcript: &Transcript, options: LayoutOptions, scroll: usize, height: usize) -> Vec<String> {
        let mut layout = TranscriptLayout::default();
        layout.update("s", transcript, options, &|_| false);
        let header = header_lines(transcript, false, options.width);
        text(&layout.visible_rows(transcript, header, scroll, height, &|_| false).0)
    }

    #[test]
    fn a_kept_layout_shows_what_a_fresh_one_shows_through_every_kind_of_change() {
        let mut transcript = Transcript::from_backlog(messages(500, 800), true);
        let mut options = LayoutOptions { width: 40, show_thoughts: true, expand_generation: 0 };
        let mut layout = TranscriptLayout::default();
        let mut check = |transcript: &Transcript, options: LayoutOptions, what: &str| {
            layout.update("s", transcript, options, &|_| false);
            let header = header_lines(transcript, false, options.width);
            for scroll in [0, 7, 333] {
                let kept = text(&layout.visible_rows(transcript, header.clone(), scroll, 20, &|_| false).0);
                assert_eq!(kept, fresh(transcript, options, scroll, 20), "{what}, scrolled {scroll}");
            }
            let total = layout.total_rows(header.len());
            let all = fresh(transcript, options, 0, usize::MAX / 2);
            assert_eq!(total, all.len(), "{what}: the row count");
        };
        check(&transcript, options, "loaded");
        // Streamed text grows the newest entry; a new entry below.
        let last = transcript.last_seq();
        transcript.apply(&record(last + 1, SessionEvent::MessageChunk { message_id: None, text: " more".into() }));
        transcript.apply(&record(last + 2, SessionEvent::MessageChunk { message_id: None, text: " words".into() }));
        check(&transcript, options, "streamed");
        transcript.apply(&record(last + 3, SessionEvent::UserMessage { text: "next".into(), turn_id: None }));
        check(&transcript, options, "appended");
        // An older page put in front.
        transcript.prepend_older(messages(200, 500), false);
        check(&transcript, options, "prepended");
        options.show_thoughts = false;
        check(&transcript, options, "thoughts folded");
        options.width = 23;
        check(&transcript, options, "narrower");
    }

    #[test]
    fn a_frame_lays_out_only_what_changed_and_what_it_shows() {
        let mut transcript = Transcript::from_backlog(messages(1, 20_000), false);
        let options = LayoutOptions { width: 60, show_thoughts: true, expand_generation: 0 };
        let mut layout = TranscriptLayout::default();
        let last = transcript.last_seq();
        let chunk = |seq: u64| record(seq, SessionEvent::MessageChunk { message_id: None, text: "more ".into() });
        transcript.apply(&chunk(last + 1));
        layout.update("s", &transcript, options, &|_| false);
        assert_eq!(layout.laid_out, transcript.entries().len(), "the first frame lays out everything");
        transcript.apply(&chunk(last + 2));
        layout.update("s", &transcript, options, &|_| false);
        assert_eq!(layout.laid_out, 1, "only the streamed entry is laid out again");
        transcript.apply(&record(last + 3, SessionEvent::UserMessage { text: "next".into(), turn_id: None }));
        layout.update("s", &transcript, options, &|_| false);
        assert_eq!(layout.laid_out, 1, "only the new entry is laid out");
        let folded = LayoutOptions { show_thoughts: false, ..options };
        layout.update("s", &transcript, folded, &|_| false);
        let thoughts = transcript.entries().iter().filter(|e| matches!(e.body, EntryBody::Thought { .. })).count();
        assert_eq!(layout.laid_out, thoughts, "folding thoughts lays out only thoughts");
        // Unchanged: nothing at all is redone.
        let rev = layout.rev;
        layout.update("s", &transcript, options, &|_| false);
        assert_eq!(layout.rev, rev);
    }
}
