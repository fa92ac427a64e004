//! The agent's modes and options (`M`): a list of what the opened (else highlighted) session's
//! agent offers, the current value of each marked; Enter picks the row under the cursor
//! (`session.set_mode` / `session.set_option`). A choice made while no agent runs is kept by
//! the server and set when the agent starts.

use baton_protocol::{OptionValue, SessionEvent, SessionOptionsResult};

use super::{App, Overlay};
use crate::action::Action;
use crate::command::Request;

#[derive(Debug, Clone, PartialEq)]
pub struct OptionsView {
    pub session_id: String,
    pub label: String,
    /// The last answer; None while the first is awaited.
    pub result: Option<SessionOptionsResult>,
    pub selected: usize,
}

/// What picking a row asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionTarget {
    Mode(String),
    Option(String, OptionValue),
}

/// One row of the list: under the heading `group`, a value `label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionRow {
    pub group: String,
    pub label: String,
    pub description: Option<String>,
    /// The agent runs with it now.
    pub current: bool,
    pub target: OptionTarget,
}

impl OptionsView {
    /// Every row: the modes, then each option's values (a boolean option is one row that
    /// toggles it).
    pub fn rows(&self) -> Vec<OptionRow> {
        let Some(result) = &self.result else { return Vec::new() };
        let options = &result.options;
        let mut rows: Vec<OptionRow> = options
            .modes
            .iter()
            .map(|mode| OptionRow {
                group: "Mode".into(),
                label: mode.name.clone(),
                description: mode.description.clone(),
                current: options.current_mode.as_deref() == Some(mode.id.as_str()),
                target: OptionTarget::Mode(mode.id.clone()),
            })
            .collect();
        for option in &options.config_options {
            match &option.current {
                OptionValue::Bool(on) => rows.push(OptionRow {
                    group: option.name.clone(),
                    label: if *on { "on (Enter turns it off)".into() } else { "off (Enter turns it on)".into() },
                    description: option.description.clone(),
                    current: true,
                    target: OptionTarget::Option(option.id.clone(), OptionValue::Bool(!on)),
                }),
                OptionValue::Id(current) => rows.extend(option.choices.iter().map(|choice| OptionRow {
                    group: option.name.clone(),
                    label: match &choice.group {
                        Some(group) => format!("{} ({group})", choice.name),
                        None => choice.name.clone(),
                    },
                    description: choice.description.clone(),
                    current: &choice.value == current,
                    target: OptionTarget::Option(option.id.clone(), OptionValue::Id(choice.value.clone())),
                })),
            }
        }
        rows
    }
}

impl App {
    /// `M`: the modes and options of the highlighted session (the one every key acts on).
    pub(super) fn open_options(&mut self) {
        let session_id = self.key_target();
        let Some(session_id) = session_id else {
            self.flash("no session selected", true);
            return;
        };
        let label = self.sessions.get(&session_id).map_or_else(|| session_id.clone(), crate::sessions::label);
        self.overlay =
            Some(Overlay::Options(OptionsView { session_id: session_id.clone(), label, result: None, selected: 0 }));
        self.send(Request::Options { session_id });
    }

    /// Keys while the list is open; false for the ones it leaves alone.
    pub(super) fn options_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Options(view)) = &mut self.overlay else { return false };
        match action {
            Action::MoveUp => view.selected = view.selected.saturating_sub(1),
            Action::MoveDown => view.selected = (view.selected + 1).min(view.rows().len().saturating_sub(1)),
            Action::PickOption => {
                let Some(row) = view.rows().into_iter().nth(view.selected) else {
                    self.flash("the agent offers nothing to switch", true);
                    return true;
                };
                let session_id = view.session_id.clone();
                let request = match row.target {
                    OptionTarget::Mode(mode_id) => Request::SetMode { session_id, mode_id },
                    OptionTarget::Option(option_id, value) => Request::SetOption { session_id, option_id, value },
                };
                self.send(request);
            }
            _ => return false,
        }
        self.dirty = true;
        true
    }

    /// An answer of `session.options` / `set_mode` / `set_option`.
    pub(super) fn options_answered(&mut self, request: &Request, result: SessionOptionsResult) {
        let picked = !matches!(request, Request::Options { .. });
        if picked {
            let what = match request {
                Request::SetMode { mode_id, .. } => {
                    let name = result.options.mode(mode_id).map_or(mode_id.as_str(), |m| m.name.as_str());
                    format!("mode “{name}”")
                }
                Request::SetOption { option_id, value, .. } => match result.options.option(option_id) {
                    Some(option) => format!("{} “{}”", option.name, option.value_name(value)),
                    None => format!("{option_id} “{value}”"),
                },
                _ => String::new(),
            };
            let when = if result.applied { "set" } else { "chosen: set when the agent next starts" };
            self.flash(format!("{what} {when}"), false);
        }
        let Some(Overlay::Options(view)) = &mut self.overlay else { return };
        if view.session_id != result.session_id {
            return;
        }
        view.result = Some(result);
        view.selected = view.selected.min(view.rows().len().saturating_sub(1));
        self.dirty = true;
    }

    /// A `mode` or `options` event of the session whose list is open: read it again.
    pub(super) fn options_event(&mut self, session_id: &str, event: &SessionEvent) {
        let Some(Overlay::Options(view)) = &self.overlay else { return };
        if view.session_id == session_id && matches!(event, SessionEvent::Mode { .. } | SessionEvent::Options { .. }) {
            let session_id = view.session_id.clone();
            self.send(Request::Options { session_id });
        }
    }
}
