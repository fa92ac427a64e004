//! Boxes drawn over the screen: help, confirmation, new-task form, the last error in full.

use ratatui::layout::{Position, Rect};
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::centered;
use crate::app::{App, Confirmation, FormField, NewTaskForm, Overlay, RenameForm};
use crate::layout::wrap::wrap;

/// The bindings of [`crate::keymap`], as the help shows them, grouped by what they act on.
const HELP: &[(&str, &[(&str, &str)])] = &[
    (
        "Sessions",
        &[
            ("↑/↓  j/k", "move in the session list"),
            ("Enter", "open the session (subscribes; resumes it if needed)"),
            ("/", "filter the list by title, agent or state; Esc clears"),
            ("w  W", "open the next session that needs you (waiting longest first) · W: list only those"),
            ("r  R", "resume it; R: fresh session, conversation included"),
            ("s  S", "stop it for good; S: start a new session of its task"),
            ("Esc  c", "cancel the highlighted session's running turn (asks first)"),
            ("n", "new task"),
            ("e  a  D", "rename its task · archive it (asks; agents stopped, kept) · Delete it (asks)"),
            ("z", "archived tasks; u there brings one back"),
            ("F", "fork the highlighted session from its conversation (asks)"),
            ("H", "hand its conversation to another agent: a new session of the task runs it"),
        ],
    ),
    (
        "Writing to the agent",
        &[
            ("i  Tab", "write a prompt; Enter sends, Esc leaves"),
            ("Alt-Enter", "new line in the prompt"),
            ("Ctrl-S", "in the prompt during a turn: cancel the turn and send this message first (steer)"),
            ("↑/↓  Ctrl-P/N", "in the prompt: earlier prompts sent"),
            ("Alt-y Alt-N", "in the prompt: allow or reject the permission request shown"),
            ("u", "queued messages: e edit, x remove, r send the next"),
        ],
    ),
    (
        "What the agent does",
        &[
            ("y N 1-9 A P", "answer permissions (y allow, N reject) · A: approval queue · P: standing answers"),
            ("M", "the agent's modes and options (model, effort…); Enter switches"),
            ("d", "the task's changes: j/k files, n/N hunks, Space keep, c commit, m/M merge, P pull request"),
            ("!", "a shell where the agent works (its directory, container or host); exit returns here"),
        ],
    ),
    (
        "Reading",
        &[
            ("t", "fold or show the agent's thoughts"),
            ("v  Ctrl-O", "read the transcript: [ ] { } select entries / tool calls, Enter expands one, Esc back"),
            ("PgUp/PgDn", "scroll the transcript by a page"),
            ("Home/End  g/G", "top (loads older messages) / bottom, following new output"),
            ("Ctrl-↑/↓", "scroll the transcript by one line (also in the prompt)"),
            ("Y  B", "copy the last answer / its last code block (OSC 52, works over SSH)"),
            ("E", "the last error in full (the status line cuts long ones)"),
            ("f", "search all sessions' messages; Enter opens a hit in context"),
            ("x", "export the open transcript to a file (Markdown or JSONL)"),
        ],
    ),
    (
        "Baton",
        &[
            ("O", "the web page's address with its token (shown and copied)"),
            ("p", "paired devices: n pairs a phone (QR code), x revokes one"),
            ("m", "mouse on/off (--mouse starts on): wheel scrolls, click opens"),
            ("Esc", "with no turn running: hide the message, then the filter"),
            ("?", "this help"),
            ("Ctrl-C", "clear the prompt; when empty, quit"),
            ("q", "quit (the server and its agents keep running)"),
            ("Q", "stop the local server and all its agents (asks first)"),
        ],
    ),
];

/// Draws the overlay open, if any; returns how far it could be scrolled when it scrolls.
pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App, ctx: &super::ViewContext) -> Option<usize> {
    match &app.overlay {
        // Drawn by `ui/approvals.rs`.
        None
        | Some(Overlay::Approvals(_))
        | Some(Overlay::Rules(_))
        | Some(Overlay::Options(_))
        | Some(Overlay::Archived(_))
        | Some(Overlay::HandOver(_))
        | Some(Overlay::Queue(_))
        | Some(Overlay::Devices(_))
        | Some(Overlay::Changes(_)) => {}
        Some(Overlay::Help) => return Some(help(frame, area, app.help_scroll, &app.bindings.changed())),
        Some(Overlay::ErrorDetails) => {
            let text = app.last_error().unwrap_or_default();
            return Some(error_details(frame, area, text, app.error_scroll));
        }
        Some(Overlay::Rename(form)) => rename(frame, area, form),
        Some(Overlay::Confirm(confirmation)) => confirm(frame, area, confirmation, missing_agent(app, confirmation)),
        Some(Overlay::NewTask(form)) => new_task(frame, area, app, form),
        Some(Overlay::Search(view)) => super::search::draw(frame, area, view, ctx),
        Some(Overlay::Export(form)) => super::export::draw(frame, area, form),
    }
    None
}

