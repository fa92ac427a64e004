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
use crate::config::{Bindings, View};
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
        let mode = app.key_mode();
        let sets: Vec<String> = hints(mode, selected.map(|(label, _)| label))
            .iter()
            .map(|template| fill_hint(template, crate::keymap::bound_views(mode), &app.bindings))
            .collect();
        if let Some(hint) = sets.iter().find(|hint| hint.width() <= room) {
            if let Some(last) = rows.last_mut() {
                last.spans.extend([separator, Span::styled(hint.clone(), style)]);
            }
        } else if rows.len() < max_rows {
            let fits = sets.iter().find(|hint| hint.width() < width).or(sets.last()).cloned().unwrap_or_default();
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
/// the fullest set to the shortest; the status bar shows the first that fits. `%action:key%`
/// names an action's key (see [`fill_hint`]): the key as the user's `tui.toml` binds it.
fn hints(mode: KeyMode, selected: Option<&str>) -> &'static [&'static str] {
    match mode {
        KeyMode::List if selected == Some(WORKING) => &[
            "%escape:esc% cancel the turn · %write:i% write · %help:?% help · %quit:q% quit",
            "%escape:esc% cancel · %help:?% help",
            "%help:?% help",
        ],
        KeyMode::List if selected == Some(FAILED_TO_START) => &[
            "%resume:r% retry · %open:enter% open (says why) · %help:?% help · %quit:q% quit",
            "%resume:r% retry · %help:?% help",
            "%help:?% help",
        ],
        KeyMode::List if selected == Some(RESUME_FAILED) => &[
            "%resume:r% retry · %resume_fresh:R% start fresh · %help:?% help · %quit:q% quit",
            "%resume:r% retry · %resume_fresh:R% fresh",
            "%help:?% help",
        ],
        KeyMode::List if selected == Some(NEEDS_RESUME) => &[
            "%open:enter% open and resume · %resume:r% resume · %help:?% help · %quit:q% quit",
            "%open:enter% resume · %help:?% help",
            "%help:?% help",
        ],
        // No session to open yet: what makes one.
        KeyMode::List if selected.is_none() => &[
            "%new_task:n% new task · %archived:z% archived · %help:?% help · %quit:q% quit",
            "%new_task:n% new task · %help:?% help",
            "%help:?% help",
        ],
        KeyMode::List => &[
            "%open:enter% open · %write:i% write · %start_session:S% new session · %help:?% help · %quit:q% quit",
            "%open:enter% open · %help:?% help",
            "%help:?% help",
        ],
        KeyMode::Permission => &[
            "%allow:y% allow · %reject:N% reject · 1-9 pick an option · %help:?% help",
            "%allow:y% allow · %reject:N% reject",
            "%allow:y%/%reject:N%",
        ],
        KeyMode::Transcript => &[
            "%line_down:j%/%line_up:k% scroll · %prev_entry:[% %next_entry:]% entries · %prev_tool_call:{% %next_tool_call:}% tool calls · %expand:enter% expand · %leave:esc% back",
            "%prev_entry:[% %next_entry:]% %prev_tool_call:{% %next_tool_call:}% select · %expand:enter% expand · %leave:esc% back",
            "%leave:esc% back",
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
        KeyMode::Approvals => &[
            "%move_down:j%/%move_up:k% move · %allow:y% allow · %reject:N% reject · 1-9 option · %open:enter% open · %close:esc% close",
            "%allow:y%/%reject:N% · %close:esc% close",
        ],
        KeyMode::Rules => &[
            "%move_down:j%/%move_up:k% move · %revoke:x% revoke · %close:esc% close",
            "%revoke:x% revoke · %close:esc% close",
        ],
        KeyMode::Options => &[
            "%move_down:j%/%move_up:k% move · %pick:enter% switch · %close:esc% close",
            "%pick:enter% switch · %close:esc% close",
        ],
        KeyMode::HandOver => &[
            "%move_down:j%/%move_up:k% move · %pick:enter% start a session with it · %close:esc% close",
            "%pick:enter% start · %close:esc% close",
        ],
        KeyMode::Queue => &[
            "%move_down:j%/%move_up:k% move · %edit:e% edit · %remove:x% remove · %release:r% send the next · %close:esc% close",
            "%edit:e% edit · %remove:x% remove · %close:esc% close",
        ],
        KeyMode::Devices => &[
            "%move_down:j%/%move_up:k% move · %pair:n% pair a phone · %revoke:x% revoke · %close:esc% close",
            "%pair:n% pair · %revoke:x% revoke · %close:esc% close",
        ],
        KeyMode::Search => &["type to search · ↑/↓ choose · Enter open · Esc close", "Enter open · Esc close"],
        KeyMode::Export => &["Enter export · Tab format · Esc cancel", "Enter export · Esc cancel"],
        KeyMode::Archived => &[
            "%move_down:j%/%move_up:k% move · %unarchive:u% unarchive · %close:esc% close",
            "%unarchive:u% unarchive · %close:esc% close",
        ],
        KeyMode::Changes => &[
            "%move_down:j%/%move_up:k% file · %next_hunk:n%/%prev_hunk:N% hunk · %line_down:J%/%line_up:K% %page_up:pgup%/%page_down:pgdn% scroll · %keep:space% keep · %commit:c% commit · %merge:m%/%merge_and_remove:M% merge · %pull_request:P% pull request · %shell:!% shell · %close:esc% close",
            "%move_down:j%/%move_up:k% file · %next_hunk:n%/%prev_hunk:N% hunk · %commit:c% commit · %merge:m% merge · %close:esc% close",
            "%commit:c% commit · %merge:m% merge · %close:esc% close",
        ],
        KeyMode::CommitMessage => &["Enter commit · Esc cancel"],
    }
}

/// A hint with each `%action:key%` replaced by the action's key as `bindings` has it (`key`
/// while it is still bound to the action, as the defaults have it). A part (between " · ")
/// naming an action that has no key is left out.
pub fn fill_hint(template: &str, views: &[View], bindings: &Bindings) -> String {
    let parts: Vec<String> = template
        .split(" · ")
        .filter_map(|part| {
            let mut out = String::new();
            let mut rest = part;
            while let Some(start) = rest.find('%') {
                out.push_str(&rest[..start]);
                let token = &rest[start + 1..];
                let Some(end) = token.find('%') else {
                    out.push_str(&rest[start..]);
                    rest = "";
                    break;
                };
                let (name, preferred) = token[..end].split_once(':').unwrap_or((&token[..end], ""));
                out.push_str(&bindings.hint_key(views, name, preferred)?);
                rest = &token[end + 1..];
            }
            out.push_str(rest);
            Some(out)
        })
        .collect();
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_keys_tui_toml_binds_and_leave_out_actions_without_one() {
        let defaults = Bindings::default();
        let template = "%new_task:n% new task · %archived:z% archived · %help:?% help";
        assert_eq!(fill_hint(template, &[View::List], &defaults), "n new task · z archived · ? help");
        let mine = crate::config::parse("[keys]\nnew_task = \"+\"\narchived = []\n", false).expect("parses").bindings;
        assert_eq!(fill_hint(template, &[View::List], &mine), "+ new task · ? help");
        let transcript = "%line_down:j%/%line_up:k% scroll · %leave:esc% back";
        assert_eq!(fill_hint(transcript, &[View::Transcript, View::List], &defaults), "j/k scroll · Esc back");
        let mine = crate::config::parse("[transcript_keys]\nleave = \"v\"\nline_down = \"down\"\n", false)
            .expect("parses")
            .bindings;
        assert_eq!(fill_hint(transcript, &[View::Transcript, View::List], &mine), "↓/k scroll · v back");
        let changes = "%commit:c% commit · %close:esc% close";
        let mine = crate::config::parse("[changes_keys]\ncommit = \"C\"\n", false).expect("parses").bindings;
        assert_eq!(fill_hint(changes, &[View::Changes], &mine), "C commit · Esc close");
    }

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
