//! A task's changes (`d`): the files its agent changed (`task.changes`, committed and
//! uncommitted apart) and the diff of the one under the cursor (`task.diff`). Moving between
//! files and hunks, choosing the files to commit (Space), committing with a message (`c`, the
//! task's title and the first line of the agent's last answer proposed), merging into the base branch (`m`; `M` also removes the worktree and
//! branch), opening a pull request (`P`). The list follows the agent: it is read again when a
//! tool call of the task's session ends and at the end of each turn, never by polling the disk.
//! `!` (here and in the list) opens a shell where the agent works (see `app/shell.rs`).

use std::collections::{BTreeSet, HashMap};

use baton_protocol::{ChangePart, ChangedFile, TaskChangesResult, TaskDiffResult};

use super::{App, Confirmation, Overlay};
use crate::action::Action;
use crate::command::Request;
use crate::text_field::TextField;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChangesView {
    pub task_id: String,
    pub label: String,
    /// Task title, proposed as the commit message.
    pub title: String,
    /// None until `task.changes` answers.
    pub changes: Option<TaskChangesResult>,
    /// The error of the last `task.changes`, shown in place of the list.
    pub error: Option<String>,
    pub selected: usize,
    /// Diffs read, by (path, part); forgotten when the list is read again.
    pub diffs: HashMap<(String, ChangePart), TaskDiffResult>,
    /// Rows of the diff scrolled past.
    pub scroll: usize,
    /// Uncommitted files the user left out of the next commit (Space).
    pub left_out: BTreeSet<String>,
    /// The commit message being written (`c`), and its error.
    pub message: Option<TextField>,
    pub message_error: Option<String>,
    /// A `task.changes` is on its way; another change only marks it `stale`.
    pub loading: bool,
    pub stale: bool,
}

impl ChangesView {
    pub fn files(&self) -> &[ChangedFile] {
        self.changes.as_ref().map_or(&[], |c| c.files.as_slice())
    }

    pub fn current(&self) -> Option<&ChangedFile> {
        self.files().get(self.selected)
    }

    /// The diff of the file under the cursor, when read.
    pub fn current_diff(&self) -> Option<&TaskDiffResult> {
        let file = self.current()?;
        self.diffs.get(&(file.path.clone(), file.part))
    }

    /// The uncommitted files the next commit takes.
    pub fn kept(&self) -> Vec<String> {
        self.files()
            .iter()
            .filter(|f| f.part == ChangePart::Uncommitted && !self.left_out.contains(&f.path))
            .map(|f| f.path.clone())
            .collect()
    }

    fn uncommitted(&self) -> usize {
        self.files().iter().filter(|f| f.part == ChangePart::Uncommitted).count()
    }
}

/// The rows of `diff` where its hunks start (`@@` lines).
pub fn hunk_rows(diff: &str) -> Vec<usize> {
    diff.lines().enumerate().filter(|(_, line)| line.starts_with("@@")).map(|(i, _)| i).collect()
}

impl App {
    /// `d`: the changes of the highlighted session's task.
    pub(super) fn open_changes(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let task_id = row.status.task_id.clone();
        let view = ChangesView {
            task_id: task_id.clone(),
            label: crate::sessions::label(row),
            title: row.task_title.clone(),
            loading: true,
            ..ChangesView::default()
        };
        self.overlay = Some(Overlay::Changes(Box::new(view)));
        // Counting lines means git reads every changed file: the list without counts comes
        // first (and with it the first file's diff), the counts after it.
        self.send(Request::Changes { task_id: task_id.clone(), counts: false });
        self.send(Request::Changes { task_id, counts: true });
    }

    fn changes_view(&mut self) -> Option<&mut ChangesView> {
        match &mut self.overlay {
            Some(Overlay::Changes(view)) => Some(view),
            _ => None,
        }
    }

    /// The commit message proposed: the task's title, and the first line of the agent's last
    /// answer in a session of the task whose transcript is loaded (what the last turn did).
    fn proposed_message(&self, task_id: &str, title: &str) -> String {
        let last_answer = self
            .sessions
            .rows()
            .iter()
            .filter(|row| row.status.task_id == task_id)
            .filter_map(|row| self.transcript(&row.status.session_id))
            .find_map(|transcript| {
                transcript.entries().iter().rev().find_map(|entry| match &entry.body {
                    crate::transcript::EntryBody::Agent { text, .. } => {
                        text.lines().map(str::trim).find(|line| !line.is_empty()).map(str::to_string)
                    }
                    _ => None,
                })
            });
        match last_answer {
            Some(line) => {
                let line: String = line.chars().take(72).collect();
                format!("{title}: {line}")
            }
            None => title.to_string(),
        }
    }

