//! The search view (`f`): the query on top, the hits below it (task, what the entry is, its
//! age, the snippet with the matches marked), the keys at the bottom.

use baton_protocol::{MessageKind, SearchHit};
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::{age, centered, ViewContext};
use crate::app::SearchView;

pub fn draw(frame: &mut Frame<'_>, area: Rect, view: &SearchView, ctx: &ViewContext) {
    let width = area.width.saturating_sub(4).min(100);
    let height = area.height.saturating_sub(2).max(6);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = Block::bordered()
        .title(" Search all sessions ")
        .title_bottom(Line::from(" type to search · ↑/↓ choose · Enter open in context · Esc close ").dark_gray())
        .border_style(Style::new().fg(Color::Yellow));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let inner_width = inner.width as usize;

    let query = view.query.text().replace('\n', " ");
    let (_, col) = view.query.cursor_position();
    let room = inner_width.saturating_sub(3).max(1);
    let left = (col + 1).saturating_sub(room);
    let mut lines = vec![Line::from(vec![
        Span::styled(" › ", Style::new().yellow().bold()),
        Span::raw(query.chars().skip(left).collect::<String>()),
    ])];
    lines.push(Line::from(summary(view).dark_gray()));
    // Two rows per hit: what and where, then the snippet.
    let rows_for_hits = (inner.height as usize).saturating_sub(lines.len());
    let per_page = (rows_for_hits / 2).max(1);
    let first = (view.selected + 1).saturating_sub(per_page);
    for (index, hit) in view.hits.iter().enumerate().skip(first).take(per_page) {
        let chosen = index == view.selected;
        lines.extend(hit_lines(hit, chosen, inner_width, ctx));
    }
    frame.render_widget(Paragraph::new(lines), inner);
    frame.set_cursor_position(Position { x: inner.x + 3 + (col - left) as u16, y: inner.y });
}

/// What the second row says: how many hits, loading, an error, or how to start.
fn summary(view: &SearchView) -> String {
    if let Some(error) = &view.error {
        return format!(" {error}");
    }
    match (&view.searched, view.loading) {
        (_, true) if view.hits.is_empty() => " searching…".into(),
        (None, false) => {
            " words to find in every session's messages (the last one as a prefix until a space ends it)".into()
        }
        (Some(query), _) if view.hits.is_empty() => format!(" nothing matches “{query}”"),
        (Some(_), loading) => {
            let more = if loading {
                " · loading more…"
            } else if view.next_cursor.is_some() {
                " · more below"
            } else {
                ""
            };
            format!(" hit {} of {}{more}", view.selected + 1, view.hits.len())
        }
        (None, true) => " searching…".into(),
    }
}

fn hit_lines(hit: &SearchHit, chosen: bool, width: usize, ctx: &ViewContext) -> [Line<'static>; 2] {
    let marker = if chosen { "›" } else { " " };
    let head = format!(
        "{marker} {} · {} · {} · {} ago",
        hit.task_title,
        kind_name(hit.kind),
        crate::sessions::short_id(&hit.session_id),
        age(&hit.created_at, ctx.now)
    );
    let head_style = if chosen { Style::new().yellow().bold() } else { Style::new().bold() };
    let mut snippet = vec![Span::raw("   ")];
    let mut used = 3;
    for part in &hit.snippet {
        // One row: the snippet's newlines are spaces, and what does not fit is cut.
        let text = part.text.replace(['\n', '\r'], " ");
        let room = width.saturating_sub(used);
        if room == 0 {
            break;
        }
        let text: String = cut(&text, room);
        used += text.width();
        let style = if part.matched {
            Style::new().fg(Color::Black).bg(Color::Yellow).add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        snippet.push(Span::styled(text, style));
    }
    let mut head = Line::from(Span::styled(cut(&head, width), head_style));
    let mut snippet = Line::from(snippet);
    if chosen {
        head = head.style(Style::new().bg(Color::Indexed(236)));
        snippet = snippet.style(Style::new().bg(Color::Indexed(236)));
    }
    [head, snippet]
}

fn cut(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out
}

fn kind_name(kind: MessageKind) -> &'static str {
    match kind {
        MessageKind::User => "you",
        MessageKind::Agent => "agent",
        MessageKind::Thought => "thought",
        MessageKind::ToolCall => "tool call",
        MessageKind::Plan => "plan",
        MessageKind::Status => "status",
        MessageKind::Error => "error",
        MessageKind::Permission => "permission",
    }
}
