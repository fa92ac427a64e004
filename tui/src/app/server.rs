//! What the server tells the app: notifications, and the outcomes of its requests.

use baton_protocol::{ClientError, ClientEvent, ErrorCode, Notification};

use crate::command::{Outcome, Reply, Request};
use crate::transcript::Transcript;

use super::{App, TranscriptSlot};

impl App {
    /// A notification or an unsolicited error. `Closed` is the runner's business: it reports
    /// it through [`App::on_disconnected`].
    pub fn on_client_event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Notification(notification) => self.on_notification(notification),
            ClientEvent::Error(error) => self.flash(format!("server: {error}"), true),
            ClientEvent::Closed => {}
        }
    }

    pub fn on_notification(&mut self, notification: Notification) {
        match notification {
            Notification::Hello(_) => {}
            Notification::StateChanged(change) => {
                self.sessions.apply_state_changed(&change);
                self.schedule_list_refresh();
                self.dirty = true;
            }
            Notification::TaskUpdated(task) => {
                self.sessions.apply_task_updated(&task);
                self.schedule_list_refresh();
                self.dirty = true;
            }
            Notification::Event(record) => {
                // Events of a session whose backlog is still loading are replayed by the
                // subscription that follows the load, so dropping them here loses nothing.
                if let Some(TranscriptSlot::Ready(transcript)) = self.transcripts.get_mut(&record.session_id) {
                    let applied = transcript.apply(&record);
                    if applied && self.opened.as_deref() == Some(record.session_id.as_str()) {
                        self.dirty = true;
                    }
                }
            }
        }
    }

    pub fn on_outcome(&mut self, outcome: Outcome) {
        let Outcome { epoch, request, result } = outcome;
        if matches!(request, Request::ListSessions) {
            self.list_in_flight = false;
        }
        if let Request::SendMessage { .. } = request {
            self.sending = self.sending.saturating_sub(1);
        }
        self.dirty = true;
        match result {
            Ok(reply) => self.on_reply(request, reply),
            Err(error) if epoch != self.epoch => {
                tracing::debug!("ignoring failure from an old connection: {error}");
            }
            Err(error) => self.on_request_failed(request, error),
        }
    }

    fn on_reply(&mut self, request: Request, reply: Reply) {
        match reply {
            Reply::Sessions(rows) => self.sessions.set_rows(rows),
            Reply::Agents(agents) => self.agents = agents,
            Reply::Status(status) => {
                self.sessions.apply_status(&status);
                if self.auto_resume.should_resume(&status) {
                    tracing::info!(session = %status.session_id, reason = %status.resume_reason, "auto-resume");
                    self.flash("resuming the session…", false);
                    self.send(Request::Resume { session_id: status.session_id, fresh: false, automatic: true });
                }
            }
            Reply::Resumed(result) => {
                let text = if result.launched {
                    "resume started: the agent is starting".to_string()
                } else {
                    format!("the agent is already attached ({})", result.state)
                };
                self.flash(text, false);
                self.schedule_list_refresh();
            }
            Reply::Cancelled => self.flash("turn cancelled", false),
            Reply::Stopped(result) => {
                self.flash(format!("session stopped ({})", result.state), false);
                self.schedule_list_refresh();
            }
            Reply::MessageSent | Reply::Unsubscribed | Reply::PermissionAnswered => {}
            Reply::Messages(list) => {
                let session_id = match request {
                    Request::LoadMessages { session_id } => session_id,
                    Request::LoadOlderMessages { session_id, before_seq } => {
                        self.on_older_messages(&session_id, before_seq, list);
                        return;
                    }
                    _ => return,
                };
                if self.transcripts.get(&session_id) != Some(&TranscriptSlot::Loading) {
                    return;
                }
                let transcript = Transcript::from_backlog(list.messages, list.has_more);
                let since_seq = Some(transcript.last_seq());
                self.transcripts.insert(session_id.clone(), TranscriptSlot::Ready(transcript));
                if self.opened.as_deref() == Some(session_id.as_str()) && self.is_connected() {
                    self.send(Request::Subscribe { session_id, since_seq });
                }
            }
            Reply::Subscribed(result) => self.on_subscribed(&result.session_id, result.current_seq),
            Reply::TaskCreated(created) => {
                let session_id = created.session.status.session_id.clone();
                self.flash(format!("task created: {}", created.task.title), false);
                self.sessions.upsert(created.session);
                self.open_session(&session_id);
                self.schedule_list_refresh();
            }
        }
    }

    /// A server whose journal is behind what we hold (its database was replaced) cannot
    /// continue our transcript: start it over from the server's backlog.
    fn on_subscribed(&mut self, session_id: &str, current_seq: u64) {
        let held = match self.transcripts.get(session_id) {
            Some(TranscriptSlot::Ready(transcript)) => transcript.last_seq(),
            _ => return,
        };
        if current_seq < held {
            tracing::warn!(session = %session_id, held, current_seq, "server journal is behind; reloading");
            self.transcripts.remove(session_id);
            if self.opened.as_deref() == Some(session_id) {
                self.ensure_subscribed(session_id);
            }
        }
    }

    fn on_request_failed(&mut self, request: Request, error: ClientError) {
        let what = match &request {
            Request::ListSessions => "list sessions",
            Request::ListAgents => "list agents",
            Request::SessionStatus { .. } => "get the session status",
            Request::Resume { automatic: true, .. } => "auto-resume",
            Request::Resume { .. } => "resume",
            Request::Cancel { .. } => "cancel",
            Request::Stop { .. } => "stop",
            Request::SendMessage { .. } => "send the message",
            Request::LoadMessages { .. } => "load messages",
            Request::LoadOlderMessages { .. } => "load older messages",
            Request::Subscribe { .. } => "subscribe",
            Request::Unsubscribe { .. } => "unsubscribe",
            Request::RespondPermission { .. } => "answer the permission request",
            Request::CreateTask(_) => "create the task",
        };
        match request {
            Request::LoadMessages { session_id } => {
                // Forget the failed load so that opening the session again retries it.
                self.transcripts.remove(&session_id);
            }
            Request::LoadOlderMessages { session_id, .. } => {
                // Scrolling up past the top again retries.
                self.older_loading.remove(&session_id);
            }
            Request::Subscribe { session_id, .. }
                if error.server_error().map(|e| e.code) == Some(ErrorCode::ValidationError) =>
            {
                // The server rejects a since_seq beyond its journal: its database was
                // replaced, so what we hold does not continue it. Start over from its backlog.
                tracing::warn!(session = %session_id, "subscription rejected: {error}; reloading");
                self.transcripts.remove(&session_id);
                if self.opened.as_deref() == Some(session_id.as_str()) {
                    self.ensure_subscribed(&session_id);
                }
                return;
            }
            Request::SendMessage { content, .. } if self.input.is_blank() => {
                // Give the prompt back rather than lose what the user wrote.
                self.input = crate::text_field::TextField::with_text(content);
            }
            Request::Unsubscribe { .. } => {
                tracing::debug!("unsubscribe failed: {error}");
                return;
            }
            _ => {}
        }
        let text = match error {
            ClientError::Closed if !self.is_connected() => format!("cannot {what}: not connected"),
            error => format!("could not {what}: {error}"),
        };
        self.flash(text, true);
    }
}