/// The help, wrapped to the box; on a terminal too small for all of it, it scrolls (↑/↓,
/// PgUp/PgDn) and the title says which rows are shown.
fn help(frame: &mut Frame<'_>, area: Rect, scroll: usize, changed: &[(String, &'static str, Vec<String>)]) -> usize {
    let width = area.width.min(80);
    let inner_width = width.saturating_sub(2) as usize;
    let key_width = if inner_width < 60 { 13 } else { 16 };
    let mut groups: Vec<(String, Vec<(String, String)>)> = HELP
        .iter()
        .map(|(group, rows)| (group.to_string(), rows.iter().map(|(k, w)| (k.to_string(), w.to_string())).collect()))
        .collect();
    // What tui.toml binds differently: the groups above list the default keys.
    if !changed.is_empty() {
        let rows = changed
            .iter()
            .map(|(table, name, keys)| {
                let keys = if keys.is_empty() { "(none)".to_string() } else { keys.join("  ") };
                (keys, format!("{name} in {table}"))
            })
            .collect();
        groups.insert(0, ("Your keys (tui.toml; the rest below are the defaults)".to_string(), rows));
    }
    let mut lines: Vec<Line<'static>> = Vec::new();
    for (i, (group, bindings)) in groups.iter().enumerate() {
        if i > 0 {
            lines.push(Line::default());
        }
        lines.push(Line::from(format!(" {group}").cyan().bold()));
        for (keys, what) in bindings {
            // A long description goes on under itself, not under the keys.
            let rows = wrap(&Line::from(what.clone()), inner_width.saturating_sub(key_width).max(10));
            for (i, row) in rows.into_iter().enumerate() {
                let keys = if i == 0 { keys.as_str() } else { "" };
                let mut spans =
                    vec![Span::styled(format!(" {keys:<w$}", w = key_width - 1), Style::new().yellow().bold())];
                spans.extend(row.spans);
                lines.push(Line::from(spans));
            }
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(" Esc or ? closes this help".dark_gray()));
    let rect = centered(area, width, lines.len() as u16 + 2);
    let shown = rect.height.saturating_sub(2) as usize;
    let max_scroll = lines.len().saturating_sub(shown);
    let scroll = scroll.min(max_scroll);
    let title = if max_scroll == 0 {
        " Help ".to_string()
    } else {
        format!(" Help {}-{} of {} · ↑/↓ scroll ", scroll + 1, scroll + shown, lines.len())
    };
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), rect);
    max_scroll
}

/// The last error whole, wrapped to the box (its own lines kept); taller than the screen, it
/// scrolls like the help, and the title says which rows are shown.
fn error_details(frame: &mut Frame<'_>, area: Rect, text: &str, scroll: usize) -> usize {
    let width = area.width.min(90);
    let inner_width = width.saturating_sub(4) as usize;
    let style = Style::new().red();
    let lines: Vec<Line<'static>> = text
        .trim_end()
        .lines()
        .flat_map(|line| wrap(&Line::styled(line.to_string(), style), inner_width.max(1)))
        .map(|row| Line::from([vec![Span::raw(" ")], row.spans].concat()))
        .collect();
    // A row of the screen stays visible above and below it.
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let shown = rect.height.saturating_sub(2) as usize;
    let max_scroll = lines.len().saturating_sub(shown);
    let scroll = scroll.min(max_scroll);
    let title = if max_scroll == 0 {
        " Error ".to_string()
    } else {
        format!(" Error {}-{} of {} · j/k scroll ", scroll + 1, scroll + shown, lines.len())
    };
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    let block = Block::bordered().title(title).title_bottom(Line::from(" Esc close ").right_aligned()).red();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block), rect);
    max_scroll
}

fn rename(frame: &mut Frame<'_>, area: Rect, form: &RenameForm) {
    let width = area.width.min(72);
    let inner_width = width.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    let text = form.title.text().replace('\n', " ");
    let (_, col) = form.title.cursor_position();
    let room = inner_width.saturating_sub(2).max(1);
    let left = (col + 1).saturating_sub(room);
    lines.push(Line::from(format!(" {}", text.chars().skip(left).collect::<String>())));
    if let Some(error) = &form.error {
        lines.extend(wrap(&Line::from(format!(" {error}").red()), inner_width));
    }
    lines.push(Line::from(" Enter save · Esc cancel".dark_gray()));
    let rect = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(" Rename task ")), rect);
    frame.set_cursor_position(Position { x: rect.x + 2 + (col - left) as u16, y: rect.y + 1 });
}

/// The display name of the agent a new session would start, when the server says it is not
/// installed (as the new-task form marks it).
fn missing_agent<'a>(app: &'a App, confirmation: &Confirmation) -> Option<&'a str> {
    let Confirmation::StartSession { agent, .. } = confirmation else {
        return None;
    };
    let info = app.agents.iter().find(|info| &info.name == agent)?;
    (!info.installed).then_some(info.display_name.as_str())
}

