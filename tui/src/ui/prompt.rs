//! The prompt input at the bottom.

use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use crate::app::{App, Focus};

/// Lines of input shown at most; longer input scrolls to keep the cursor visible.
const MAX_LINES: usize = 5;

/// Rows the prompt takes, borders included: it grows with multi-line input.
pub fn height(app: &App) -> u16 {
    let lines = app.input.text().split('\n').count().clamp(1, MAX_LINES);
    lines as u16 + 2
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let focused = app.focus == Focus::Input && app.overlay.is_none();
    // The session the text goes to, named: the pane and the list cursor may have shown
    // another one a moment ago.
    let mut title = match app.opened.as_deref() {
        Some(id) => match app.sessions.get(id) {
            Some(row) => format!(" To “{}” · {} ", row.task_title, crate::sessions::short_id(id)),
            None => format!(" To {} ", crate::sessions::short_id(id)),
        },
        None => String::from(" Prompt "),
    };
    let permission = app.opened.as_deref().is_some_and(|id| app.permission_pending(id));
    if focused && permission {
        // y and N would go into the text: say how to answer from here.
        title.push_str("· permission waiting: Esc, then y/N ");
    } else if focused {
        title.push_str("· Enter send · Alt-Enter new line · Esc leave ");
    }
    if app.sending > 0 {
        title.push_str("· sending… ");
    }
    let border = if focused { Color::Yellow } else { Color::DarkGray };
    let block = Block::bordered().title(title).border_style(Style::new().fg(border));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    let text = app.input.text();
    if text.is_empty() && !focused {
        let hint =
            if app.opened.is_some() { "press i to write to the agent" } else { "open a session to write to its agent" };
        frame.render_widget(Paragraph::new(hint.dark_gray()), inner);
        return;
    }

    // Scroll so the cursor stays inside the box, vertically and horizontally.
    let (row, col) = app.input.cursor_position();
    let top = (row + 1).saturating_sub(inner.height as usize);
    let left = (col + 1).saturating_sub(inner.width as usize);
    let lines: Vec<Line<'_>> = text.split('\n').map(Line::from).collect();
    let paragraph = Paragraph::new(lines).scroll((top as u16, left as u16));
    frame.render_widget(paragraph, inner);
    if focused {
        frame.set_cursor_position(Position { x: inner.x + (col - left) as u16, y: inner.y + (row - top) as u16 });
    }
}
