//! The approval queue (`A`) and a session's standing answers (`P`), drawn over the screen.

use baton_protocol::{tool_of, PendingPermission, PermissionOption, RuleDecision};
use chrono::{DateTime, Utc};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

use super::{age, centered};
use crate::app::{
    agent_runs, hand_over_row, App, ApprovalQueue, ArchivedView, HandOverView, OptionsView, Overlay, QueueView,
    RulesView,
};
use crate::layout::diff::{diffs_in, render_diff};
use crate::layout::wrap::wrap;

/// Rows of a selected request's diff shown before "… N more rows".
const DIFF_ROWS: usize = 14;

pub fn draw(frame: &mut Frame<'_>, area: Rect, app: &App, now: DateTime<Utc>) {
    match app.overlay() {
        Some(Overlay::Approvals(queue)) => queue_box(frame, area, queue, now),
        Some(Overlay::Rules(view)) => rules_box(frame, area, view, now),
        Some(Overlay::Options(view)) => options_box(frame, area, view),
        Some(Overlay::Archived(view)) => archived_box(frame, area, view, now),
        Some(Overlay::HandOver(view)) => hand_over_box(frame, area, app, view),
        Some(Overlay::Queue(view)) => queued_box(frame, area, app, view),
        Some(Overlay::Devices(view)) => super::devices::draw(frame, area, view, now),
        _ => {}
    }
}

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

/// `edit “Write file”`: what a request is about.
fn tool_line(tool_call: &Value) -> String {
    let (kind, title) = tool_of(tool_call);
    let title = if title.is_empty() { "a tool call".to_string() } else { format!("“{title}”") };
    if kind.is_empty() {
        title
    } else {
        format!("{kind} {title}")
    }
}

/// `value` with every object's keys in order: what is drawn does not depend on whether
/// serde_json keeps the order the agent sent (its `preserve_order` feature, which another crate
/// of a build may turn on).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|key| (key.clone(), sorted(&map[key]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A permission request's options, `[1] Allow  [2] Always allow …`, on as many rows as `width`
/// needs, each option whole on one row (only one wider than a row is wrapped).
pub(crate) fn option_rows(options: &[PermissionOption], width: usize, style: Style) -> Vec<Line<'static>> {
    let mut rows: Vec<String> = Vec::new();
    for (i, option) in options.iter().enumerate() {
        let label = format!("[{}] {}", i + 1, option.name);
        match rows.last_mut() {
            Some(row) if row.width() + 2 + label.width() <= width => {
                row.push_str("  ");
                row.push_str(&label);
            }
            _ => rows.push(label),
        }
    }
    rows.into_iter().flat_map(|row| wrap(&Line::styled(row, style), width)).collect()
}

/// What a permission request would approve: the tool call's input (the command, the path…) on
/// up to two rows, and its diffs, each cut after `diff_rows` rows.
pub(crate) fn tool_call_details(tool_call: &Value, width: usize, diff_rows: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(input) = tool_call.get("rawInput").filter(|v| !v.is_null()) {
        let text = format!("input: {}", sorted(input));
        let cut: String = text.chars().take(width * 2).collect();
        lines.extend(wrap(&Line::styled(cut, dim()), width));
    }
    let content = tool_call.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    for diff in diffs_in(content) {
        let rows = render_diff(diff.path, diff.old, diff.new, width);
        let more = rows.len().saturating_sub(diff_rows);
        lines.extend(rows.into_iter().take(diff_rows));
        if more > 0 {
            lines.push(Line::styled(format!("… {more} more rows"), dim()));
        }
    }
    lines
}

fn request_lines(request: &PendingPermission, selected: bool, width: usize, now: DateTime<Utc>) -> Vec<Line<'static>> {
    let marker = if selected { Span::styled("▶ ", Style::new().fg(Color::Magenta)) } else { Span::raw("  ") };
    let header = Line::from(vec![
        marker,
        Span::styled(request.task_title.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::styled(format!(" · {} ago · ", age(&request.requested_at, now)), dim()),
        Span::raw(tool_line(&request.tool_call)),
    ]);
    let mut lines = wrap(&header, width);
    let indent = |line: Line<'static>| Line::from([vec![Span::raw("    ")], line.spans].concat());
    let inner = width.saturating_sub(4).max(10);
    if selected {
        lines.extend(tool_call_details(&request.tool_call, inner, DIFF_ROWS).into_iter().map(indent));
    }
    let style = if selected { Style::new() } else { dim() };
    lines.extend(option_rows(&request.options, inner, style).into_iter().map(indent));
    lines
}

