//! What each [`Action`] does to the app.

use crate::action::{Action, EditOp};
use crate::command::Request;
use crate::sessions::{is_working, label};
use crate::text_field::TextField;
use crate::transcript::Permission;
use baton_protocol::SessionState;

use super::server::already_attached_fresh;
use super::transcript_focus::Step;
use super::{App, Confirmation, Focus, NewTaskForm, Overlay, RenameForm};

impl App {
    pub fn handle_action(&mut self, action: Action) {
        self.dirty = true;
        if action.acts() {
            // The message on screen is about something done before: a stale error must not
            // outlive a later action that worked. What this action says replaces it anyway.
            self.flash = None;
        }
        // The search view and the export form take their own keys (see search.rs, export.rs).
        if self.approvals_action(&action)
            || self.options_action(&action)
            || self.queue_action(&action)
            || self.devices_action(&action)
            || self.search_action(&action)
            || self.export_form_action(&action)
            || self.archived_action(&action)
            || self.hand_over_action(&action)
            || self.changes_action(&action)
        {
            return;
        }
        match action {
            Action::Quit => self.quit = true,
            Action::OpenApprovals => self.open_approvals(),
            Action::OpenRules => self.open_rules(),
            Action::OpenOptions => self.open_options(),
            Action::OpenQueue => self.open_queue(),
            Action::OpenDevices => self.open_devices(),
            Action::OpenChanges => self.open_changes(),
            Action::OpenShell => self.open_shell(),
            // Only the changes view acts on a task's changes (see `changes_action`).
            Action::NextHunk
            | Action::PrevHunk
            | Action::ToggleKeep
            | Action::RefreshChanges
            | Action::Commit
            | Action::Merge { .. }
            | Action::PullRequest => {}
            // Only the devices' list pairs and revokes (see `devices_action`).
            Action::PairDevice | Action::RevokeDevice => {}
            // Only the queue's list acts on queued messages (see `queue_action`).
            Action::RemoveQueued | Action::ReleaseQueue | Action::EditQueued => {}
            // Only the options list picks (see `options_action`).
            Action::PickOption => {}
            // Only the rules overlay revokes (see `approvals_action`).
            Action::RevokeRule => {}
            Action::Interrupt if self.overlay.is_none() && self.focus == Focus::Filter => self.clear_filter(),
            Action::Interrupt => {
                let writing = self.overlay.is_none() && self.focus == Focus::Input;
                if writing && !self.input.text().is_empty() {
                    self.input.apply(&EditOp::Clear);
                    self.flash("draft cleared (Ctrl-C again quits)", false);
                } else {
                    self.quit = true;
                }
            }
            Action::Dismiss => self.flash = None,
            Action::Escape => self.escape(),
            Action::StartFilter => self.focus = Focus::Filter,
            Action::KeepFilter => {
                self.focus = Focus::List;
                if self.filter.is_blank() {
                    self.clear_filter();
                }
            }
            Action::ClearFilter => self.clear_filter(),
            Action::ToggleThoughts => {
                self.show_thoughts = !self.show_thoughts;
                let shown =
                    if self.show_thoughts { "thoughts shown (t folds them)" } else { "thoughts folded (t shows them)" };
                self.flash(shown, false);
            }
            Action::PromptUp => {
                if self.input.on_first_line() {
                    self.history_older();
                } else {
                    self.input.apply(&EditOp::Up);
                }
            }
            Action::PromptDown => {
                if self.input.on_last_line() {
                    self.history_newer();
                } else {
                    self.input.apply(&EditOp::Down);
                }
            }
            Action::HistoryPrev => self.history_older(),
            Action::HistoryNext => self.history_newer(),
            Action::ToggleHelp => {
                self.help_scroll = 0;
                self.overlay = match self.overlay {
                    Some(Overlay::Help) => None,
                    _ => Some(Overlay::Help),
                }
            }
            Action::CloseOverlay => {
                self.overlay = None;
                self.back_to_changes();
            }
            Action::NextNeedingYou => self.open_next_needing_you(),
            Action::ToggleNeedsYouOnly => self.toggle_needs_you_only(),
            Action::MoveUp => self.sessions.move_cursor(-1),
            Action::MoveDown => {
                self.sessions.move_cursor(1);
                self.load_more_sessions();
            }
            Action::OpenSelected => {
                self.open_cursor_session();
                self.narrow_shows_session = self.opened.is_some();
            }
            Action::FocusInput => {
                self.show_key_target();
                self.focus = Focus::Input;
            }
            Action::LeaveInput => {
                self.abandon_queued_edit();
                self.focus = Focus::List;
            }
            Action::FocusTranscript => self.focus_transcript(),
            Action::LeaveTranscript => self.leave_transcript(),
            Action::PrevEntry => self.step_entry(Step::Back, false),
            Action::NextEntry => self.step_entry(Step::Forward, false),
            Action::PrevToolCall => self.step_entry(Step::Back, true),
            Action::NextToolCall => self.step_entry(Step::Forward, true),
            Action::ToggleExpand => self.toggle_expand(),
            Action::Submit => self.submit(),
            Action::Steer => self.steer(),
            Action::Edit(op) => match &mut self.overlay {
                Some(Overlay::NewTask(form)) => form.edit(&op, self.agents.len()),
                Some(Overlay::Rename(form)) => form.title.apply(&op),
                _ if self.focus == Focus::Filter => {
                    self.filter.apply(&op);
                    self.sessions.set_filter(self.filter.text());
                }
                _ => {
                    // "draft cleared" is not true any more once something is typed again.
                    if self.flash.as_ref().is_some_and(|f| f.text.starts_with("draft cleared")) {
                        self.flash = None;
                    }
                    self.input.apply(&op);
                }
            },
            Action::CancelTurn => {
                if let Some((session_id, label)) = self.cursor_target() {
                    self.overlay = Some(Overlay::Confirm(Confirmation::CancelTurn { session_id, label }));
                }
            }
            Action::RenameTask => self.open_rename_form(),
            Action::ArchiveTask => self.ask_archive_task(),
            Action::OpenArchived => self.open_archived(),
            Action::ShowPageAddress => self.show_page_address(),
            // Only the archived view unarchives (see `archived_action`).
            Action::Unarchive => {}
            Action::DeleteTask => self.ask_delete_task(),
            Action::StopServer => self.overlay = Some(Overlay::Confirm(Confirmation::StopServer)),
            Action::CopyAnswer => self.copy(false),
            Action::CopyCodeBlock => self.copy(true),
            Action::Resume => {
                if let Some((session_id, label)) = self.cursor_target() {
                    let failed = self.sessions.get(&session_id).and_then(|row| {
                        (row.status.state == baton_protocol::SessionState::Failed)
                            .then(|| row.status.last_error.clone().unwrap_or_default())
                    });
                    if let Some(error) = failed {
                        // A failed session is launched again only when asked knowingly.
                        self.overlay = Some(Overlay::Confirm(Confirmation::RetryFailed { session_id, label, error }));
                        return;
                    }
                    self.flash(format!("resuming {label}…"), false);
                    self.send(Request::Resume { session_id, fresh: false, retry_failed: false, automatic: false });
                }
            }
            Action::ResumeFresh => self.ask_resume_fresh(),
            Action::Stop => {
                if let Some((session_id, label)) = self.cursor_target() {
                    self.overlay = Some(Overlay::Confirm(Confirmation::Stop { session_id, label }));
                }
            }
            Action::StartSession => self.ask_start_session(),
            Action::Confirm => self.confirm(),
            Action::NewTask => self.open_new_task_form(),
            Action::NextField | Action::PrevField => {
                if let Some(Overlay::NewTask(form)) = &mut self.overlay {
                    form.move_focus(action == Action::NextField);
                }
            }
            Action::AllowPermission => self.permission_key(|p| pick_option(p, "allow")),
            Action::RejectPermission => self.permission_key(|p| pick_option(p, "reject")),
            Action::ChooseOption(index) => self.permission_key(|p| p.options.get(index).map(|o| o.option_id.clone())),
            Action::ShowError => self.show_error(),
            Action::ToggleMouse => self.toggle_mouse(),
            Action::Export => self.open_export_form(),
            Action::Search => self.open_search(),
            Action::Fork => self.ask_fork(),
            Action::HandOver => self.open_hand_over(),
            // Only the export form has these (see export.rs).
            Action::ToggleExportFormat | Action::ToggleExportThoughts => {}
            Action::ScrollUp | Action::ScrollLineUp | Action::ScrollDown | Action::ScrollLineDown
                if self.overlay_scroll().is_some() =>
            {
                let page = self.metrics.screen_height.saturating_sub(6).max(1);
                if let Some(scroll) = self.overlay_scroll() {
                    *scroll = match action {
                        Action::ScrollUp => scroll.saturating_sub(page),
                        Action::ScrollLineUp => scroll.saturating_sub(1),
                        Action::ScrollDown => *scroll + page,
                        _ => *scroll + 1,
                    };
                }
                // The view clamps it to what there is to scroll.
            }
            Action::ScrollUp => self.scroll_up(self.page()),
            Action::ScrollDown => self.scroll = self.scroll.saturating_sub(self.page()),
            Action::ScrollLineUp => self.scroll_up(1),
            Action::ScrollLineDown => self.scroll = self.scroll.saturating_sub(1),
            Action::ScrollTop => {
                self.scroll = self.metrics.transcript_max_scroll;
                self.load_older_messages();
            }
            Action::ScrollBottom => self.scroll = 0,
        }
    }

