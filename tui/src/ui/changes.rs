//! A task's changes (`d`), drawn over the whole screen: the changed files with their counts
//! (committed, then uncommitted; a cross marks the files the next commit takes), and the diff of
//! the one under the cursor in colour. Side by side from 120 columns, the list above the diff
//! below that. Only the rows on screen are built, so a diff of 50,000 lines costs what a screen
//! of it does.

use baton_protocol::{ChangePart, ChangedFile, FileStatus};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use crate::app::ChangesView;

/// From this width the list and the diff are side by side.
const SIDE_BY_SIDE: u16 = 120;

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, view: &ChangesView) {
    frame.render_widget(Clear, area);
    let title = match &view.changes {
        Some(c) => {
            let branch = c.branch.as_deref().unwrap_or("detached HEAD");
            let base = c.base.branch.as_deref().map(|b| format!(" from {b}")).unwrap_or_default();
            let commits = crate::sessions::count(c.commits as usize, "commit");
            let files = crate::sessions::count(c.total as usize, "file");
            // What matters most first: a narrow screen cuts the end.
            let lines = if c.counted { format!("+{} -{}", c.added, c.removed) } else { "counting…".into() };
            format!(" Changes: {files} {lines} · {commits} · {branch}{base} · {} ", view.label)
        }
        None => format!(" Changes of {} ", view.label),
    };
    let block = Block::bordered().title(Line::from(title).bold());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if let Some(message) = &view.message {
        let [list_area, message_area] = Layout::vertical([Constraint::Min(3), Constraint::Length(4)]).areas(inner);
        draw_panes(frame, list_area, view);
        let kept = view.kept().len();
        let kept = crate::sessions::count(kept, "file");
        let block = Block::bordered().title(format!(" Commit message ({kept}) · Enter commit · Esc cancel "));
        let field = block.inner(message_area);
        frame.render_widget(Clear, message_area);
        frame.render_widget(block, message_area);
        let mut lines = vec![Line::raw(message.text().to_string())];
        if let Some(error) = &view.message_error {
            lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
        }
        frame.render_widget(Paragraph::new(lines), field);
        let (row, column) = message.cursor_position();
        let x = field.x + (column as u16).min(field.width.saturating_sub(1));
        frame.set_cursor_position((x, field.y + row as u16));
        return;
    }
    draw_panes(frame, inner, view);
}

fn draw_panes(frame: &mut Frame<'_>, area: Rect, view: &ChangesView) {
    if let Some(error) = &view.error {
        let text = vec![Line::styled(error.clone(), Style::new().fg(Color::Red)), Line::styled("r reads again", dim())];
        frame.render_widget(Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: false }), area);
        return;
    }
    let Some(changes) = &view.changes else {
        frame.render_widget(Paragraph::new(Line::styled("Reading the changes…", dim())), area);
        return;
    };
    if changes.files.is_empty() {
        let text = format!("No changes since {}: the agent changed nothing yet.", short(&changes.base.commit));
        frame.render_widget(Paragraph::new(Line::styled(text, dim())), area);
        return;
    }
    let (list_area, diff_area) = if area.width >= SIDE_BY_SIDE {
        let list_width = (area.width / 3).clamp(30, 60);
        let [list, diff] = Layout::horizontal([Constraint::Length(list_width), Constraint::Min(20)]).areas(area);
        (list, diff)
    } else {
        let rows = (changes.files.len() as u16 + 2).min(area.height / 3).max(3);
        let [list, diff] = Layout::vertical([Constraint::Length(rows), Constraint::Min(3)]).areas(area);
        (list, diff)
    };
    draw_list(frame, list_area, view);
    draw_diff(frame, diff_area, view);
}

fn status_letter(status: FileStatus) -> (&'static str, Color) {
    match status {
        FileStatus::Added => ("A", Color::Green),
        FileStatus::Modified => ("M", Color::Yellow),
        FileStatus::Deleted => ("D", Color::Red),
        FileStatus::Renamed => ("R", Color::Cyan),
        FileStatus::TypeChanged => ("T", Color::Yellow),
        FileStatus::Untracked => ("?", Color::Green),
        FileStatus::Conflicted => ("U", Color::Red),
    }
}