fn queue_box(frame: &mut Frame<'_>, area: Rect, queue: &ApprovalQueue, now: DateTime<Utc>) {
    let width = area.width.saturating_sub(4).clamp(20, 110);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    // Where the selected request's rows are, to keep them on screen.
    let mut selected_rows = (0, 0);
    if !queue.loaded {
        lines.push(Line::styled(" loading…", dim()));
    } else if queue.requests.is_empty() {
        lines.push(Line::from(" Nothing waits for your answer."));
    }
    for (i, request) in queue.requests.iter().enumerate() {
        let start = lines.len();
        lines.extend(request_lines(request, i == queue.selected, inner, now));
        if i == queue.selected {
            selected_rows = (start, lines.len());
        }
    }
    if queue.total > queue.requests.len() as u64 {
        lines.push(Line::styled(format!(" … and {} more", queue.total - queue.requests.len() as u64), dim()));
    }
    let height = (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3));
    let rect = centered(area, width, height);
    let shown = rect.height.saturating_sub(2) as usize;
    let scroll = selected_rows.1.saturating_sub(shown).min(selected_rows.0);
    let title = format!(" Approval queue · {} waiting ", queue.total);
    let keys = " y allow · N reject · 1-9 option · Enter open · Esc close ";
    let block = Block::bordered().title(title).title_bottom(Line::from(keys).right_aligned()).magenta();
    let lines: Vec<Line<'static>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)), rect);
}

/// The archived tasks' sessions, newest first; an agent still running (left so by a client
/// that did not stop it) is marked.
fn archived_box(frame: &mut Frame<'_>, area: Rect, view: &ArchivedView, now: DateTime<Utc>) {
    let width = area.width.saturating_sub(4).clamp(20, 96);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if !view.loaded {
        lines.push(Line::styled(" loading…", dim()));
    } else if view.rows.is_empty() {
        lines.extend(wrap(&Line::from(" No archived tasks. a archives the highlighted session's task."), inner));
    }
    for (i, row) in view.rows.iter().enumerate() {
        let marker =
            if i == view.selected { Span::styled("▶ ", Style::new().fg(Color::Magenta)) } else { Span::raw("  ") };
        let mut spans = vec![
            marker,
            Span::styled(row.task_title.clone(), Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(
                format!(
                    " · {} · {} · {} · {} ago",
                    row.status.agent,
                    crate::sessions::short_id(&row.status.session_id),
                    crate::sessions::status_name(&row.status),
                    age(&row.updated_at, now)
                ),
                dim(),
            ),
        ];
        if agent_runs(row) {
            spans.push(Span::styled(" · agent running", Style::new().fg(Color::Yellow)));
        }
        lines.extend(wrap(&Line::from(spans), inner));
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let block = Block::bordered()
        .title(" Archived tasks ")
        .title_bottom(Line::from(" u unarchive · Esc close ").right_aligned())
        .magenta();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)), rect);
}

/// The agents to hand a session's conversation to (`H`): the session's own marked (picking it
/// forks), those not installed dimmed.
fn hand_over_box(frame: &mut Frame<'_>, area: Rect, app: &App, view: &HandOverView) {
    let width = area.width.saturating_sub(4).clamp(20, 80);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> =
        wrap(&Line::styled(" A new session of the task runs the agent picked, with the conversation.", dim()), inner);
    if app.agents.is_empty() {
        lines.push(Line::styled(" loading…", dim()));
    }
    let mut selected_line = 0;
    for (i, agent) in app.agents.iter().enumerate() {
        let marker =
            if i == view.selected { Span::styled("▶ ", Style::new().fg(Color::Magenta)) } else { Span::raw("  ") };
        let style = if agent.installed { Style::new() } else { dim() };
        if i == view.selected {
            selected_line = lines.len();
        }
        let row = Line::from(vec![Span::raw(" "), marker, Span::styled(hand_over_row(agent, &view.current), style)]);
        lines.extend(wrap(&row, inner));
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let visible = rect.height.saturating_sub(2) as usize;
    let scroll = (selected_line + 1).saturating_sub(visible) as u16;
    let title = format!(" Hand over · {} ", view.label);
    let block =
        Block::bordered().title(title).title_bottom(Line::from(" Enter start · Esc close ").right_aligned()).magenta();
    frame.render_widget(Clear, rect);
    let paragraph = Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)).scroll((scroll, 0));
    frame.render_widget(paragraph, rect);
}

fn rules_box(frame: &mut Frame<'_>, area: Rect, view: &RulesView, now: DateTime<Utc>) {
    let width = area.width.saturating_sub(4).clamp(20, 96);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    if !view.loaded {
        lines.push(Line::styled(" loading…", dim()));
    } else if view.rules.is_empty() {
        lines.extend(wrap(
            &Line::from(" No standing answers. Choosing an agent's “always” option makes one for that tool."),
            inner,
        ));
    }
    for (i, rule) in view.rules.iter().enumerate() {
        let marker =
            if i == view.selected { Span::styled("▶ ", Style::new().fg(Color::Magenta)) } else { Span::raw("  ") };
        let (word, color) = match rule.decision {
            RuleDecision::Allow => ("always allow", Color::Green),
            RuleDecision::Reject => ("always reject", Color::Red),
        };
        let kind = if rule.tool_kind.is_empty() { String::new() } else { format!("{} ", rule.tool_kind) };
        let line = Line::from(vec![
            marker,
            Span::styled(word, Style::new().fg(color).add_modifier(Modifier::BOLD)),
            Span::raw(format!(" {kind}“{}”", rule.tool_title)),
            Span::styled(format!(" · answered {}× · set {} ago", rule.applied, age(&rule.created_at, now)), dim()),
        ]);
        lines.extend(wrap(&line, inner));
        if !rule.tool_input.is_empty() {
            // What the rule matches exactly: another input under the same title is asked again.
            let input = Line::from(vec![Span::raw("    "), Span::styled(format!("only: {}", rule.tool_input), dim())]);
            lines.extend(wrap(&input, inner));
        }
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let title = format!(" Standing answers · {} ", view.label);
    let block =
        Block::bordered().title(title).title_bottom(Line::from(" x revoke · Esc close ").right_aligned()).magenta();
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)), rect);
}