    /// Esc in the list: a running turn of the highlighted session is cancelled (the agent stays);
    /// with none running there, the message goes, then the filter.
    fn escape(&mut self) {
        if self.is_narrow() && self.narrow_shows_session {
            // One pane at a time: Esc goes back from the session to the list first.
            self.narrow_shows_session = false;
            return;
        }
        let running = self
            .sessions
            .cursor()
            .filter(|row| is_working(&row.status))
            .map(|row| (row.status.session_id.clone(), label(row)));
        if let Some((session_id, label)) = running {
            // Cancelling loses the turn's work in progress: asked first, like the other keys
            // that cannot be undone (a second Esc must not cancel by accident).
            self.overlay = Some(Overlay::Confirm(Confirmation::CancelTurn { session_id, label }));
        } else if self.flash.is_some() {
            self.flash = None;
        } else if !self.filter.text().is_empty() {
            self.clear_filter();
        }
    }

    fn clear_filter(&mut self) {
        self.filter = TextField::default();
        self.sessions.set_filter("");
        if self.focus == Focus::Filter {
            self.focus = Focus::List;
        }
    }

    fn history_older(&mut self) {
        if let Some(entry) = self.history.older(self.input.text()) {
            self.input = TextField::with_text(entry);
        }
    }

    fn history_newer(&mut self) {
        if let Some(entry) = self.history.newer() {
            self.input = TextField::with_text(entry);
        }
    }