fn draw_list(frame: &mut Frame<'_>, area: Rect, view: &ChangesView) {
    let block = Block::bordered().border_style(dim());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let files = view.files();
    let height = inner.height as usize;
    // The cursor's row stays on screen, a few rows from the bottom edge.
    let first = view.selected.saturating_sub(height.saturating_sub(1));
    let width = inner.width as usize;
    let lines: Vec<Line<'static>> = files
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, file)| file_row(view, file, i == view.selected, width))
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn file_row(view: &ChangesView, file: &ChangedFile, selected: bool, width: usize) -> Line<'static> {
    let (letter, color) = status_letter(file.status);
    let keep = match file.part {
        ChangePart::Committed => Span::styled(" ✓ ", dim()),
        ChangePart::Uncommitted if view.left_out.contains(&file.path) => Span::raw("[ ]"),
        ChangePart::Uncommitted => Span::styled("[x]", Style::new().fg(Color::Green)),
    };
    let counted = view.changes.as_ref().is_none_or(|c| c.counted);
    let counts = match (counted, file.binary) {
        (false, _) => "…".to_string(),
        (true, true) => "binary".to_string(),
        (true, false) => format!("+{} -{}", file.added, file.removed),
    };
    let name = match &file.old_path {
        Some(old) => format!("{old} → {}", file.path),
        None => file.path.clone(),
    };
    // `[x] M path  +1 -2`, the path cut from the left when the row is short.
    let room = width.saturating_sub(3 + 3 + counts.width() + 2);
    let name = cut_left(&name, room);
    let pad = room.saturating_sub(name.width());
    let marker = if selected { Style::new().add_modifier(Modifier::REVERSED) } else { Style::new() };
    Line::from(vec![
        keep,
        Span::styled(format!(" {letter} "), Style::new().fg(color)),
        Span::styled(name, marker),
        Span::raw(" ".repeat(pad + 1)),
        Span::styled(counts, dim()),
    ])
}

/// `text` cut to `width` columns from the left (`…` first), where a path's end says most.
fn cut_left(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut used = 1;
    for c in text.chars().rev() {
        let w = UnicodeWidthStr::width(c.encode_utf8(&mut [0; 4]) as &str);
        if used + w > width {
            break;
        }
        used += w;
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

fn draw_diff(frame: &mut Frame<'_>, area: Rect, view: &ChangesView) {
    let Some(file) = view.current() else { return };
    let part = match file.part {
        ChangePart::Committed => "committed",
        ChangePart::Uncommitted => "uncommitted",
    };
    let title = format!(" {} ({part}) ", file.path);
    let block = Block::bordered().border_style(dim()).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(diff) = view.current_diff() else {
        frame.render_widget(Paragraph::new(Line::styled("Reading the diff…", dim())), inner);
        return;
    };
    if diff.binary {
        frame.render_widget(Paragraph::new(Line::styled("A binary file: its diff is not shown.", dim())), inner);
        return;
    }
    let width = inner.width as usize;
    let mut lines: Vec<Line<'static>> = diff
        .diff
        .lines()
        .skip(view.scroll)
        .take(inner.height as usize)
        .map(|line| {
            let style = if line.starts_with("+++") || line.starts_with("---") {
                Style::new().add_modifier(Modifier::BOLD)
            } else if line.starts_with('+') {
                Style::new().fg(Color::Green)
            } else if line.starts_with('-') {
                Style::new().fg(Color::Red)
            } else if line.starts_with("@@") {
                Style::new().fg(Color::Cyan)
            } else {
                Style::new()
            };
            Line::styled(cut_right(&line.replace('\t', "    "), width), style)
        })
        .collect();
    if diff.truncated && lines.len() < inner.height as usize {
        lines.push(Line::styled("… the diff is longer than 2 MiB and is cut here", dim()));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// `text` cut to `width` columns (diff rows are not wrapped: their columns line up).
fn cut_right(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        let w = UnicodeWidthStr::width(c.encode_utf8(&mut [0; 4]) as &str);
        if used + w > width.saturating_sub(1) {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
