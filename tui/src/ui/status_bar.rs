//! The bottom line: server, connection state, and a message or the keys that matter now.

use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::ViewContext;
use crate::app::{App, ConnectionState};
use crate::keymap::KeyMode;

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App, ctx: &ViewContext) {
    let separator = Span::styled(" │ ", Style::new().dark_gray());
    let mut spans =
        vec![Span::raw(format!(" {}", app.server_url)), separator.clone(), connection(&app.connection, ctx), separator];
    match &app.flash {
        Some(flash) => {
            let color = if flash.is_error { Color::Red } else { Color::Green };
            spans.push(Span::styled(flash.text.clone(), Style::new().fg(color)));
        }
        None => spans.push(Span::styled(hints(app.key_mode()), Style::new().dark_gray())),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn connection(state: &ConnectionState, ctx: &ViewContext) -> Span<'static> {
    match state {
        ConnectionState::Connected => Span::styled("● connected", Style::new().green()),
        ConnectionState::Connecting => Span::styled("◌ connecting…", Style::new().yellow()),
        ConnectionState::Reconnecting { retry_at } => {
            let wait = retry_at.saturating_duration_since(ctx.instant);
            if wait.is_zero() {
                Span::styled("◌ connecting…", Style::new().yellow())
            } else {
                // Rounded up: "in 0s" would read as "now" while we still wait.
                let secs = wait.as_millis().div_ceil(1000);
                Span::styled(format!("○ reconnecting in {secs}s"), Style::new().yellow())
            }
        }
        ConnectionState::Offline { reason } => Span::styled(format!("○ offline: {reason}"), Style::new().red()),
    }
}

fn hints(mode: KeyMode) -> &'static str {
    match mode {
        KeyMode::List => "Enter open · i write · r resume · ? help · q quit",
        KeyMode::Input => "Enter send · Esc back to the list",
        KeyMode::Help => "Esc close",
        KeyMode::Confirm => "y confirm · n cancel",
        KeyMode::Form => "Enter create · Tab next field · Esc cancel",
    }
}
