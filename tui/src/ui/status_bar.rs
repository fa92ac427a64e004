//! The bottom lines: server, connection state (with what is wrong, when something is), and a
//! message or the keys that matter now. Wrapped to the screen's width; an error too long for
//! one row is cut to one, with "E: details" (`E` shows it whole).

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::ViewContext;
use crate::app::{App, ConnectionState};
use crate::keymap::KeyMode;
use crate::layout::wrap::wrap;
use crate::sessions::is_working;
use baton_protocol::SessionState;

/// The status never takes more than this share of the screen (1/3); a longer message is also
/// in baton-tui.log.
const MAX_SHARE: u16 = 3;

/// The status rows for a screen `width` columns wide and `height` rows high.
pub fn rows(app: &App, ctx: &ViewContext, width: u16, height: u16) -> Vec<Line<'static>> {
    let separator = Span::styled(" │ ", Style::new().dark_gray());
    // On a narrow screen the address is left out while connected: it matters when something is
    // wrong, and the room goes to what needs the user and the keys.
    let connected = app.connection == crate::app::ConnectionState::Connected;
    let mut spans = if connected && width < crate::app::NARROW_WIDTH {
        vec![Span::raw(" "), connection(&app.connection, ctx)]
    } else {
        vec![Span::raw(format!(" {}", app.server_url)), separator.clone(), connection(&app.connection, ctx)]
    };
    let (asks, turns, unloaded) = app.needs_you_split();
    // A message (gone after a few seconds) keeps its room: it is read once, the count stays.
    if asks + turns + unloaded > 0 && app.flash.is_none() {
        // `w` jumps to them; the words say it, not the colour alone. What asks something is
        // told apart from a turn that finished (which looking at it clears).
        let urgent = Style::new().fg(Color::Yellow).add_modifier(ratatui::style::Modifier::BOLD);
        let mut counts = Vec::new();
        if asks > 0 {
            counts.push(Span::styled(format!("{asks} ask{} you", if asks == 1 { "s" } else { "" }), urgent));
        }
        if turns > 0 {
            counts.push(Span::styled(format!("{turns} your turn"), Style::new().fg(Color::Cyan)));
        }
        if unloaded > 0 {
            counts.push(Span::styled(format!("{unloaded} more need you"), urgent));
        }
        for (i, count) in counts.into_iter().enumerate() {
            spans.push(if i == 0 { separator.clone() } else { Span::styled(" · ", Style::new().dark_gray()) });
            spans.push(count);
        }
    }
    let selected = selected_state(app);
    if let Some((label, style)) = selected {
        spans.extend([separator.clone(), Span::styled(label, style)]);
    }
    // What every agent reported, summed: shown only when one reported something.
    if let Some(total) = app.total_usage().filter(|_| app.flash.is_none()) {
        spans.extend([separator.clone(), Span::styled(format!("Σ {total}"), Style::new().fg(Color::Cyan))]);
    }
    let width = width as usize;
    let max_rows = (height / MAX_SHARE).max(1) as usize;
    let Some(flash) = &app.flash else {
        // The keys of the current view come last, as many as fit: what is wrong matters more.
        // When the last row has no room for them they get a row of their own (as many keys as
        // fit that row), never a separator left at the start of a row.
        let mut rows = wrap(&Line::from(spans), width);
        let room = rows.last().map_or(width, |row| width.saturating_sub(row.width() + separator.width()));
        let style = Style::new().dark_gray();
        let sets = hints(app.key_mode(), selected.map(|(label, _)| label));
        if let Some(hint) = sets.iter().find(|hint| hint.width() <= room) {
            if let Some(last) = rows.last_mut() {
                last.spans.extend([separator, Span::styled(*hint, style)]);
            }
        } else if rows.len() < max_rows {
            let fits = sets.iter().find(|hint| hint.width() < width).or(sets.last()).copied().unwrap_or_default();
            rows.push(Line::from(Span::styled(format!(" {fits}"), style)));
        }
        rows.truncate(max_rows);
        return rows;
    };
    spans.push(separator);
    let style = Style::new().fg(if flash.is_error { Color::Red } else { Color::Green });
    if flash.is_error {
        return error_rows(spans, &flash.text, style, width);
    }
    // A message of several lines (a server's error output) keeps its lines.
    let mut lines = flash.text.split('\n');
    spans.push(Span::styled(lines.next().unwrap_or_default().to_string(), style));
    let mut rows = wrap(&Line::from(spans), width);
    for line in lines {
        rows.extend(wrap(&Line::from(Span::styled(format!("   {line}"), style)), width));
    }
    rows.truncate(max_rows);
    rows
}