/// The agent's modes and options (`M`): each group under its heading, the value the agent runs
/// with marked ●, the cursor ▶.
fn options_box(frame: &mut Frame<'_>, area: Rect, view: &OptionsView) {
    let width = area.width.saturating_sub(4).clamp(20, 80);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let rows = view.rows();
    match &view.result {
        None => lines.push(Line::styled(" loading…", dim())),
        Some(_) if rows.is_empty() => lines.extend(wrap(
            &Line::from(" The agent offers no modes or options (or has not started yet: they are known once it has)."),
            inner,
        )),
        Some(result) if !result.applied => lines.extend(wrap(
            &Line::styled(" No agent runs: a choice is kept and set when the agent starts.", dim()),
            inner,
        )),
        Some(_) => {}
    }
    let mut group: Option<&str> = None;
    let mut selected_line = 0;
    for (i, row) in rows.iter().enumerate() {
        if group != Some(row.group.as_str()) {
            group = Some(row.group.as_str());
            lines.push(Line::styled(format!(" {}", row.group), Style::new().add_modifier(Modifier::BOLD)));
        }
        let marker =
            if i == view.selected { Span::styled("▶ ", Style::new().fg(Color::Magenta)) } else { Span::raw("  ") };
        let current = if row.current
            && !matches!(row.target, crate::app::OptionTarget::Option(_, baton_protocol::OptionValue::Bool(_)))
        {
            Span::styled("● ", Style::new().fg(Color::Green))
        } else {
            Span::raw("  ")
        };
        if i == view.selected {
            selected_line = lines.len();
        }
        let mut spans = vec![Span::raw("  "), marker, current, Span::raw(row.label.clone())];
        if let Some(description) = &row.description {
            spans.push(Span::styled(format!(" · {description}"), dim()));
        }
        lines.extend(wrap(&Line::from(spans), inner));
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    // A list taller than the box scrolls so that the cursor's row stays in view.
    let visible = rect.height.saturating_sub(2) as usize;
    let scroll = (selected_line + 1).saturating_sub(visible) as u16;
    let title = format!(" Modes and options · {} ", view.label);
    let block =
        Block::bordered().title(title).title_bottom(Line::from(" Enter switch · Esc close ").right_aligned()).magenta();
    frame.render_widget(Clear, rect);
    let paragraph = Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)).scroll((scroll, 0));
    frame.render_widget(paragraph, rect);
}

/// The opened session's queued messages (`u`), the next to send first.
fn queued_box(frame: &mut Frame<'_>, area: Rect, app: &App, view: &QueueView) {
    let width = area.width.saturating_sub(4).clamp(20, 80);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line<'static>> = Vec::new();
    let queue = app.queue_of(&view.session_id);
    if let Some(held) = queue.and_then(|q| q.held.as_deref()) {
        lines.extend(wrap(&Line::styled(format!(" Held: {held}"), Style::new().fg(Color::Yellow)), inner));
    }
    let messages = queue.map(|q| q.messages.as_slice()).unwrap_or_default();
    if messages.is_empty() {
        lines.push(Line::styled(" Nothing is queued: a message sent while a turn runs waits here.", dim()));
    }
    let selected = view.selected.min(messages.len().saturating_sub(1));
    let mut selected_line = 0;
    for (i, message) in messages.iter().enumerate() {
        if i == selected {
            selected_line = lines.len();
        }
        let marker = if i == selected { Span::styled("▶ ", Style::new().fg(Color::Cyan)) } else { Span::raw("  ") };
        let steer = if message.steer { Span::styled("steer ", Style::new().fg(Color::Magenta)) } else { Span::raw("") };
        let text = message.text.lines().next().unwrap_or_default().to_string();
        let spans = vec![Span::raw(" "), marker, Span::raw(format!("{}. ", i + 1)), steer, Span::raw(text)];
        lines.extend(wrap(&Line::from(spans), inner));
    }
    let rect = centered(area, width, (lines.len() as u16 + 2).min(area.height.saturating_sub(2).max(3)));
    let visible = rect.height.saturating_sub(2) as usize;
    let scroll = (selected_line + 1).saturating_sub(visible) as u16;
    let title = format!(" Queued messages · {} ", view.label);
    let keys = " e edit · x remove · r send next · Esc close ";
    let block = Block::bordered().title(title).title_bottom(Line::from(keys).right_aligned()).cyan();
    frame.render_widget(Clear, rect);
    let paragraph = Paragraph::new(lines).block(block).style(Style::new().fg(Color::Reset)).scroll((scroll, 0));
    frame.render_widget(paragraph, rect);
}
