//! The export form (`x`): where the transcript goes, in which format, with or without thoughts.

use baton_protocol::ExportFormat;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::centered;
use crate::app::ExportForm;
use crate::layout::wrap::wrap;

pub fn draw(frame: &mut Frame<'_>, area: Rect, form: &ExportForm) {
    const WIDTH: u16 = 76;
    let width = area.width.min(WIDTH);
    let inner_width = width.saturating_sub(2) as usize;
    let text = form.path.text().replace('\n', " ");
    let (_, col) = form.path.cursor_position();
    let label = " File    ";
    let room = inner_width.saturating_sub(label.len() + 1).max(1);
    let left = (col + 1).saturating_sub(room);
    let format = match form.format {
        ExportFormat::Markdown => "Markdown (.md)",
        ExportFormat::Jsonl => "JSON Lines (.jsonl), one journal event a line",
    };
    let thoughts = if form.thoughts { "included" } else { "left out" };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(label, Style::new().yellow().bold()),
            Span::raw(text.chars().skip(left).collect::<String>()),
        ]),
        Line::from(vec![Span::raw(" Format  "), Span::raw(format)]),
        Line::from(vec![Span::raw(" Thoughts "), Span::raw(thoughts)]),
        Line::default(),
    ];
    match (&form.error, form.submitting) {
        (_, true) => lines.push(Line::from(" exporting…".dark_gray())),
        (Some(error), false) => lines.extend(wrap(&Line::from(format!(" {error}").red()), inner_width)),
        (None, false) => {}
    }
    let enter = if form.overwrite { "Enter replace the file" } else { "Enter export" };
    lines.push(Line::from(format!(" {enter} · Tab format · Ctrl-T thoughts · Esc cancel").dark_gray()));
    let rect = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(" Export the transcript ")), rect);
    frame.set_cursor_position(Position { x: rect.x + 1 + label.len() as u16 + (col - left) as u16, y: rect.y + 1 });
}