fn confirm(frame: &mut Frame<'_>, area: Rect, confirmation: &Confirmation, missing_agent: Option<&str>) {
    // As wide as the screen allows: the text is wrapped to the box drawn, never cut at its edge.
    let width = 64.min(area.width).max(3);
    // The question names the session, so it may take a few lines.
    let mut question = wrap(&Line::from(confirmation.question()), width as usize - 2);
    if let Some(name) = missing_agent {
        let warning = Line::from(vec![
            Span::raw(format!("{name} ")),
            Span::styled("(not installed)", Style::new().red().bold()),
            Span::styled(": the server will refuse to start it until it is installed.", Style::new().red()),
        ]);
        question.push(Line::default());
        question.extend(wrap(&warning, width as usize - 2));
    }
    let rect = centered(area, width, question.len() as u16 + 4);
    let mut lines = question;
    lines.push(Line::default());
    lines.push(Line::from("y confirm · n cancel".dark_gray()));
    frame.render_widget(Clear, rect);
    let paragraph = Paragraph::new(lines).block(Block::bordered().title(" Confirm ").yellow());
    frame.render_widget(paragraph, rect);
}

const LABEL_WIDTH: usize = 13;

fn new_task(frame: &mut Frame<'_>, area: Rect, app: &App, form: &NewTaskForm) {
    const WIDTH: u16 = 72;
    // An error is shown whole, however long: the form grows to hold it.
    let status = match (&form.error, form.submitting) {
        (_, true) => vec![Line::from(" creating the task…".dark_gray())],
        (Some(error), false) => wrap(&Line::from(error.as_str().red()), WIDTH as usize - 3)
            .into_iter()
            .map(|row| Line::from([vec![Span::raw(" ")], row.spans].concat()))
            .collect(),
        (None, false) => Vec::new(),
    };
    let rect = centered(area, WIDTH, 10 + status.len() as u16);
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
            FormField::Worktree if form.worktree => {
                vec![Span::raw("[x] a branch and worktree of its own")]
            }
            FormField::Worktree => vec![Span::raw("[ ] in the directory itself (Space: own worktree)")],
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
                vec![Span::raw(text.chars().skip(left).collect::<String>())]
            }
        };
        let mut spans = vec![label];
        spans.extend(value);
        lines.push(Line::from(spans));
    }
    lines.push(Line::default());
    lines.push(Line::from(" The description is the agent's first prompt.".dark_gray()));
    lines.push(Line::from(" Enter create · Tab next field · ←/→ choose agent · Esc cancel".dark_gray()));
    lines.extend(status);
    frame.render_widget(Paragraph::new(lines), inner);
    if let Some(position) = cursor {
        frame.set_cursor_position(position);
    }
}

fn agent_value(app: &App, form: &NewTaskForm) -> Vec<Span<'static>> {
    match app.agents.get(form.agent) {
        Some(agent) => {
            let mut spans = vec![Span::raw(format!("◂ {} ({})", agent.display_name, agent.name))];
            if !agent.installed {
                spans.push(Span::styled(" (not installed)", Style::new().red().bold()));
            }
            spans.push(Span::raw(" ▸"));
            spans
        }
        None => vec![Span::styled("loading agents…", Style::new().dark_gray())],
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::HELP;
    use crate::keymap::{map_key, KeyMode};

    /// Every key of the list and the prompt that does something is in the help, and the help
    /// names no list key that does nothing.
    #[test]
    fn the_help_lists_every_key_of_the_list() {
        let rows: Vec<&(&str, &str)> = HELP.iter().flat_map(|(_, rows)| rows.iter()).collect();
        let tokens: Vec<&str> = rows.iter().flat_map(|(keys, _)| keys.split([' ', '/'])).collect();
        for c in ' '..='~' {
            let action = map_key(KeyMode::List, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            let listed =
                tokens.contains(&c.to_string().as_str()) || (('1'..='9').contains(&c) && tokens.contains(&"1-9"));
            let listed = listed || (c == '/' && rows.iter().any(|(keys, _)| *keys == "/"));
            assert_eq!(action.is_some(), listed, "key {c:?}: {action:?}, in the help: {listed}");
        }
        for (code, token) in [(KeyCode::Esc, "Esc"), (KeyCode::Enter, "Enter"), (KeyCode::Tab, "Tab")] {
            assert!(map_key(KeyMode::List, KeyEvent::new(code, KeyModifiers::NONE)).is_some());
            assert!(tokens.contains(&token), "{token} is not in the help");
        }
        // The focused transcript's own keys are named in the row of the key that focuses it.
        let (_, reading) = rows.iter().find(|(keys, _)| keys.starts_with("v ")).expect("v is in the help");
        for c in ['[', ']', '{', '}'] {
            let action = map_key(KeyMode::Transcript, KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            assert!(action.is_some() && reading.contains(c), "transcript key {c:?}");
        }
        let ctrl_p = KeyEvent::new(KeyCode::Char('p'), KeyModifiers::CONTROL);
        assert!(map_key(KeyMode::Input, ctrl_p).is_some());
        assert!(rows.iter().any(|(keys, _)| keys.contains("Ctrl-P")));
    }
}
