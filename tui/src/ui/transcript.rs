//! The transcript pane: the opened session's messages, thoughts, tool calls, plan, status
//! lines and permission requests, newest at the bottom.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use baton_protocol::PlanEntry;

use super::wrap::wrap_all;
use super::{state_label, state_style};
use crate::app::{App, Focus, FrameMetrics, ScrollAnchor, TranscriptSlot};
use crate::sessions::is_working;
use crate::transcript::{EntryBody, Permission, PermissionAnswer, ToolCall, Transcript};

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) -> FrameMetrics {
    let mut block = Block::bordered().title(title(app)).border_style(Style::new().dark_gray());
    // The server's word on whether a turn runs: the state, and an agent attached to run it.
    let running = app.opened.as_deref().and_then(|id| app.sessions.get(id)).is_some_and(|row| is_working(&row.status));
    if running {
        block = block.title_bottom(Line::from(" working… ".yellow()));
    }
    let inner = block.inner(area);
    let height = inner.height as usize;
    let empty = FrameMetrics { transcript_height: height, ..FrameMetrics::default() };

    let slot = app.opened.as_deref().and_then(|id| app.transcripts.get(id));
    let (session_id, transcript) = match (app.opened.as_deref(), slot) {
        (None, _) => {
            frame.render_widget(block, area);
            let hint = "Select a session with ↑/↓ (j/k) and press Enter to open it.";
            let paragraph = Paragraph::new(hint.dark_gray()).wrap(Wrap { trim: true });
            frame.render_widget(paragraph, inner);
            return empty;
        }
        (Some(session_id), Some(TranscriptSlot::Ready(transcript))) => (session_id, transcript),
        (Some(_), _) => {
            frame.render_widget(block, area);
            frame.render_widget(Paragraph::new("loading…".dark_gray()), inner);
            return empty;
        }
    };

    let from_prompt = app.focus == Focus::Input;
    let width = inner.width as usize;
    let rows = wrap_all(&lines(transcript, app.is_loading_older(session_id), from_prompt, app.show_thoughts), width);
    let max_scroll = rows.len().saturating_sub(height);
    let anchor = ScrollAnchor {
        session_id: session_id.to_string(),
        width,
        oldest_seq: transcript.oldest_seq(),
        rows: rows.len(),
    };
    // The offset counts from the bottom: when the user has scrolled up, rows added below since
    // the last frame would push the view up. Adding them to the offset keeps its top line put.
    let added_below = match &app.frame_metrics().anchor {
        Some(last) if app.scroll > 0 && last.same_view(&anchor) => anchor.rows.saturating_sub(last.rows),
        _ => 0,
    };
    let scroll = (app.scroll + added_below).min(max_scroll);
    if scroll > 0 {
        let scrolled = format!(" ↑ {scroll} lines up · End to follow ");
        block = block.title_bottom(Line::from(scrolled).right_aligned());
    }
    frame.render_widget(block, area);
    let start = rows.len().saturating_sub(height + scroll);
    let visible: Vec<Line<'static>> = rows.into_iter().skip(start).take(height).collect();
    frame.render_widget(Paragraph::new(visible), inner);
    FrameMetrics {
        transcript_height: height,
        transcript_max_scroll: max_scroll,
        transcript_scroll: scroll,
        anchor: Some(anchor),
    }
}

