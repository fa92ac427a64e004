//! Archived tasks (`z`): archiving asks first and stops the task's running agents, so nothing
//! works unseen behind the list; the archived view lists the archived tasks' sessions (an agent
//! another client left running is marked), and `u` there unarchives the highlighted one's task.

use baton_protocol::{SessionInfo, SessionState};

use crate::action::Action;
use crate::command::Request;

use super::{App, Confirmation, Overlay};

/// The sessions of archived tasks as last listed, and the one under the cursor.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ArchivedView {
    pub rows: Vec<SessionInfo>,
    pub selected: usize,
    /// The first answer has arrived.
    pub loaded: bool,
}

/// An agent of the session runs (or is being started).
pub fn agent_runs(row: &SessionInfo) -> bool {
    row.status.is_agent_running || row.status.state == SessionState::Starting
}

impl App {
    /// `a`: asks before archiving the highlighted session's task, saying what happens to its
    /// running agents.
    pub(super) fn ask_archive_task(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let task_id = row.status.task_id.clone();
        let label = format!("“{}”", row.task_title);
        let of_task: Vec<_> = self.sessions.rows().iter().filter(|r| r.status.task_id == task_id).collect();
        let sessions = of_task.len();
        let running = of_task.iter().filter(|r| agent_runs(r)).count();
        self.overlay = Some(Overlay::Confirm(Confirmation::ArchiveTask { task_id, label, sessions, running }));
    }

    /// `z`: opens the archived view and lists it.
    pub(super) fn open_archived(&mut self) {
        self.overlay = Some(Overlay::Archived(ArchivedView::default()));
        self.send(Request::ListArchived);
    }

    /// Keys while the archived view is open; false for the ones it leaves alone.
    pub(super) fn archived_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Archived(view)) = &mut self.overlay else {
            return false;
        };
        match action {
            Action::MoveUp => view.selected = view.selected.saturating_sub(1),
            Action::MoveDown => view.selected = (view.selected + 1).min(view.rows.len().saturating_sub(1)),
            Action::Unarchive => {
                let Some((task_id, title)) =
                    view.rows.get(view.selected).map(|row| (row.status.task_id.clone(), row.task_title.clone()))
                else {
                    self.flash("no archived task to unarchive", true);
                    return true;
                };
                self.flash(format!("unarchiving “{title}”…"), false);
                self.send(Request::UnarchiveTask { task_id });
            }
            _ => return false,
        }
        self.dirty = true;
        true
    }

    /// The archived sessions arrived.
    pub(super) fn archived_listed(&mut self, rows: Vec<SessionInfo>) {
        let Some(Overlay::Archived(view)) = &mut self.overlay else { return };
        view.selected = view.selected.min(rows.len().saturating_sub(1));
        view.rows = rows;
        view.loaded = true;
        self.dirty = true;
    }

    /// A task was archived or unarchived (by this client or another): an open archived view
    /// lists again; an opened session of a task now archived is closed, since the list no longer
    /// shows it.
    pub(super) fn archive_changed(&mut self, task_id: &str, archived: bool) {
        if matches!(self.overlay, Some(Overlay::Archived(_))) && self.is_connected() {
            self.send(Request::ListArchived);
        }
        if !archived {
            return;
        }
        let opened_of_task = self
            .opened
            .as_deref()
            .and_then(|id| self.sessions.get(id))
            .is_some_and(|row| row.status.task_id == task_id);
        if opened_of_task {
            if let Some(previous) = self.opened.take() {
                if self.is_connected() {
                    self.send(Request::Unsubscribe { session_id: previous.clone() });
                }
                let draft = std::mem::take(&mut self.input);
                if !draft.is_blank() {
                    self.drafts.insert(previous, draft);
                }
            }
            self.narrow_shows_session = false;
            if self.focus != super::Focus::Filter {
                self.focus = super::Focus::List;
            }
        }
        self.sessions.remove_task(task_id);
    }
}
