//! Boxes drawn over the screen: help, confirmation, new-task form.

use ratatui::layout::{Position, Rect};
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::centered;
use crate::app::{App, Confirmation, FormField, NewTaskForm, Overlay};

/// The bindings of [`crate::keymap`], as the help shows them.
const HELP: &[(&str, &str)] = &[
    ("↑/↓  j/k", "move in the session list"),
    ("Enter", "open the session (subscribes; resumes it if needed)"),
    ("i  Tab", "write a prompt; Enter sends, Esc leaves"),
    ("Alt-Enter", "new line in the prompt"),
    ("c", "cancel the running turn"),
    ("r", "resume the session"),
    ("R", "resume fresh, without the saved conversation"),
    ("s", "stop the session"),
    ("n", "new task"),
    ("y  N  1-9", "allow, reject or pick a permission option"),
    ("PgUp/PgDn", "scroll the transcript; Home/End top/bottom"),
    ("?", "this help"),
    ("q  Ctrl-C", "quit (the server and its agents keep running)"),
];

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App) {
    match &app.overlay {
        None => {}
        Some(Overlay::Help) => help(frame, area),
        Some(Overlay::Confirm(confirmation)) => confirm(frame, area, confirmation),
        Some(Overlay::NewTask(form)) => new_task(frame, area, app, form),
    }
}

fn help(frame: &mut Frame<'_>, area: Rect) {
    let rect = centered(area, 72, HELP.len() as u16 + 4);
    let mut lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(keys, what)| {
            Line::from(vec![Span::styled(format!(" {keys:<12}"), Style::new().yellow().bold()), Span::raw(*what)])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(" Esc or ? closes this help".dark_gray()));
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(" Help ")), rect);
}

fn confirm(frame: &mut Frame<'_>, area: Rect, confirmation: &Confirmation) {
    let rect = centered(area, 56, 6);
    let lines =
        vec![Line::from(confirmation.question()), Line::default(), Line::from("y confirm · n cancel".dark_gray())];
    frame.render_widget(Clear, rect);
    let paragraph =
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(Block::bordered().title(" Confirm ").yellow());
    frame.render_widget(paragraph, rect);
}

const LABEL_WIDTH: usize = 13;

fn new_task(frame: &mut Frame<'_>, area: Rect, app: &App, form: &NewTaskForm) {
    let rect = centered(area, 72, 10);
    frame.render_widget(Clear, rect);
    let block = Block::bordered().title(" New task ");
    let inner = block.inner(rect);
    frame.render_widget(block, rect);

    let field_width = (inner.width as usize).saturating_sub(LABEL_WIDTH + 1);
    let mut lines = Vec::new();
    let mut cursor = None;
    for (row, field) in FormField::ALL.into_iter().enumerate() {
        let focused = form.focus == field;
        let label_style = if focused { Style::new().yellow().bold() } else { Style::new() };
        let marker = if focused { '›' } else { ' ' };
        let label = format!("{marker}{:<w$}", field.label(), w = LABEL_WIDTH - 1);
        let label = Span::styled(label, label_style);
        let value = match field {
            FormField::Agent => agent_value(app, form),
            FormField::Title | FormField::Description | FormField::Workdir => {
                let text_field = match field {
                    FormField::Title => &form.title,
                    FormField::Description => &form.description,
                    _ => &form.workdir,
                };
                // One line per field: show the end of long text, where the cursor usually is.
                let text = text_field.text().replace('\n', " ");
                let (_, col) = text_field.cursor_position();
                let left = (col + 1).saturating_sub(field_width);
                if focused {
                    cursor = Some(Position {
                        x: inner.x + LABEL_WIDTH as u16 + (col - left) as u16,
                        y: inner.y + row as u16,
                    });
                }
                Span::raw(text.chars().skip(left).collect::<String>())
            }
        };
        lines.push(Line::from(vec![label, value]));
    }
    lines.push(Line::default());
    lines.push(Line::from(" The description is the agent's first prompt.".dark_gray()));
    lines.push(Line::from(" Enter create · Tab next field · ←/→ choose agent · Esc cancel".dark_gray()));
    if let Some(error) = &form.error {
        lines.push(Line::from(format!(" {error}").red()));
    }
    frame.render_widget(Paragraph::new(lines), inner);
    if let Some(position) = cursor {
        frame.set_cursor_position(position);
    }
}

fn agent_value(app: &App, form: &NewTaskForm) -> Span<'static> {
    match app.agents.get(form.agent) {
        Some(agent) => {
            let missing = if agent.installed { "" } else { " (not installed)" };
            Span::raw(format!("◂ {} ({}){missing} ▸", agent.display_name, agent.name))
        }
        None => Span::styled("loading agents…", Style::new().dark_gray()),
    }
}