fn title(app: &App) -> Line<'static> {
    let Some(session_id) = app.opened.as_deref() else {
        return Line::from(" Transcript ");
    };
    let Some(row) = app.sessions.get(session_id) else {
        return Line::from(format!(" Session {session_id} "));
    };
    let status = &row.status;
    let mut spans = vec![
        Span::styled(format!(" {} ", row.task_title), Style::new().bold()),
        Span::raw(format!("· {} · ", status.agent)),
        Span::styled(state_label(status.state), state_style(status.state)),
        Span::raw(" "),
    ];
    if status.needs_resume {
        spans.push(Span::styled(" NEEDS RESUME ", Style::new().fg(Color::Black).bg(Color::Yellow)));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

/// The transcript as logical lines, before wrapping. `from_prompt`: the prompt has focus, where
/// y and N are text.
fn lines(transcript: &Transcript, loading_older: bool, from_prompt: bool, show_thoughts: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if loading_older {
        out.push(Line::from("… loading older messages".dark_gray()));
    } else if transcript.older_omitted() {
        out.push(Line::from("… older messages: PgUp at the top or Home loads them".dark_gray()));
    }
    for entry in transcript.entries() {
        match &entry.body {
            EntryBody::User(text) => {
                if !out.is_empty() {
                    out.push(Line::default());
                }
                labelled(&mut out, "you: ", Style::new().cyan().bold(), text, Style::new());
            }
            EntryBody::Agent { text, .. } => {
                labelled(&mut out, "agent: ", Style::new().green().bold(), text, Style::new())
            }
            EntryBody::Thought { text, .. } if show_thoughts => {
                let dim = Style::new().dark_gray().add_modifier(Modifier::ITALIC);
                labelled(&mut out, "thinking: ", dim, text, dim)
            }
            EntryBody::Thought { text, .. } => {
                let words = text.split_whitespace().count();
                let plural = if words == 1 { "" } else { "s" };
                out.push(Line::from(format!("▸ thought ({words} word{plural})").dark_gray()));
            }
            EntryBody::ToolCall(call) => out.push(tool_line(call)),
            EntryBody::Plan(entries) => plan_lines(&mut out, entries),
            EntryBody::Status(text) => labelled(&mut out, "• ", Style::new().blue(), text, Style::new().blue()),
            EntryBody::Error(text) => {
                let red = Style::new().red();
                labelled(&mut out, "✗ error: ", red.bold(), text, red)
            }
            EntryBody::Permission(permission) => permission_lines(&mut out, permission, from_prompt),
        }
    }
    out
}

/// A label on the first line of `text`; the following lines are indented.
fn labelled(out: &mut Vec<Line<'static>>, label: &str, label_style: Style, text: &str, style: Style) {
    for (i, line) in text.trim_end_matches('\n').split('\n').enumerate() {
        let lead = if i == 0 { Span::styled(label.to_string(), label_style) } else { Span::raw("  ") };
        out.push(Line::from(vec![lead, Span::styled(line.to_string(), style)]));
    }
}

fn tool_line(call: &ToolCall) -> Line<'static> {
    let status = call.status.as_deref().unwrap_or("pending");
    let status_style = match status {
        "completed" => Style::new().green(),
        "failed" => Style::new().red(),
        _ => Style::new().yellow(),
    };
    let mut spans = vec![Span::styled("▸ ", Style::new().magenta())];
    if let Some(kind) = &call.kind {
        spans.push(Span::styled(format!("{kind} "), Style::new().dark_gray()));
    }
    spans.push(Span::raw(call.title.clone()));
    spans.push(Span::styled(format!("  [{status}]"), status_style));
    Line::from(spans)
}

fn plan_lines(out: &mut Vec<Line<'static>>, entries: &[PlanEntry]) {
    out.push(Line::from("Plan".yellow().bold()));
    for entry in entries {
        let (mark, style) = match entry.status.as_str() {
            "completed" => ("✓", Style::new().green()),
            "in_progress" => ("◐", Style::new().yellow()),
            _ => ("○", Style::new().dark_gray()),
        };
        out.push(Line::from(vec![Span::styled(format!("  {mark} "), style), Span::raw(entry.content.clone())]));
    }
}

fn permission_lines(out: &mut Vec<Line<'static>>, permission: &Permission, from_prompt: bool) {
    let magenta = Style::new().magenta().bold();
    out.push(Line::from(vec![Span::styled("? permission: ", magenta), Span::raw(permission.title.clone())]));
    let options: Vec<Span<'static>> = permission
        .options
        .iter()
        .enumerate()
        .flat_map(|(i, option)| {
            [Span::styled(format!("  [{}] ", i + 1), Style::new().bold()), Span::raw(option.name.clone())]
        })
        .collect();
    let mut first = vec![Span::raw("  ")];
    first.extend(options);
    out.push(Line::from(first));
    let answer = match &permission.answer {
        PermissionAnswer::Pending if from_prompt => {
            Line::from("    Esc, then y allow · N reject · 1-9 choose (or Alt-y, Alt-N)".magenta())
        }
        PermissionAnswer::Pending => Line::from("    y allow · N reject · 1-9 choose".magenta()),
        PermissionAnswer::Chosen(option_id) => {
            let name = permission
                .options
                .iter()
                .find(|o| &o.option_id == option_id)
                .map_or(option_id.as_str(), |o| o.name.as_str());
            Line::from(format!("    → {name}").dark_gray())
        }
        PermissionAnswer::Abandoned => Line::from("    → not answered".dark_gray()),
    };
    out.push(answer);
}
