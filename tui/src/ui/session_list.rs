//! The left pane: sessions grouped under their task, with state, agent, age, the server's
//! NEEDS RESUME flag and a PERMISSION badge when a permission request waits for an answer.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use baton_protocol::{SessionInfo, SessionState};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{age, state_style, ViewContext};
use crate::app::{App, Focus};
use crate::sessions::ListItem;

/// Marker, state and age ("5m ago") columns with their spaces: what a row holds besides agent
/// and badges.
const FIXED_WIDTH: usize = 3 + 16 + 1 + 7;
const STATE_WIDTH: usize = 15;
const NEEDS_RESUME: &str = "NEEDS RESUME";
const RESUME_FAILED: &str = "RESUME FAILED";
const PERMISSION: &str = "PERMISSION";
const FAILED_TO_START: &str = "FAILED TO START";
const FORK: &str = "fork";

/// Columns the pane needs (borders included) to show every row whole, task titles included:
/// the list grows into the transcript's side for long agent names and titles, up to the
/// caller's bound.
pub fn wanted_width(app: &App) -> u16 {
    let items = app.sessions.items();
    let widest = session_rows(&items).map(|row| row.status.agent.width() + badges_of(app, row).width()).max();
    let sessions = FIXED_WIDTH + widest.unwrap_or(0);
    let titles = items
        .iter()
        .filter_map(|item| match item {
            ListItem::Task(row) => Some(task_line(row).width()),
            ListItem::Session(_) => None,
        })
        .max()
        .unwrap_or(0);
    (sessions.max(titles) + 2).min(u16::MAX as usize) as u16
}

fn session_rows<'a>(items: &'a [ListItem<'a>]) -> impl Iterator<Item = &'a SessionInfo> + 'a {
    items.iter().filter_map(|item| match item {
        ListItem::Session(row) => Some(*row),
        ListItem::Task(_) => None,
    })
}

fn badges_of(app: &App, row: &SessionInfo) -> Badges {
    let id = row.status.session_id.as_str();
    let resume_failed =
        app.resume_failure(id).is_some() && (row.status.needs_resume || row.status.state == SessionState::Failed);
    Badges {
        needs_resume: row.status.needs_resume && !resume_failed,
        resume_failed,
        permission: app.permission_pending(id),
        resuming: row.status.state == SessionState::Starting && (app.is_resuming(id) || row.status.has_resume_token),
        failed_to_start: crate::sessions::failed_to_start(&row.status).is_some(),
        fork: row.forked_from.is_some(),
        number: app.sessions.number_in_task(id),
    }
}

