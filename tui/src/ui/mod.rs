//! Drawing: functions that borrow the app for one frame and never change it or do I/O. Time
//! comes in through [`ViewContext`], so a frame is a pure function of state and clock (which is
//! what makes the snapshots reproducible).

mod approvals;
mod changes;
mod devices;
mod export;
mod overlays;
mod prompt;
mod search;
mod session_list;
mod status_bar;
mod transcript;

use std::time::Instant;

use baton_protocol::SessionState;
use chrono::{DateTime, Utc};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use crate::app::{App, FrameMetrics, Panes, NARROW_WIDTH};
use crate::layout::wrap;

/// The clock a frame is drawn at.
#[derive(Debug, Clone, Copy)]
pub struct ViewContext {
    /// For ages ("3m").
    pub now: DateTime<Utc>,
    /// For countdowns ("reconnecting in 4s").
    pub instant: Instant,
}

impl ViewContext {
    pub fn current() -> Self {
        ViewContext { now: Utc::now(), instant: Instant::now() }
    }
}

/// Draws the whole screen and returns the sizes the app needs for scrolling.
pub fn draw(frame: &mut Frame<'_>, app: &App, ctx: &ViewContext) -> FrameMetrics {
    let area = frame.area();
    let prompt_height = prompt::height(app);
    let status_rows = status_bar::rows(app, ctx, area.width, area.height);
    let status_height = status_rows.len() as u16;
    let [main, prompt_area, status_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(prompt_height), Constraint::Length(status_height)])
            .areas(area);
    // The list is as wide as its rows need (long agent names widen it), within 30 columns and
    // 45% of the screen: the transcript keeps the larger part. A narrow screen shows one of
    // them, whole.
    let narrow = area.width < NARROW_WIDTH;
    let session_alone = narrow
        && app.opened_session().is_some()
        && (app.narrow_shows_session || matches!(app.focus, crate::app::Focus::Input | crate::app::Focus::Transcript));
    let list_width = if narrow {
        if session_alone {
            0
        } else {
            area.width
        }
    } else {
        let cap = (area.width.saturating_mul(9) / 20).max(LIST_MIN_WIDTH);
        session_list::wanted_width(app).clamp(LIST_MIN_WIDTH, cap).min(area.width / 2)
    };
    let [list_area, transcript_area] =
        Layout::horizontal([Constraint::Length(list_width), Constraint::Min(0)]).areas(main);

    let list_rows = if list_area.width > 0 { session_list::draw(frame, list_area, app, ctx) } else { Vec::new() };
    let mut metrics = if transcript_area.width > 0 {
        session_pane(frame, transcript_area, app)
    } else {
        FrameMetrics { transcript_scroll: app.scroll, ..FrameMetrics::default() }
    };
    metrics.screen_height = area.height as usize;
    metrics.screen_width = area.width as usize;
    let drawn = |rect: Rect| (rect.width > 0 && rect.height > 0).then_some(rect);
    metrics.panes =
        Panes { list: drawn(list_area), list_rows, transcript: drawn(transcript_area), prompt: drawn(prompt_area) };
    prompt::draw(frame, prompt_area, app);
    status_bar::draw(frame, status_area, status_rows);
    metrics.overlay_max_scroll = overlays::draw(frame, area, app, ctx);
    approvals::draw(frame, area, app, ctx.now);
    if let Some(crate::app::Overlay::Changes(view)) = app.overlay() {
        // Over everything but the status bar, which shows the view's keys.
        let above_status = Rect { height: area.height.saturating_sub(status_height), ..area };
        changes::draw(frame, above_status, view);
    }
    app.theme.apply(frame.buffer_mut());
    metrics
}