    /// Keys while the changes are open; false for the ones it leaves alone.
    pub(super) fn changes_action(&mut self, action: &Action) -> bool {
        let proposal = match (action, self.changes_view()) {
            (Action::Commit, Some(view)) => {
                let (task_id, title) = (view.task_id.clone(), view.title.clone());
                Some(self.proposed_message(&task_id, &title))
            }
            _ => None,
        };
        let Some(view) = self.changes_view() else { return false };
        if view.message.is_some() {
            return self.message_action(action);
        }
        let count = view.files().len();
        let diff_rows = view.current_diff().map_or(0, |d| d.diff.lines().count());
        let mut load_diff = false;
        match action {
            Action::MoveUp => {
                view.selected = view.selected.saturating_sub(1);
                view.scroll = 0;
                load_diff = true;
            }
            Action::MoveDown => {
                view.selected = (view.selected + 1).min(count.saturating_sub(1));
                view.scroll = 0;
                load_diff = true;
            }
            Action::ScrollLineDown => view.scroll = (view.scroll + 1).min(diff_rows.saturating_sub(1)),
            Action::ScrollLineUp => view.scroll = view.scroll.saturating_sub(1),
            Action::ScrollDown => view.scroll = (view.scroll + 20).min(diff_rows.saturating_sub(1)),
            Action::ScrollUp => view.scroll = view.scroll.saturating_sub(20),
            Action::NextHunk | Action::PrevHunk => {
                let hunks = view.current_diff().map(|d| hunk_rows(&d.diff)).unwrap_or_default();
                let at = view.scroll;
                let next = if *action == Action::NextHunk {
                    hunks.iter().copied().find(|row| *row > at)
                } else {
                    hunks.iter().copied().rev().find(|row| *row < at)
                };
                match next {
                    Some(row) => view.scroll = row,
                    None if *action == Action::NextHunk && view.selected + 1 < count => {
                        // Past the last hunk: the next file's first.
                        view.selected += 1;
                        view.scroll = 0;
                        load_diff = true;
                    }
                    None => {}
                }
            }
            Action::ToggleKeep => {
                let path = view.current().filter(|f| f.part == ChangePart::Uncommitted).map(|f| f.path.clone());
                match path {
                    Some(path) if !view.left_out.remove(&path) => {
                        view.left_out.insert(path);
                    }
                    Some(_) => {}
                    None => self.flash("only uncommitted files are chosen for a commit", true),
                }
            }
            Action::RefreshChanges => self.reload_changes(),
            Action::Commit => {
                if view.uncommitted() == 0 {
                    self.flash("nothing to commit", true);
                } else if view.kept().is_empty() {
                    self.flash("every file is left out (Space chooses them)", true);
                } else {
                    view.message = Some(TextField::with_text(proposal.unwrap_or_else(|| view.title.clone())));
                    view.message_error = None;
                }
            }
            Action::Merge { .. } | Action::PullRequest
                if view.changes.as_ref().is_some_and(|c| c.base.branch.is_none()) =>
            {
                self.flash(
                    "this task works in its repository itself, with no branch of its own: committing is all it takes",
                    true,
                );
            }
            Action::Merge { remove_worktree } => {
                let confirmation = Confirmation::Merge {
                    task_id: view.task_id.clone(),
                    label: view.label.clone(),
                    remove_worktree: *remove_worktree,
                    force: false,
                };
                self.ask(confirmation);
            }
            Action::PullRequest => {
                let confirmation = Confirmation::PullRequest {
                    task_id: view.task_id.clone(),
                    label: view.label.clone(),
                    force: false,
                };
                self.ask(confirmation);
            }
            Action::OpenShell => {
                let task_id = view.task_id.clone();
                self.send(Request::Shell { task_id });
            }
            _ => return false,
        }
        if load_diff {
            self.load_current_diff();
        }
        self.dirty = true;
        true
    }

    /// Keys while the commit message is written.
    fn message_action(&mut self, action: &Action) -> bool {
        let Some(view) = self.changes_view() else { return false };
        let Some(field) = &mut view.message else { return false };
        match action {
            Action::Edit(op) => field.apply(op),
            Action::CloseOverlay => {
                view.message = None;
                view.message_error = None;
            }
            Action::Submit => {
                let message = field.text().trim().to_string();
                if message.is_empty() {
                    view.message_error = Some("the message must not be empty".into());
                } else {
                    let all = view.left_out.is_empty();
                    let paths = (!all).then(|| view.kept());
                    let task_id = view.task_id.clone();
                    view.message = None;
                    self.send(Request::Commit { task_id, message, paths, force: false });
                }
            }
            _ => return false,
        }
        self.dirty = true;
        true
    }

    fn ask(&mut self, confirmation: Confirmation) {
        // The view stays behind the question, and comes back after it.
        if let Some(Overlay::Changes(view)) = self.overlay.take() {
            self.changes_behind = Some(view);
        }
        self.overlay = Some(Overlay::Confirm(confirmation));
    }

    /// After a question asked from the changes: the view again.
    pub(super) fn back_to_changes(&mut self) {
        if let Some(view) = self.changes_behind.take() {
            if self.overlay.is_none() {
                self.overlay = Some(Overlay::Changes(view));
            }
        }
    }