/// What the status line says after a cut error: the key that shows it whole.
pub const DETAILS_HINT: &str = "E: details";

/// An error next to the status when it fits there; else on a row of its own, whole when it fits
/// the width, else cut with an ellipsis and the hint for `E`. Never more than one row of it.
fn error_rows(mut spans: Vec<Span<'static>>, text: &str, style: Style, width: usize) -> Vec<Line<'static>> {
    let text = text.trim_end();
    let single_line = !text.contains('\n');
    let status_width: usize = spans.iter().map(|span| span.width()).sum();
    if single_line && status_width + text.width() <= width {
        spans.push(Span::styled(text.to_string(), style));
        return vec![Line::from(spans)];
    }
    // The separator before the message goes with it to the next row.
    spans.pop();
    let mut rows = wrap(&Line::from(spans), width);
    let first = text.lines().next().unwrap_or_default();
    let row = match shorten(first, width.saturating_sub(1), single_line) {
        Shortened::Whole(text) => Line::from(Span::styled(format!(" {text}"), style)),
        Shortened::Cut(text) => Line::from(vec![
            Span::styled(format!(" {text}"), style),
            Span::styled(format!(" {DETAILS_HINT}"), Style::new().fg(Color::Yellow)),
        ]),
    };
    rows.push(row);
    rows
}

#[derive(Debug, PartialEq, Eq)]
enum Shortened {
    Whole(String),
    /// Cut, ending in '…', leaving room for the hint.
    Cut(String),
}

/// `text` on one row of `width` columns: whole when it fits and is `complete` (nothing follows
/// it), else as much as fits before "…" and the hint.
fn shorten(text: &str, width: usize, complete: bool) -> Shortened {
    if complete && text.width() <= width {
        return Shortened::Whole(text.to_string());
    }
    let room = width.saturating_sub(DETAILS_HINT.width() + 2);
    let mut out = String::new();
    let mut used = 0;
    for c in text.trim_end().chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > room {
            break;
        }
        out.push(c);
        used += w;
    }
    Shortened::Cut(format!("{}…", out.trim_end()))
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, rows: Vec<Line<'static>>) {
    frame.render_widget(Paragraph::new(rows), area);
}

fn connection(state: &ConnectionState, ctx: &ViewContext) -> Span<'static> {
    match state {
        ConnectionState::Connected => Span::styled("● connected", Style::new().green()),
        ConnectionState::Connecting => Span::styled("◌ connecting…", Style::new().yellow()),
        ConnectionState::Reconnecting { retry_at, problem } => {
            let wait = retry_at.saturating_duration_since(ctx.instant);
            let when = if wait.is_zero() {
                "connecting…".to_string()
            } else {
                // Rounded up: "in 0s" would read as "now" while we still wait.
                format!("reconnecting in {}s", wait.as_millis().div_ceil(1000))
            };
            let text = match problem {
                Some(problem) => format!("○ {problem}; {when}"),
                None => format!("○ {when}"),
            };
            Span::styled(text, Style::new().yellow())
        }
        ConnectionState::Offline { reason } => Span::styled(format!("○ offline: {reason}"), Style::new().red()),
    }
}

/// The state of the session under the list cursor, as the list's badge says it.
fn selected_state(app: &App) -> Option<(&'static str, Style)> {
    let row = app.sessions.cursor()?;
    let id = row.status.session_id.as_str();
    let status = &row.status;
    Some(if app.resume_failure(id).is_some() && status.needs_resume {
        (RESUME_FAILED, Style::new().fg(Color::Red))
    } else if crate::sessions::failed_to_start(status).is_some() {
        (FAILED_TO_START, Style::new().fg(Color::Red))
    } else if status.needs_resume {
        (NEEDS_RESUME, Style::new().fg(Color::Yellow))
    } else if status.state == SessionState::Starting && (app.is_resuming(id) || status.has_resume_token) {
        ("resuming", Style::new().fg(Color::Yellow))
    } else if is_working(status) {
        (WORKING, super::state_style(status.state))
    } else {
        (crate::sessions::status_name(status), super::state_style(status.state))
    })
}

const NEEDS_RESUME: &str = "NEEDS RESUME";
const WORKING: &str = "working";
const RESUME_FAILED: &str = "RESUME FAILED";
const FAILED_TO_START: &str = "FAILED TO START";

