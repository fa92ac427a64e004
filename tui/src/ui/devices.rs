//! The paired devices (`p`) and a pairing code's QR code, drawn over the screen.

use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::{age, centered};
use crate::app::{DevicesView, Pairing};
use crate::layout::wrap::wrap;

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn draw(frame: &mut Frame<'_>, area: Rect, view: &DevicesView, now: DateTime<Utc>) {
    match &view.pairing {
        Some(pairing) => pairing_box(frame, area, pairing),
        None => list_box(frame, area, view, now),
    }
}

/// The list: name, rights, open connections, last seen and from where.
fn list_box(frame: &mut Frame<'_>, area: Rect, view: &DevicesView, now: DateTime<Utc>) {
    let width = area.width.saturating_sub(4).clamp(20, 90);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let devices = view.devices.as_deref();
    match devices {
        None => lines.push(Line::styled(" Reading the paired devices…", dim())),
        Some([]) => lines.extend(wrap(
            &Line::styled(" No paired device: n shows a QR code that pairs a phone (it may watch and answer).", dim()),
            inner,
        )),
        Some(_) => {}
    }
    let devices = devices.unwrap_or_default();
    let selected = view.selected.min(devices.len().saturating_sub(1));
    let mut selected_line = 0;
    for (i, device) in devices.iter().enumerate() {
        if i == selected {
            selected_line = lines.len();
        }
        let marker = if i == selected { Span::styled("▶ ", Style::new().fg(Color::Cyan)) } else { Span::raw("  ") };
        let rights = if device.limited { "watch and answer" } else { "full rights" };
        let online = match device.connections {
            0 => Span::styled("offline", dim()),
            n => Span::styled(format!("connected ({n})"), Style::new().fg(Color::Green)),
        };
        let seen = match (&device.last_seen_at, &device.last_address) {
            (Some(at), Some(address)) => format!(" · seen {} ago from {address}", age(at, now)),
            (Some(at), None) => format!(" · seen {} ago", age(at, now)),
            _ => " · never connected".to_string(),
        };
        let spans = vec![
            Span::raw(" "),
            marker,
            Span::raw(device.name.clone()).bold(),
            Span::raw(format!(" · {rights} · ")),
            online,
            Span::styled(seen, dim()),
        ];
        lines.extend(wrap(&Line::from(spans), inner));
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let visible = rect.height.saturating_sub(2) as usize;
    let scroll = (selected_line + 1).saturating_sub(visible) as u16;
    let keys = " n pair a phone · x revoke · Esc close ";
    let block = Block::bordered().title(" Paired devices ").title_bottom(Line::from(keys).right_aligned()).cyan();
    frame.render_widget(Clear, rect);
    let paragraph = Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)).scroll((scroll, 0));
    frame.render_widget(paragraph, rect);
}

/// The QR code (white on black, whatever the terminal's colours), the address as text, and
/// what the user should know.
fn pairing_box(frame: &mut Frame<'_>, area: Rect, pairing: &Pairing) {
    let qr_width = pairing.qr.first().map_or(0, |row| row.chars().count()) as u16;
    let width = area.width.saturating_sub(2).max((qr_width + 4).min(area.width));
    let inner = width.saturating_sub(2) as usize;
    let mut text: Vec<Line<'static>> = Vec::new();
    text.extend(wrap(&Line::from(pairing.address.clone()).bold(), inner));
    let rights = if pairing.limited { "it may watch and answer" } else { "full rights" };
    // RFC 3339: the time of day is shown.
    let until = pairing.expires_at.get(11..16).unwrap_or(&pairing.expires_at);
    let about = format!("Open it on the phone: pairs {:?} ({rights}), once, until {until} UTC.", pairing.name);
    text.extend(wrap(&Line::from(about), inner));
    for note in &pairing.notes {
        text.extend(wrap(&Line::styled(note.clone(), Style::new().fg(Color::Yellow)), inner));
    }
    let fits = pairing.qr.len() + text.len() + 2 <= area.height as usize && qr_width as usize <= inner;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if fits {
        let pad = " ".repeat((inner - qr_width as usize) / 2);
        let qr_style = Style::new().fg(Color::White).bg(Color::Black);
        lines.extend(
            pairing.qr.iter().map(|row| Line::from(vec![Span::raw(pad.clone()), Span::styled(row.clone(), qr_style)])),
        );
    } else {
        lines.push(Line::styled(
            format!(
                "(The terminal is too small for the QR code: it needs {} rows; or run batond pair.)",
                pairing.qr.len() + text.len() + 4
            ),
            dim(),
        ));
    }
    lines.extend(text);
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height));
    let block = Block::bordered()
        .title(" Pair a phone ")
        .title_bottom(Line::from(" Esc back to the devices · n a new code ").right_aligned())
        .cyan();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)), rect);
}