/// Draws the list; returns the session on each row inside the borders (a task's title: its
/// first session; `None`: nothing), for the mouse.
pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App, ctx: &ViewContext) -> Vec<Option<String>> {
    let focused = matches!(app.focus, Focus::List | Focus::Filter) && app.overlay.is_none();
    let border = if focused { Color::Yellow } else { Color::DarkGray };
    let mut block = Block::bordered().title(" Sessions ").border_style(Style::new().fg(border));
    let typing = app.focus == Focus::Filter && app.overlay.is_none();
    let filter = app.filter.text().replace('\n', " ");
    if typing || !filter.is_empty() {
        // The filter shows on the bottom border, where the cursor sits while it is typed.
        let room = (area.width as usize).saturating_sub(6);
        let shown: String = filter.chars().rev().take(room).collect::<Vec<_>>().into_iter().rev().collect();
        let style = if typing { Style::new().yellow().bold() } else { Style::new().yellow() };
        block = block.title_bottom(Line::from(Span::styled(format!(" /{shown} "), style)));
        if typing {
            let x = area.x + 3 + shown.width() as u16;
            frame.set_cursor_position(ratatui::layout::Position {
                x: x.min(area.right().saturating_sub(1)),
                y: area.bottom().saturating_sub(1),
            });
        }
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);

    if !app.sessions.is_loaded() {
        frame.render_widget(Paragraph::new("loading…".dark_gray()), inner);
        return Vec::new();
    }
    if app.sessions.is_empty() {
        let how = match app.bindings.hint_key(&[crate::config::View::List], "new_task", "n") {
            Some(key) => format!("Press {key} to create a task."),
            None => "No key creates a task: bind new_task in tui.toml.".to_string(),
        };
        let hint = vec![Line::from("No sessions yet.".dark_gray()), Line::from(how.dark_gray())];
        frame.render_widget(Paragraph::new(hint), inner);
        return Vec::new();
    }

    if app.sessions.all_filtered_out() {
        let hint = vec![
            Line::from(format!("No session matches “{}”.", filter.trim()).dark_gray()),
            Line::from("Esc clears the filter.".dark_gray()),
        ];
        frame.render_widget(Paragraph::new(hint), inner);
        return Vec::new();
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
    // Agents line up in a column as wide as the longest name, as far as every row's badges
    // allow; every row cuts a longer name at that column, so ages and badges line up too.
    let room = |badges_width: usize| (inner.width as usize).saturating_sub(FIXED_WIDTH + badges_width);
    let longest_agent = session_rows(&items).map(|row| row.status.agent.width()).max().unwrap_or(0);
    let widest_badges = session_rows(&items).map(|row| badges_of(app, row).width()).max().unwrap_or(0);
    let column = longest_agent.min(room(widest_badges));
    let shown = items.iter().skip(offset).take(height);
    let rows = shown
        .clone()
        .map(|item| match item {
            ListItem::Session(row) => Some(row.status.session_id.clone()),
            // A click on a task's title opens its first session.
            ListItem::Task(row) => Some(row.status.session_id.clone()),
        })
        .collect();
    let lines: Vec<Line<'_>> = shown
        .map(|item| match item {
            ListItem::Task(row) => task_line(row),
            ListItem::Session(row) => {
                let id = row.status.session_id.as_str();
                let is_cursor = Some(id) == cursor_id;
                let is_open = app.opened.as_deref() == Some(id);
                let badges = badges_of(app, row);
                session_line(row, Marks { is_cursor, is_open, badges, agent_width: column }, ctx)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
    rows
}

fn task_line(row: &SessionInfo) -> Line<'_> {
    Line::from(vec![
        Span::styled(row.task_title.as_str(), Style::new().bold()),
        Span::styled(
            format!("  {}", crate::sessions::task_state_name(row.status.task_state)),
            Style::new().dark_gray(),
        ),
    ])
}

#[derive(Clone, Copy)]
struct Badges {
    needs_resume: bool,
    /// The last resume this client asked for failed (the transcript pane says why).
    resume_failed: bool,
    permission: bool,
    /// Starting again with its saved conversation: RESUMING rather than STARTING.
    resuming: bool,
    /// Its agent could not be started (the transcript pane says why; r retries).
    failed_to_start: bool,
    /// It was forked from another session (its header says which).
    fork: bool,
    /// Its number in its task, when the task has several sessions.
    number: Option<usize>,
}

impl Badges {
    fn width(self) -> usize {
        // The other marks (a permission request too) take the state's column.
        let number = self.number.map_or(0, |n| format!(" #{n}").len());
        number + if self.fork { FORK.len() + 1 } else { 0 }
    }
}

#[derive(Clone, Copy)]
struct Marks {
    is_cursor: bool,
    is_open: bool,
    badges: Badges,
    /// Columns for the agent's name.
    agent_width: usize,
}

fn session_line(row: &SessionInfo, marks: Marks, ctx: &ViewContext) -> Line<'static> {
    let status = &row.status;
    let marker = format!("{}{} ", if marks.is_cursor { "›" } else { " " }, if marks.is_open { "●" } else { " " });
    let badge_style = |bg: Color| Style::new().fg(Color::Black).bg(bg).add_modifier(Modifier::BOLD);
    // What needs the user's attention takes the state's place, as a badge: not colour alone.
    // A permission request matters more than the state it interrupts ("working"): it takes the
    // state's column, so the list needs no extra width for it.
    let (state, style) = if marks.badges.permission {
        (PERMISSION, badge_style(Color::Magenta))
    } else if marks.badges.resume_failed {
        (RESUME_FAILED, badge_style(Color::Red))
    } else if marks.badges.needs_resume {
        (NEEDS_RESUME, badge_style(Color::Yellow))
    } else if marks.badges.failed_to_start {
        (FAILED_TO_START, badge_style(Color::Red))
    } else if marks.badges.resuming {
        ("resuming", state_style(status.state))
    } else {
        (crate::sessions::status_name(status), state_style(status.state))
    };
    let mut spans = vec![
        Span::raw(marker),
        Span::styled(state.to_string(), style),
        Span::raw(" ".repeat(STATE_WIDTH.saturating_sub(state.width()) + 1)),
        Span::raw(format!("{} ", fit(&status.agent, marks.agent_width))),
        // The age of the session: when it was started.
        Span::styled(format!("{:>7}", format!("{} ago", age(&row.created_at, ctx.now))), Style::new().dark_gray()),
    ];
    if let Some(number) = marks.badges.number {
        spans.push(Span::styled(format!(" #{number}"), Style::new().bold()));
    }
    if marks.badges.fork {
        spans.extend([Span::raw(" "), Span::styled(FORK, Style::new().fg(Color::Magenta))]);
    }
    let line = Line::from(spans);
    if marks.is_cursor {
        // A 256-colour grey, not 24-bit: tmux, screen and SSH terminals may have no true colour.
        line.style(Style::new().bg(Color::Indexed(236)))
    } else {
        line
    }
}

/// `text` padded or cut to exactly `width` columns; a cut ends in '…'.
fn fit(text: &str, width: usize) -> String {
    if text.width() <= width {
        return format!("{text}{}", " ".repeat(width - text.width()));
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
        used += 1;
    }
    out + &" ".repeat(width.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn names_are_padded_or_cut_with_an_ellipsis() {
        assert_eq!(fit("mock", 6), "mock  ");
        assert_eq!(fit("claude-code", 11), "claude-code");
        assert_eq!(fit("claude-code", 7), "claude…");
        assert_eq!(fit("claude-code", 0), "");
    }
}