/// The keys that matter in a mode (and, in the list, for the selected session's state), from
/// the fullest set to the shortest; the status bar shows the first that fits.
fn hints(mode: KeyMode, selected: Option<&str>) -> &'static [&'static str] {
    match mode {
        KeyMode::List if selected == Some(WORKING) => {
            &["Esc cancel the turn · i write · ? help · q quit", "Esc cancel · ? help", "? help"]
        }
        KeyMode::List if selected == Some(FAILED_TO_START) => {
            &["r retry · Enter open (says why) · ? help · q quit", "r retry · ? help", "? help"]
        }
        KeyMode::List if selected == Some(RESUME_FAILED) => {
            &["r retry · R start fresh · ? help · q quit", "r retry · R fresh", "? help"]
        }
        KeyMode::List if selected == Some(NEEDS_RESUME) => {
            &["Enter open and resume · r resume · ? help · q quit", "Enter resume · ? help", "? help"]
        }
        // No session to open yet: what makes one.
        KeyMode::List if selected.is_none() => {
            &["n new task · z archived · ? help · q quit", "n new task · ? help", "? help"]
        }
        KeyMode::List => &["Enter open · i write · S new session · ? help · q quit", "Enter open · ? help", "? help"],
        KeyMode::Permission => &["y allow · N reject · 1-9 pick an option · ? help", "y allow · N reject", "y/N"],
        KeyMode::Transcript => &[
            "j/k scroll · [ ] entries · { } tool calls · Enter expand · Esc back",
            "[ ] { } select · Enter expand · Esc back",
            "Esc back",
        ],
        KeyMode::Input => &[
            "Enter send · Ctrl-S steer · Esc back to the list · Ctrl-C clears",
            "Enter send · Ctrl-S steer · Esc back",
            "Enter send · Esc back",
            "Esc back",
        ],
        KeyMode::Filter => {
            &["type to filter by title, agent or state · Enter keep · Esc clear", "Enter keep · Esc clear", "Esc clear"]
        }
        KeyMode::Help => &["↑/↓ scroll · Esc close", "Esc close"],
        KeyMode::ErrorDetails => &["j/k PgUp/PgDn scroll · Esc close", "Esc close"],
        KeyMode::Confirm => &["y confirm · n cancel"],
        KeyMode::Form => &["Enter create · Tab next field · Esc cancel", "Enter create · Esc cancel"],
        KeyMode::Approvals => {
            &["j/k move · y allow · N reject · 1-9 option · Enter open · Esc close", "y/N · Esc close"]
        }
        KeyMode::Rules => &["j/k move · x revoke · Esc close", "x revoke · Esc close"],
        KeyMode::Options => &["j/k move · Enter switch · Esc close", "Enter switch · Esc close"],
        KeyMode::HandOver => &["j/k move · Enter start a session with it · Esc close", "Enter start · Esc close"],
        KeyMode::Queue => {
            &["j/k move · e edit · x remove · r send the next · Esc close", "e edit · x remove · Esc close"]
        }
        KeyMode::Devices => &["j/k move · n pair a phone · x revoke · Esc close", "n pair · x revoke · Esc close"],
        KeyMode::Search => &["type to search · ↑/↓ choose · Enter open · Esc close", "Enter open · Esc close"],
        KeyMode::Export => &["Enter export · Tab format · Esc cancel", "Enter export · Esc cancel"],
        KeyMode::Archived => &["j/k move · u unarchive · Esc close", "u unarchive · Esc close"],
        KeyMode::Changes => &[
            "j/k file · n/N hunk · J/K PgUp/PgDn scroll · Space keep · c commit · m/M merge · P pull request · ! shell · Esc close",
            "j/k file · n/N hunk · c commit · m merge · Esc close",
            "c commit · m merge · Esc close",
        ],
        KeyMode::CommitMessage => &["Enter commit · Esc cancel"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_that_fits_is_whole_and_a_long_one_is_cut_before_the_hint() {
        assert_eq!(shorten("no session selected", 40, true), Shortened::Whole("no session selected".into()));
        let long = "could not resume: the agent did not become ready within 90 s";
        let Shortened::Cut(cut) = shorten(long, 40, true) else { panic!("not cut") };
        assert!(cut.ends_with('…') && long.starts_with(cut.trim_end_matches('…')), "{cut}");
        // The cut text, a space and the hint fit the row.
        assert!(cut.width() + 1 + DETAILS_HINT.width() <= 40, "{cut}");
        // A first line that fits is still cut when more lines follow.
        assert_eq!(shorten("failed:", 40, false), Shortened::Cut("failed:…".into()));
    }
}