    /// Opens the session under the cursor, which starts the frontend auto-resume
    /// (`auto_resume.rs`; docs/RESUME.md, 'Glossary').
    pub(super) fn open_cursor_session(&mut self) {
        let Some(session_id) = self.sessions.cursor().map(|s| s.status.session_id.clone()) else {
            return;
        };
        self.open_session(&session_id);
    }

    pub(crate) fn open_session(&mut self, session_id: &str) {
        if self.opened.as_deref() != Some(session_id) {
            let draft = std::mem::take(&mut self.input);
            if let Some(previous) = self.opened.take() {
                // One subscription at a time keeps us well under the server's bound; the
                // transcript is kept and resubscribed from its last seq when reopened.
                if self.is_connected() {
                    self.send(Request::Unsubscribe { session_id: previous.clone() });
                }
                if !draft.text().is_empty() {
                    self.drafts.insert(previous, draft);
                }
                self.input = self.drafts.remove(session_id).unwrap_or_default();
            } else {
                // Written before any session was open: it was meant for this one.
                self.input = self.drafts.remove(session_id).unwrap_or(draft);
            }
            self.opened = Some(session_id.to_string());
            self.opened_at = Some(std::time::Instant::now());
            self.scroll = 0;
            self.reset_reading();
            self.history.reset();
        }
        self.sessions.set_cursor(session_id);
        if self.sessions.cursor().is_none() {
            // The filter hides it (a task just created): show it.
            self.clear_filter();
            self.sessions.set_cursor(session_id);
        }
        self.auto_resume.select(session_id);
        if self.is_connected() {
            self.send(Request::SessionStatus { session_id: session_id.to_string() });
            self.send(Request::QueueList { session_id: session_id.to_string() });
            self.ensure_subscribed(session_id);
            self.request_usage(Some(session_id.to_string()));
        }
    }

