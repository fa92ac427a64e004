//! `F`: forks the highlighted session, after a question: a new session of its task that starts
//! from the conversation so far (`task.session.fork`). The fork is opened; the list and its
//! header say where it came from (`forked_from`).
//!
//! `H`: hands the highlighted session's conversation to another agent: a list of the configured
//! agents (the session's own marked), Enter starts a new session of the task with the one
//! under the cursor (`task.session.fork` with `agent`), which gets the conversation injected.

use baton_protocol::{AgentInfo, SessionInfo};

use crate::action::Action;
use crate::command::Request;
use crate::sessions::label;

use super::{App, Confirmation, Overlay};

/// The agents a session's conversation can be handed to (`H`).
#[derive(Debug, Clone, PartialEq)]
pub struct HandOverView {
    pub session_id: String,
    pub label: String,
    /// The session's agent (marked in the list; picking it forks).
    pub current: String,
    /// The row under the cursor, in `App::agents`.
    pub selected: usize,
}

impl App {
    pub(super) fn ask_fork(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let (session_id, label) = (row.status.session_id.clone(), label(row));
        self.overlay = Some(Overlay::Confirm(Confirmation::Fork { session_id, label }));
    }

    pub(super) fn fork_confirmed(&mut self, session_id: String, label: String) {
        self.flash(format!("forking {label}…"), false);
        self.send(Request::Fork { session_id, agent: None });
    }

    pub(super) fn open_hand_over(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let view = HandOverView {
            session_id: row.status.session_id.clone(),
            label: label(row),
            current: row.status.agent.clone(),
            selected: 0,
        };
        // The list of agents arrives at connection; ask again if it has not.
        if self.agents.is_empty() && self.is_connected() {
            self.send(Request::ListAgents);
        }
        let first_other = self.agents.iter().position(|a| a.name != view.current && a.installed);
        self.overlay = Some(Overlay::HandOver(HandOverView { selected: first_other.unwrap_or(0), ..view }));
    }

    /// Keys while the list of agents is open; false for the ones it leaves alone.
    pub(super) fn hand_over_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::HandOver(view)) = &mut self.overlay else { return false };
        match action {
            Action::MoveUp => view.selected = view.selected.saturating_sub(1),
            Action::MoveDown => view.selected = (view.selected + 1).min(self.agents.len().saturating_sub(1)),
            Action::PickOption => {
                let Some(agent) = self.agents.get(view.selected).cloned() else {
                    self.flash("the agents are not listed yet", true);
                    return true;
                };
                if !agent.installed {
                    self.flash(format!("{} is not installed on the server", agent.display_name), true);
                    return true;
                }
                let (session_id, label) = (view.session_id.clone(), view.label.clone());
                let same = agent.name == view.current;
                self.overlay = None;
                if same {
                    self.fork_confirmed(session_id, label);
                } else {
                    self.flash(format!("handing {label} to {}…", agent.display_name), false);
                    self.send(Request::Fork { session_id, agent: Some(agent.name) });
                }
            }
            _ => return false,
        }
        self.dirty = true;
        true
    }

    pub(super) fn on_forked(&mut self, session: SessionInfo) {
        let session_id = session.status.session_id.clone();
        let origin =
            session.forked_from.as_ref().map(|origin| crate::sessions::short_id(&origin.session_id).to_string());
        let from = origin.map(|o| format!(" from {o}")).unwrap_or_default();
        let handed = self.sessions.get(session.forked_from.as_ref().map_or("", |o| o.session_id.as_str()));
        let what = match handed {
            Some(source) if source.status.agent != session.status.agent => {
                format!("handed to {}", session.status.agent)
            }
            _ => "forked".to_string(),
        };
        self.flash_while_starting(format!("{what}{from}: {} (its agent is starting)", label(&session)), &session_id);
        self.sessions.upsert(session);
        self.open_session(&session_id);
        self.schedule_list_refresh();
    }
}

/// An agent's row in the hand-over list.
pub fn hand_over_row(agent: &AgentInfo, current: &str) -> String {
    let mut row = format!("{} ({})", agent.display_name, agent.name);
    if agent.name == current {
        row.push_str(" · its agent now: a fork");
    }
    if !agent.installed {
        row.push_str(" · not installed");
    }
    row
}

/// "fork of 8b1e4d2c": where a forked session came from; `None` for one that is not a fork.
pub fn fork_note(row: &SessionInfo) -> Option<String> {
    let origin = row.forked_from.as_ref()?;
    Some(format!("fork of {}", crate::sessions::short_id(&origin.session_id)))
}