/// The opened session: its transcript, with the boxes that ask for something under it.
fn session_pane(frame: &mut Frame<'_>, transcript_area: Rect, app: &App) -> FrameMetrics {
    // Boxes under the transcript that ask for something: a failed resume, a permission request.
    let inner_width = transcript_area.width.saturating_sub(2) as usize;
    let banners: Vec<(&str, Color, Vec<Line<'static>>)> = [
        (" Resume failed ", Color::Red, resume_banner(app, inner_width)),
        (" Failed to start ", Color::Red, start_failure_banner(app, inner_width)),
        (
            PERMISSION_TITLE,
            Color::Magenta,
            permission_banner(app, inner_width, transcript_area.height.saturating_sub(QUESTION_LEAVES + 2) as usize),
        ),
        (" Queued ", Color::Cyan, queue_banner(app, inner_width)),
    ]
    .into_iter()
    .filter(|(_, _, lines)| !lines.is_empty())
    .collect();
    // A permission request may take all but a few rows of the pane: what it would approve is
    // what matters now. The other boxes take half of it at most.
    let asking = banners.iter().any(|(title, _, _)| *title == PERMISSION_TITLE);
    let mut room =
        if asking { transcript_area.height.saturating_sub(QUESTION_LEAVES) } else { transcript_area.height / 2 };
    let mut heights = Vec::new();
    for (_, _, lines) in &banners {
        let height = (lines.len() as u16 + 2).min(room);
        room -= height;
        heights.push(height);
    }
    let mut constraints = vec![Constraint::Min(3)];
    constraints.extend(heights.iter().map(|h| Constraint::Length(*h)));
    let areas = Layout::vertical(constraints).split(transcript_area);
    let metrics = transcript::draw(frame, areas[0], app);
    for ((title, color, lines), area) in banners.into_iter().zip(areas.iter().skip(1)) {
        let block = Block::bordered().title(title).border_style(Style::new().fg(color));
        frame.render_widget(Paragraph::new(lines).block(block), *area);
    }
    metrics
}

/// Why the opened session's last resume failed and what the keys do about it, wrapped to
/// `width`; empty when it did not fail.
fn resume_banner(app: &App, width: usize) -> Vec<Line<'static>> {
    let Some(session_id) = app.opened_session() else {
        return Vec::new();
    };
    let Some(why) = app.resume_failure(session_id) else {
        return Vec::new();
    };
    let Some(row) = app.sessions.get(session_id) else {
        return Vec::new();
    };
    let red = Style::new().fg(Color::Red);
    let why = why.unwrap_or("asking the server why…");
    let mut lines: Vec<Line<'static>> =
        why.lines().flat_map(|line| wrap::wrap(&Line::styled(line.to_string(), red), width)).collect();
    let keys = if row.status.needs_resume {
        "r retry · R start fresh with the conversation so far"
    } else if row.status.state == SessionState::Failed {
        "the session failed: S starts a new session of its task"
    } else {
        return Vec::new();
    };
    lines.extend(wrap::wrap(&Line::styled(keys, Style::new().fg(Color::Yellow)), width));
    lines
}

/// The opened session's queued messages, one row each (the first line of each, cut to the
/// width), and why the queue waits when it is held.
fn queue_banner(app: &App, width: usize) -> Vec<Line<'static>> {
    let Some(queue) = app.opened_session().and_then(|id| app.queue_of(id)) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if let Some(held) = &queue.held {
        lines.extend(wrap::wrap(&Line::styled(format!("Held: {held}"), Style::new().fg(Color::Yellow)), width));
    }
    const SHOWN: usize = 3;
    for (i, message) in queue.messages.iter().take(SHOWN).enumerate() {
        let first = message.text.lines().next().unwrap_or_default();
        let steer = if message.steer { "steer · " } else { "" };
        let row: String = format!("{}. {steer}{first}", i + 1).chars().take(width).collect();
        lines.push(Line::from(row));
    }
    let more = queue.messages.len().saturating_sub(SHOWN);
    let keys =
        if more > 0 { format!("… {more} more · u manage the queue") } else { "u manage the queue".to_string() };
    lines.push(Line::styled(keys, Style::new().fg(Color::DarkGray)));
    lines
}