    /// The session the keys act on: the highlighted one (the list cursor). The pane may show
    /// another until a key needs what it shows (see [`App::show_key_target`]).
    pub(super) fn key_target(&self) -> Option<String> {
        self.cursor_session().map(str::to_string)
    }

    /// The keys that read or write the shown transcript (`i`, `v`, `x`, `Y`, `B`) first open the
    /// highlighted session when the pane shows another: every key acts on the session under the
    /// cursor, and what it acts on is on screen.
    pub(super) fn show_key_target(&mut self) {
        let Some(target) = self.key_target() else { return };
        if self.opened.as_deref() != Some(target.as_str()) {
            self.open_session(&target);
            self.narrow_shows_session = true;
        }
    }

    /// The opened session, for writing to it; says so when there is none.
    fn target_session(&mut self, verb: &str) -> Option<String> {
        let target = self.opened.clone();
        if target.is_none() {
            self.flash(format!("open a session (Enter) to {verb} it"), true);
        }
        target
    }

    /// The session under the list cursor, with its name for messages: the keys that act on a
    /// session act on the one the user points at, which need not be the one opened.
    fn cursor_target(&mut self) -> Option<(String, String)> {
        let target = self.sessions.cursor().map(|row| (row.status.session_id.clone(), label(row)));
        if target.is_none() {
            self.flash("no session selected", true);
        }
        target
    }

    /// `R`: the server starts over only a session without an agent, so one with an agent is
    /// answered here, before the question. A session that needs resuming is asked about from
    /// the list without opening it (opening would auto-resume it first).
    fn ask_resume_fresh(&mut self) {
        let Some((session_id, label)) = self.cursor_target() else {
            return;
        };
        let attached = self.sessions.get(&session_id).is_some_and(|row| {
            row.status.is_agent_running || row.status.resume_reason == baton_protocol::ResumeReason::AgentStarting
        });
        if attached {
            self.flash(already_attached_fresh(), true);
            return;
        }
        self.overlay = Some(Overlay::Confirm(Confirmation::ResumeFresh { session_id, label }));
    }

    /// Puts a prompt that could not be sent back where it was written, unless the user has
    /// written something new there meanwhile.
    pub(super) fn give_back_draft(&mut self, session_id: &str, content: String) {
        if self.opened.as_deref() == Some(session_id) {
            if self.input.is_blank() {
                self.input = TextField::with_text(content);
            }
        } else if self.drafts.get(session_id).is_none_or(TextField::is_blank) {
            self.drafts.insert(session_id.to_string(), TextField::with_text(content));
        }
    }

    fn submit(&mut self) {
        self.submit_with(false);
    }

    /// Ctrl-S in the prompt: the message goes first, the running turn cancelled for it.
    fn steer(&mut self) {
        if self.overlay.is_none() && self.focus == Focus::Input {
            self.submit_with(true);
        }
    }

    fn submit_with(&mut self, steer: bool) {
        if let Some(Overlay::Rename(form)) = &mut self.overlay {
            let title = form.title.text().trim().to_string();
            if title.is_empty() {
                form.error = Some("the title must not be empty".into());
                return;
            }
            let task_id = form.task_id.clone();
            self.overlay = None;
            self.send(Request::RenameTask { task_id, title });
            return;
        }
        if let Some(Overlay::NewTask(form)) = &mut self.overlay {
            if form.submitting {
                return;
            }
            match form.params(&self.agents) {
                Ok(params) => {
                    // The form stays open until the server answers: an error is shown in it,
                    // with what was typed.
                    form.submitting = true;
                    form.error = None;
                    self.send(Request::CreateTask(params));
                }
                Err(error) => form.error = Some(error),
            }
            return;
        }
        if self.input.is_blank() {
            return;
        }
        if self.save_edited_queued() {
            return;
        }
        let Some(session_id) = self.target_session("write to") else {
            return;
        };
        let content = self.input.take();
        self.history.record(&content);
        self.sending += 1;
        self.scroll = 0;
        if steer {
            self.flash("steering: the running turn is cancelled and your message goes next", false);
        }
        self.send(Request::SendMessage { session_id, content, steer });
    }

