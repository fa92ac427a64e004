//! The left pane: sessions grouped under their task, with state, agent, age and the server's
//! NEEDS RESUME flag.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use baton_protocol::SessionInfo;

use super::{age, state_label, state_style, ViewContext};
use crate::app::{App, Focus};
use crate::sessions::ListItem;

const AGENT_WIDTH: usize = 8;

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App, ctx: &ViewContext) {
    let focused = app.focus == Focus::List && app.overlay.is_none();
    let border = if focused { Color::Yellow } else { Color::DarkGray };
    let block = Block::bordered().title(" Sessions ").border_style(Style::new().fg(border));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    if !app.sessions.is_loaded() {
        frame.render_widget(Paragraph::new("loading…".dark_gray()), inner);
        return;
    }
    if app.sessions.is_empty() {
        let hint =
            vec![Line::from("No sessions yet.".dark_gray()), Line::from("Press n to create a task.".dark_gray())];
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    }

    let items = app.sessions.items();
    let cursor_id = app.sessions.cursor().map(|s| s.status.session_id.as_str());
    let cursor_index = items
        .iter()
        .position(|item| matches!(item, ListItem::Session(s) if Some(s.status.session_id.as_str()) == cursor_id))
        .unwrap_or(0);
    // Scroll just enough to keep the cursor visible; the view keeps no scroll state.
    let height = inner.height as usize;
    let offset = (cursor_index + 1).saturating_sub(height);
    let lines: Vec<Line<'_>> = items
        .iter()
        .skip(offset)
        .take(height)
        .map(|item| match item {
            ListItem::Task(row) => task_line(row),
            ListItem::Session(row) => {
                let id = row.status.session_id.as_str();
                let is_cursor = Some(id) == cursor_id;
                let is_open = app.opened.as_deref() == Some(id);
                session_line(row, is_cursor, is_open, ctx)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn task_line(row: &SessionInfo) -> Line<'_> {
    Line::from(vec![
        Span::styled(row.task_title.as_str(), Style::new().bold()),
        Span::styled(format!("  {}", row.status.task_state), Style::new().dark_gray()),
    ])
}

fn session_line(row: &SessionInfo, is_cursor: bool, is_open: bool, ctx: &ViewContext) -> Line<'static> {
    let status = &row.status;
    let marker = format!("{}{} ", if is_cursor { "›" } else { " " }, if is_open { "●" } else { " " });
    let mut agent: String = status.agent.chars().take(AGENT_WIDTH).collect();
    agent = format!("{agent:<AGENT_WIDTH$}");
    let mut spans = vec![
        Span::raw(marker),
        Span::styled(format!("{:<9} ", state_label(status.state)), state_style(status.state)),
        Span::raw(format!("{agent} ")),
        Span::styled(format!("{:>3}", age(&row.created_at, ctx.now)), Style::new().dark_gray()),
    ];
    if status.needs_resume {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(
            "NEEDS RESUME",
            Style::new().fg(Color::Black).bg(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
    }
    let line = Line::from(spans);
    if is_cursor {
        line.style(Style::new().bg(Color::Rgb(40, 40, 60)))
    } else {
        line
    }
}