/// Why the opened session's agent could not be started, and the key that retries.
fn start_failure_banner(app: &App, width: usize) -> Vec<Line<'static>> {
    let Some(row) = app.opened_session().and_then(|id| app.sessions.get(id)) else {
        return Vec::new();
    };
    if app.resume_failure(&row.status.session_id).is_some() {
        return Vec::new(); // the resume banner says it
    }
    let Some(why) = crate::sessions::failed_to_start(&row.status) else {
        return Vec::new();
    };
    let red = Style::new().fg(Color::Red);
    let mut lines: Vec<Line<'static>> =
        why.lines().flat_map(|line| wrap::wrap(&Line::styled(line.to_string(), red), width)).collect();
    let keys = "r retry · e rename · D delete the task";
    lines.extend(wrap::wrap(&Line::styled(keys, Style::new().fg(Color::Yellow)), width));
    lines
}

/// The session list is never narrower than this beside the transcript.
const LIST_MIN_WIDTH: u16 = 30;

const PERMISSION_TITLE: &str = " Permission requested ";
/// Rows of the pane left to the transcript, borders included, under a permission request.
const QUESTION_LEAVES: u16 = 4;

/// Rows of a diff the permission box shows before "… N more rows" (the approval queue, `A`,
/// shows more).
const BANNER_DIFF_ROWS: usize = 8;

/// The opened session's pending permission request as a dialog: what the agent wants to do,
/// the options, and the keys that answer from where the focus is.
fn permission_banner(app: &App, width: usize, max_rows: usize) -> Vec<Line<'static>> {
    let Some(session_id) = app.opened_session() else {
        return Vec::new();
    };
    if !app.permission_pending(session_id) {
        return Vec::new();
    }
    let Some(permission) = app.opened_transcript().and_then(|t| t.pending_permission()) else {
        return Vec::new();
    };
    let mut lines = wrap::wrap(
        &Line::from(permission.title.clone()).style(Style::new().add_modifier(ratatui::style::Modifier::BOLD)),
        width,
    );
    let mut answer = approvals::option_rows(&permission.options, width, Style::new());
    let keys = if app.focus == crate::app::Focus::Input {
        "Esc, then y allow · N reject · 1-9 choose (or Alt-y, Alt-N)"
    } else {
        "y allow · N reject · 1-9 choose"
    };
    answer.extend(wrap::wrap(&Line::styled(keys, Style::new().fg(Color::Magenta)), width));
    // What would be approved, where the question is asked: the input and the diff, as far as
    // the box has room with the options and keys kept whole.
    let mut details = approvals::tool_call_details(&permission.tool_call, width, BANNER_DIFF_ROWS);
    let room = max_rows.saturating_sub(lines.len() + answer.len());
    if details.len() > room {
        details.truncate(room.saturating_sub(1));
        if room > 0 {
            details.push(Line::styled("… the rest in the approval queue (A)", Style::new().fg(Color::DarkGray)));
        }
    }
    lines.extend(details);
    lines.extend(answer);
    lines
}

pub(crate) fn state_style(state: SessionState) -> Style {
    let color = match state {
        SessionState::Created => Color::Gray,
        SessionState::Starting => Color::Yellow,
        SessionState::Running => Color::Green,
        SessionState::WaitingForInput => Color::Cyan,
        SessionState::Completed => Color::DarkGray,
        SessionState::Failed => Color::Red,
        SessionState::Cancelled => Color::DarkGray,
    };
    Style::new().fg(color)
}

/// "12s", "5m", "3h", "2d": how long ago an RFC 3339 time was; "?" when it cannot be read.
pub(crate) fn age(since: &str, now: DateTime<Utc>) -> String {
    let Ok(then) = DateTime::parse_from_rfc3339(since) else {
        return "?".into();
    };
    let secs = (now - then.with_timezone(&Utc)).num_seconds().max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

/// A `width` x `height` rectangle centred in `area`, shrunk to fit.
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        let now = DateTime::parse_from_rfc3339("2026-11-29T18:00:00Z").map(|t| t.with_timezone(&Utc)).unwrap();
        assert_eq!(age("2026-11-29T17:59:48Z", now), "12s");
        assert_eq!(age("2026-11-29T17:55:00.000Z", now), "5m");
        assert_eq!(age("2026-11-29T15:00:00+00:00", now), "3h");
        assert_eq!(age("2026-11-27T18:00:00Z", now), "2d");
        assert_eq!(age("yesterday", now), "?");
    }
}