    fn confirm(&mut self) {
        let Some(Overlay::Confirm(confirmation)) = self.overlay.take() else {
            return;
        };
        match confirmation {
            Confirmation::ResumeFresh { session_id, .. } => {
                self.send(Request::Resume { session_id, fresh: true, retry_failed: false, automatic: false })
            }
            Confirmation::RetryFailed { session_id, label, .. } => {
                self.flash(format!("retrying {label}…"), false);
                self.send(Request::Resume { session_id, fresh: false, retry_failed: true, automatic: false })
            }
            Confirmation::Stop { session_id, .. } => self.send(Request::Stop { session_id }),
            Confirmation::StartSession { task_id, .. } => self.send(Request::StartSession { task_id }),
            Confirmation::StopServer => {
                self.flash("stopping the local server and its agents…", false);
                self.commands.push(crate::command::Command::StopServer);
            }
            Confirmation::CancelTurn { session_id, label } => {
                self.flash_while_turn(format!("cancelling the turn of {label}…"), &session_id);
                self.send(Request::Cancel { session_id });
            }
            // The user was told that a running agent is stopped first (one may have started
            // since the list was read).
            Confirmation::DeleteTask { task_id, .. } => self.send(Request::DeleteTask { task_id, stop_agents: true }),
            Confirmation::Fork { session_id, label } => self.fork_confirmed(session_id, label),
            Confirmation::ArchiveTask { task_id, label, .. } => {
                self.flash(format!("archiving {label}…"), false);
                self.send(Request::ArchiveTask { task_id });
            }
            Confirmation::RevokeDevice { device_id, .. } => self.revoke_confirmed(device_id),
            Confirmation::Merge { task_id, label, remove_worktree, force } => {
                self.flash(format!("merging {label}…"), false);
                self.send(Request::Merge { task_id, remove_worktree, force });
            }
            Confirmation::PullRequest { task_id, label, force } => {
                self.flash(format!("pushing {label} and opening a pull request…"), false);
                self.send(Request::PullRequest { task_id, force });
            }
            Confirmation::ForceCommit { task_id, message, paths, .. } => {
                self.send(Request::Commit { task_id, message, paths, force: true })
            }
        }
        self.back_to_changes();
    }

    /// `Y` / `B`: the opened session's last answer, or its last code block, to the clipboard
    /// of the terminal the user sits at (OSC 52 works through SSH; tmux needs set-clipboard).
    fn copy(&mut self, code_block: bool) {
        self.show_key_target();
        let answer = self.opened_transcript().and_then(|t| {
            t.entries().iter().rev().find_map(|entry| match &entry.body {
                crate::transcript::EntryBody::Agent { text, .. } if !text.trim().is_empty() => Some(text.clone()),
                _ => None,
            })
        });
        let Some(answer) = answer else {
            if self.opened.as_deref().is_some_and(|id| self.transcript(id).is_none()) {
                self.flash("the transcript is still loading: press the key again in a moment", true);
                return;
            }
            self.flash("nothing to copy: open a session with an answer (Enter)", true);
            return;
        };
        let (text, what) = if code_block {
            match crate::layout::markdown::last_code_block(&answer) {
                Some(block) => (block, "the last code block"),
                None => {
                    self.flash("the last answer has no code block (Y copies the whole answer)", true);
                    return;
                }
            }
        } else {
            (answer, "the last answer")
        };
        if !self.clipboard.may_copy {
            self.flash(
                "this terminal cannot take a copy (no OSC 52, e.g. the Linux console): select the text with the mouse instead",
                true,
            );
            return;
        }
        let lines = match text.lines().count().max(1) {
            1 => "1 line".to_string(),
            n => format!("{n} lines"),
        };
        let through = match self.clipboard.multiplexer {
            crate::clipboard::Multiplexer::Tmux => " (in tmux: needs set -g set-clipboard on)",
            _ => "",
        };
        self.flash(
            format!(
                "copied {what} ({lines}) to your terminal's clipboard{through}; if nothing arrived, the terminal does not allow OSC 52"
            ),
            false,
        );
        self.commands.push(crate::command::Command::Copy(text));
    }