    /// Reads the list again (or marks it to be, when a read is on its way).
    pub(super) fn reload_changes(&mut self) {
        let Some(view) = self.changes_view() else { return };
        if view.loading {
            view.stale = true;
            return;
        }
        view.loading = true;
        let task_id = view.task_id.clone();
        self.send(Request::Changes { task_id, counts: true });
    }

    fn load_current_diff(&mut self) {
        let Some(view) = self.changes_view() else { return };
        let Some(file) = view.current() else { return };
        if view.diffs.contains_key(&(file.path.clone(), file.part)) {
            return;
        }
        let request = Request::Diff { task_id: view.task_id.clone(), path: file.path.clone(), part: file.part };
        self.send(request);
    }

    /// `task.changes` answered. The list without counts shows the files at once; the counted
    /// one that follows fills the counts in, keeping the diffs read meanwhile.
    pub(super) fn changes_listed(&mut self, result: TaskChangesResult) {
        let Some(view) = self.changes_view().filter(|v| v.task_id == result.task_id) else { return };
        let shown_counted = view.changes.as_ref().map(|c| c.counted);
        if !result.counted && shown_counted == Some(true) {
            return;
        }
        let filling_in = result.counted && shown_counted == Some(false);
        let keep = view.current().map(|f| (f.path.clone(), f.part));
        view.loading = !result.counted;
        view.error = None;
        if !filling_in {
            view.diffs.clear();
        }
        let present: BTreeSet<&String> = result.files.iter().map(|f| &f.path).collect();
        view.left_out.retain(|path| present.contains(path));
        // The cursor stays on its file when it is still listed.
        view.selected = keep
            .and_then(|(path, part)| result.files.iter().position(|f| f.path == path && f.part == part))
            .unwrap_or(view.selected)
            .min(result.files.len().saturating_sub(1));
        let counted = result.counted;
        view.changes = Some(result);
        let again = counted && std::mem::take(&mut view.stale);
        if !filling_in {
            self.load_current_diff();
        }
        if again {
            self.reload_changes();
        }
        self.dirty = true;
    }

    /// `task.diff` answered.
    pub(super) fn diff_read(&mut self, task_id: &str, result: TaskDiffResult) {
        let Some(view) = self.changes_view().filter(|v| v.task_id == task_id) else { return };
        view.diffs.insert((result.path.clone(), result.part), result);
        self.dirty = true;
    }

    /// `task.changes` failed: said in the view.
    pub(super) fn changes_failed(&mut self, task_id: &str, text: String) -> bool {
        let Some(view) = self.changes_view().filter(|v| v.task_id == task_id) else { return false };
        view.loading = false;
        view.error = Some(text);
        self.dirty = true;
        true
    }

    /// An event of a session: the changes of its task are read again when a tool call of it
    /// ended or its turn did (what the agent writes shows up without polling the disk).
    pub(super) fn changes_follow(&mut self, session_id: &str, event: &baton_protocol::SessionEvent) {
        use baton_protocol::{SessionEvent, ToolCallStatus};
        let ended = match event {
            SessionEvent::TurnCompleted { .. } => true,
            SessionEvent::ToolCallUpdate { status: Some(status), .. } => {
                matches!(status, ToolCallStatus::Completed | ToolCallStatus::Failed)
            }
            _ => false,
        };
        if !ended {
            return;
        }
        let task_id = self.sessions.get(session_id).map(|row| row.status.task_id.clone());
        let watching = self.changes_view().map(|v| v.task_id.clone());
        if task_id.is_some() && task_id == watching {
            self.reload_changes();
        }
    }

    /// A commit, merge or pull request was made: said, and the list read again.
    pub(super) fn git_done(&mut self, text: String) {
        self.flash(text, false);
        self.reload_changes();
    }

    /// A refused commit, merge or pull request: when the agent was in a turn, asks whether to
    /// go ahead anyway; else the error is said.
    pub(super) fn git_refused(&mut self, request: &Request, error: &baton_protocol::ClientError, text: String) {
        let in_turn =
            error.server_error().and_then(|e| e.details.as_ref()).is_some_and(|d| d.get("working_sessions").is_some());
        let label = self.changes_view().map(|v| v.label.clone()).unwrap_or_default();
        let confirmation = match request.clone() {
            Request::Commit { task_id, message, paths, .. } if in_turn => {
                Some(Confirmation::ForceCommit { task_id, label, message, paths })
            }
            Request::Merge { task_id, remove_worktree, .. } if in_turn => {
                Some(Confirmation::Merge { task_id, label, remove_worktree, force: true })
            }
            Request::PullRequest { task_id, .. } if in_turn => {
                Some(Confirmation::PullRequest { task_id, label, force: true })
            }
            _ => None,
        };
        match confirmation {
            Some(confirmation) => self.ask(confirmation),
            None => self.flash(text, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_start_at_their_header_rows() {
        let diff = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n@@ -9 +9 @@\n-c\n+d\n";
        assert_eq!(hunk_rows(diff), vec![2, 5]);
        assert!(hunk_rows("").is_empty());
    }
}
