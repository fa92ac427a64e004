//! The transcript pane: the opened session's messages, thoughts, tool calls, plan, status
//! lines and permission requests, newest at the bottom. The rows come from the app's
//! [`TranscriptLayout`](crate::layout::TranscriptLayout); this only draws them.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;

use super::state_style;
use crate::app::{App, Focus, FrameMetrics, ScrollAnchor, TranscriptSlot};
use crate::layout::{header_lines, EntrySpan, LayoutOptions};
use crate::sessions::is_working;

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) -> FrameMetrics {
    let mut block = Block::bordered().title(title(app)).border_style(Style::new().dark_gray());
    // The server's word on whether a turn runs: the state, and an agent attached to run it.
    let running = app.opened.as_deref().and_then(|id| app.sessions.get(id)).is_some_and(|row| is_working(&row.status));
    let mut facts = Vec::new();
    if running {
        facts.push(" working… ".yellow());
    }
    facts.extend(origin_and_usage(app));
    if !facts.is_empty() {
        block = block.title_bottom(Line::from(facts));
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

    let options = LayoutOptions {
        width: inner.width as usize,
        show_thoughts: app.show_thoughts,
        expand_generation: app.reading.expand_generation,
    };
    let expanded = |seq: u64| app.is_expanded(session_id, seq);
    let header = header_lines(transcript, app.is_loading_older(session_id), options.width);
    let mut layout = app.transcript_layout.borrow_mut();
    layout.update(session_id, transcript, options, &expanded);
    let total = layout.total_rows(header.len());
    let max_scroll = total.saturating_sub(height);
    let anchor = ScrollAnchor {
        session_id: session_id.to_string(),
        width: options.width,
        oldest_seq: transcript.oldest_seq(),
        rows: total,
    };
    // The offset counts from the bottom: when the user has scrolled up, rows added below since
    // the last frame would push the view up. Adding them to the offset keeps its top line put.
    let added_below = match &app.frame_metrics().anchor {
        Some(last) if app.scroll > 0 && last.same_view(&anchor) => anchor.rows.saturating_sub(last.rows),
        _ => 0,
    };
    let mut scroll = (app.scroll + added_below).min(max_scroll);
    let focused = app.focus == Focus::Transcript;
    if let Some(seq) = app.reading.selected.filter(|_| focused && app.reading.reveal) {
        scroll = layout.revealing(seq, scroll, height, app.reading.pin_row).min(max_scroll);
    }
    if scroll > 0 {
        let scrolled = format!(" ↑ {scroll} lines up · End to follow ");
        block = block.title_bottom(Line::from(scrolled).right_aligned());
    }
    frame.render_widget(block, area);
    let (visible, spans) = layout.visible_rows(transcript, header, scroll, height, &expanded);
    frame.render_widget(Paragraph::new(visible), inner);
    let shown = spans.first().zip(spans.last()).map(|(first, last)| (first.seq, last.seq));
    let selected = if focused { mark_selected(frame, area, inner, &spans, app.reading.selected) } else { None };
    let selected_row = selected.and_then(|seq| spans.iter().find(|span| span.seq == seq)).map(|span| span.rows.start);
    FrameMetrics {
        transcript_height: height,
        transcript_max_scroll: max_scroll,
        transcript_scroll: scroll,
        anchor: Some(anchor),
        screen_height: 0,
        screen_width: 0,
        transcript_shown: shown,
        transcript_selected: selected,
        transcript_selected_row: selected_row,
        overlay_max_scroll: None,
        panes: Default::default(),
    }
}

/// Marks the rows of the selected entry on the pane's left border; a selection off screen
/// moves to the nearest entry on it. Returns the entry marked.
fn mark_selected(
    frame: &mut Frame<'_>,
    area: Rect,
    inner: Rect,
    spans: &[EntrySpan],
    selected: Option<u64>,
) -> Option<u64> {
    let (first, last) = (spans.first()?, spans.last()?);
    let span = match selected {
        Some(seq) if seq < first.seq => first,
        Some(seq) => spans.iter().find(|span| span.seq >= seq).unwrap_or(last),
        None => last,
    };
    for row in span.rows.clone() {
        let position = ratatui::layout::Position { x: area.x, y: inner.y + row as u16 };
        if let Some(cell) = frame.buffer_mut().cell_mut(position) {
            cell.set_symbol("▐").set_style(Style::new().fg(Color::Yellow));
        }
    }
    Some(span.seq)
}

/// Where the opened session was forked from and what its agent reported using, on the pane's
/// bottom border (the top one is full with the title and the state).
fn origin_and_usage(app: &App) -> Vec<Span<'static>> {
    let Some(session_id) = app.opened.as_deref() else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    if let Some(note) = app.sessions.get(session_id).and_then(crate::app::fork_note) {
        spans.push(Span::styled(format!(" {note} "), Style::new().fg(Color::Magenta)));
    }
    if let Some(usage) = app.session_usage(session_id) {
        spans.push(Span::styled(format!(" {usage} "), Style::new().fg(Color::Cyan)));
    }
    spans
}

fn title(app: &App) -> Line<'static> {
    let Some(session_id) = app.opened.as_deref() else {
        return Line::from(" Transcript ");
    };
    let Some(row) = app.sessions.get(session_id) else {
        return Line::from(format!(" Session {session_id} "));
    };
    let status = &row.status;
    let number = app.sessions.number_in_task(session_id).map(|n| format!("#{n} ")).unwrap_or_default();
    let mut spans = vec![
        Span::styled(format!(" {} {number}", row.task_title), Style::new().bold()),
        Span::raw(format!("· {} · ", status.agent)),
        Span::styled(crate::sessions::status_name(status), state_style(status.state)),
        Span::raw(" "),
    ];
    if status.needs_resume && app.resume_failure(session_id).is_some() {
        spans.push(Span::styled(" RESUME FAILED ", Style::new().fg(Color::Black).bg(Color::Red)));
        spans.push(Span::raw(" "));
    } else if status.needs_resume {
        spans.push(Span::styled(" NEEDS RESUME ", Style::new().fg(Color::Black).bg(Color::Yellow)));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}