    /// `e`: edits the title of the highlighted session's task.
    fn open_rename_form(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let form = RenameForm {
            task_id: row.status.task_id.clone(),
            title: TextField::with_text(row.task_title.clone()),
            error: None,
        };
        self.overlay = Some(Overlay::Rename(form));
    }

    /// `D`: asks before deleting the highlighted session's task, saying how many sessions go
    /// with it and whether an agent of it is working.
    fn ask_delete_task(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let task_id = row.status.task_id.clone();
        let label = format!("“{}”", row.task_title);
        let of_task: Vec<_> = self.sessions.rows().iter().filter(|r| r.status.task_id == task_id).collect();
        let sessions = of_task.len();
        let working = of_task.iter().any(|r| r.status.is_agent_running || r.status.state == SessionState::Starting);
        self.overlay = Some(Overlay::Confirm(Confirmation::DeleteTask { task_id, label, sessions, working }));
    }

    fn open_new_task_form(&mut self) {
        if self.agents.is_empty() && self.is_connected() {
            self.send(Request::ListAgents);
        }
        // `n` is never an answer: someone who meant "no" is told how to say it.
        let asking = self.key_target().filter(|id| self.permission_pending(id));
        if let Some(row) = asking.as_deref().and_then(|id| self.sessions.get(id)) {
            let label = label(row);
            self.flash(format!("{label} still asks for permission: Esc, then y allows, N rejects"), false);
        }
        let mut form = NewTaskForm::new(&self.agents, self.local_workdir.clone());
        form.prefer_agent(&self.agents, self.default_agent.as_deref());
        self.overlay = Some(Overlay::NewTask(form));
    }

    /// y, N and 1-9 act on the highlighted session, like the other session keys, but never
    /// answer a request the user cannot see: the opened session's request is answered; another
    /// session's is opened, to be read and answered with a second press.
    fn permission_key(&mut self, choose: impl Fn(&Permission) -> Option<String>) {
        let Some((session_id, label)) = self.cursor_target() else {
            return;
        };
        if self.opened.as_deref() != Some(session_id.as_str()) {
            if self.permission_pending(&session_id) {
                self.open_session(&session_id);
                self.flash(
                    format!("{label} asks for permission: read the request, then press y or N again to answer"),
                    false,
                );
            } else {
                self.flash(format!("no permission request is waiting in {label}"), true);
            }
            return;
        }
        let Some(permission) = self.opened_transcript().and_then(|t| t.pending_permission()) else {
            self.flash(format!("no permission request is waiting in {label}"), true);
            return;
        };
        let request_id = permission.request_id.clone();
        match choose(permission) {
            Some(option_id) => self.send(Request::RespondPermission { session_id, request_id, option_id }),
            None => self.flash(format!("the request in {label} has no such option"), true),
        }
    }

    /// `S`: asks before starting a session of the highlighted session's task; the question
    /// warns when the task's agent is not installed on the server (see `ui/overlays.rs`).
    fn ask_start_session(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected: create a task with n", true);
            return;
        };
        let task_id = row.status.task_id.clone();
        let agent = row.status.agent.clone();
        let label = format!("“{}” with {}", row.task_title, agent);
        // The warning needs the agent list; the question shows it when the list arrives.
        if self.agents.is_empty() && self.is_connected() {
            self.send(Request::ListAgents);
        }
        self.overlay = Some(Overlay::Confirm(Confirmation::StartSession { task_id, label, agent }));
    }

    /// Scrolls up by `lines`; already at the top, asks for what is above it.
    pub(super) fn scroll_up(&mut self, lines: usize) {
        let top = self.metrics.transcript_max_scroll;
        if self.scroll >= top {
            self.load_older_messages();
        }
        self.scroll = (self.scroll + lines).min(top);
    }

    fn page(&self) -> usize {
        self.metrics.transcript_height.saturating_sub(2).max(1)
    }
}

/// The first option of a kind family (`allow_*` or `reject_*`), preferring the `_once` one.
fn pick_option(permission: &Permission, family: &str) -> Option<String> {
    super::approvals::pick_option(&permission.options, family)
}
