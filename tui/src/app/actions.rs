//! What each [`Action`] does to the app.

use crate::action::Action;
use crate::command::Request;
use crate::transcript::Permission;

use super::{App, Confirmation, Focus, NewTaskForm, Overlay};

impl App {
    pub fn handle_action(&mut self, action: Action) {
        self.dirty = true;
        match action {
            Action::Quit => self.quit = true,
            Action::ToggleHelp => {
                self.overlay = match self.overlay {
                    Some(Overlay::Help) => None,
                    _ => Some(Overlay::Help),
                }
            }
            Action::CloseOverlay => self.overlay = None,
            Action::MoveUp => self.sessions.move_cursor(-1),
            Action::MoveDown => self.sessions.move_cursor(1),
            Action::OpenSelected => self.open_cursor_session(),
            Action::FocusInput => self.focus = Focus::Input,
            Action::LeaveInput => self.focus = Focus::List,
            Action::Submit => self.submit(),
            Action::Edit(op) => match &mut self.overlay {
                Some(Overlay::NewTask(form)) => form.edit(&op, self.agents.len()),
                _ => self.input.apply(&op),
            },
            Action::CancelTurn => {
                if let Some(session_id) = self.target_session("cancel") {
                    self.send(Request::Cancel { session_id });
                }
            }
            Action::Resume => {
                if let Some(session_id) = self.target_session("resume") {
                    self.send(Request::Resume { session_id, fresh: false, automatic: false });
                }
            }
            Action::ResumeFresh => {
                if let Some(session_id) = self.target_session("resume") {
                    self.overlay = Some(Overlay::Confirm(Confirmation::ResumeFresh { session_id }));
                }
            }
            Action::Stop => {
                if let Some(session_id) = self.target_session("stop") {
                    self.overlay = Some(Overlay::Confirm(Confirmation::Stop { session_id }));
                }
            }
            Action::Confirm => self.confirm(),
            Action::NewTask => self.open_new_task_form(),
            Action::NextField | Action::PrevField => {
                if let Some(Overlay::NewTask(form)) = &mut self.overlay {
                    form.move_focus(action == Action::NextField);
                }
            }
            Action::AllowPermission => self.answer_permission(|p| pick_option(p, "allow")),
            Action::RejectPermission => self.answer_permission(|p| pick_option(p, "reject")),
            Action::ChooseOption(index) => {
                self.answer_permission(|p| p.options.get(index).map(|o| o.option_id.clone()))
            }
            Action::ScrollUp => {
                let top = self.metrics.transcript_max_scroll;
                // Already at the top: the user wants what is above it.
                if self.scroll >= top {
                    self.load_older_messages();
                }
                self.scroll = (self.scroll + self.page()).min(top);
            }
            Action::ScrollDown => self.scroll = self.scroll.saturating_sub(self.page()),
            Action::ScrollTop => {
                self.scroll = self.metrics.transcript_max_scroll;
                self.load_older_messages();
            }
            Action::ScrollBottom => self.scroll = 0,
        }
    }

    /// Opens the session under the cursor: the seed's "user navigates to a session".
    fn open_cursor_session(&mut self) {
        let Some(session_id) = self.sessions.cursor().map(|s| s.status.session_id.clone()) else {
            return;
        };
        self.open_session(&session_id);
    }

    pub(crate) fn open_session(&mut self, session_id: &str) {
        if self.opened.as_deref() != Some(session_id) {
            if let Some(previous) = self.opened.take() {
                // One subscription at a time keeps us well under the server's bound; the
                // transcript is kept and resubscribed from its last seq when reopened.
                if self.is_connected() {
                    self.send(Request::Unsubscribe { session_id: previous });
                }
            }
            self.opened = Some(session_id.to_string());
            self.scroll = 0;
        }
        self.sessions.set_cursor(session_id);
        self.auto_resume.select(session_id);
        if self.is_connected() {
            self.send(Request::SessionStatus { session_id: session_id.to_string() });
            self.ensure_subscribed(session_id);
        }
    }

    /// The opened session, for actions that need one; says so when there is none.
    fn target_session(&mut self, verb: &str) -> Option<String> {
        let target = self.opened.clone();
        if target.is_none() {
            self.flash(format!("open a session (Enter) to {verb} it"), true);
        }
        target
    }

    fn submit(&mut self) {
        if let Some(Overlay::NewTask(form)) = &mut self.overlay {
            match form.params(&self.agents) {
                Ok(params) => {
                    self.overlay = None;
                    self.send(Request::CreateTask(params));
                    self.flash("creating task…", false);
                }
                Err(error) => form.error = Some(error),
            }
            return;
        }
        if self.input.is_blank() {
            return;
        }
        let Some(session_id) = self.target_session("write to") else {
            return;
        };
        let content = self.input.take();
        self.sending += 1;
        self.scroll = 0;
        self.send(Request::SendMessage { session_id, content });
    }

    fn confirm(&mut self) {
        let Some(Overlay::Confirm(confirmation)) = self.overlay.take() else {
            return;
        };
        match confirmation {
            Confirmation::ResumeFresh { session_id } => {
                self.send(Request::Resume { session_id, fresh: true, automatic: false })
            }
            Confirmation::Stop { session_id } => self.send(Request::Stop { session_id }),
        }
    }

    fn open_new_task_form(&mut self) {
        if self.agents.is_empty() && self.is_connected() {
            self.send(Request::ListAgents);
        }
        self.overlay = Some(Overlay::NewTask(NewTaskForm::new(&self.agents, self.local_workdir.clone())));
    }

    fn answer_permission(&mut self, choose: impl Fn(&Permission) -> Option<String>) {
        let Some(session_id) = self.opened.clone() else {
            self.flash("no permission request is waiting", true);
            return;
        };
        let Some(permission) = self.opened_transcript().and_then(|t| t.pending_permission()) else {
            self.flash("no permission request is waiting", true);
            return;
        };
        let request_id = permission.request_id.clone();
        match choose(permission) {
            Some(option_id) => self.send(Request::RespondPermission { session_id, request_id, option_id }),
            None => self.flash("the request has no such option", true),
        }
    }

    fn page(&self) -> usize {
        self.metrics.transcript_height.saturating_sub(2).max(1)
    }
}

/// The first option of a kind family (`allow_*` or `reject_*`), preferring the `_once` one.
fn pick_option(permission: &Permission, family: &str) -> Option<String> {
    let once = format!("{family}_once");
    let options = &permission.options;
    options
        .iter()
        .find(|o| o.kind == once)
        .or_else(|| options.iter().find(|o| o.kind.starts_with(family)))
        .map(|o| o.option_id.clone())
}
