//! What the server tells the app: notifications, and the outcomes of its requests.

use baton_protocol::{ClientError, ClientEvent, ErrorCode, Notification};

use crate::command::{Outcome, Reply, Request};
use crate::transcript::Transcript;

use super::{App, Overlay, TranscriptSlot};

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
            // Newer servers may add notifications: nothing to do with them here.
            Notification::Hello(_) | Notification::Unknown { .. } => {}
            Notification::PermissionQueueChanged(changed) => self.on_queue_changed(&changed),
            Notification::AttentionChanged(changed) => {
                self.needs_you.server_count = Some(changed.count);
                self.dirty = true;
            }
            Notification::StorageChanged(storage) if !storage.writable => self.flash(
                format!("server: its disk is full ({}); agents' output is held until there is room", storage.reason),
                true,
            ),
            Notification::StorageChanged(_) => {
                self.flash("server: its disk has room again; agents' output resumes", false)
            }
            // The close that follows starts the reconnection.
            Notification::Shutdown(shutdown) => self.flash(format!("server: {}", shutdown.reason), false),
            Notification::StateChanged(change) => {
                let attention_before = self.sessions.get(&change.session_id).map(|row| row.status.attention);
                self.sessions.apply_state_changed(&change);
                self.alert_if_newly_needed(attention_before, &change);
                self.resume_state_changed(&change);
                if change.state != baton_protocol::SessionState::Running {
                    self.turn_ended(&change.session_id);
                }
                if change.previous_state == Some(baton_protocol::SessionState::Running)
                    && change.state != baton_protocol::SessionState::Running
                {
                    // A turn ended: its usage is recorded by now.
                    let opened = self.opened.clone().filter(|id| *id == change.session_id);
                    self.request_usage(opened);
                    // A turn of a session not subscribed to ended: its task's changes too.
                    let turn_end = baton_protocol::SessionEvent::TurnCompleted {
                        stop_reason: baton_protocol::StopReason::EndTurn,
                        turn_id: None,
                    };
                    self.changes_follow(&change.session_id, &turn_end);
                }
                let starting_done = change.state != baton_protocol::SessionState::Starting;
                if starting_done
                    && self.flash.as_ref().and_then(|f| f.while_starting.as_deref()) == Some(change.session_id.as_str())
                {
                    self.flash = None;
                }
                if self.auto_resume.on_state_changed(&change) && self.is_connected() {
                    // The notification does not say whether the session can be resumed.
                    self.send(Request::SessionStatus { session_id: change.session_id.clone() });
                }
                self.schedule_list_refresh();
                self.dirty = true;
            }
            Notification::TaskUpdated(task) => {
                self.archive_changed(&task.id, task.archived);
                self.sessions.apply_task_updated(&task);
                self.schedule_list_refresh();
                self.dirty = true;
            }
            Notification::TaskDeleted(deleted) => {
                self.forget_task(&deleted.task_id, &deleted.session_ids);
                self.dirty = true;
            }
            Notification::Event(record) => {
                if matches!(record.event, baton_protocol::SessionEvent::TurnCompleted { .. }) {
                    self.turn_ended(&record.session_id);
                }
                self.options_event(&record.session_id, &record.event);
                self.queue_event(&record.session_id, &record.event);
                self.changes_follow(&record.session_id, &record.event);
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
        if matches!(request, Request::MoreSessions { .. }) {
            self.more_sessions_in_flight = false;
        }
        if let Request::SendMessage { .. } = request {
            self.sending = self.sending.saturating_sub(1);
        }
        self.dirty = true;
        match result {
            Ok(reply) => self.on_reply(request, reply),
            // The new-task and export forms wait for their answer, whichever connection it
            // comes from.
            Err(error)
                if epoch != self.epoch && !matches!(request, Request::CreateTask(_) | Request::Export { .. }) =>
            {
                tracing::debug!("ignoring failure from an old connection: {error}");
            }
            Err(error) => self.on_request_failed(request, error),
        }
    }

    fn on_reply(&mut self, request: Request, reply: Reply) {
        match reply {
            Reply::Sessions(rows) => {
                self.sessions.set_rows(rows);
                self.reopen_after_list();
            }
            Reply::SessionPage { rows, next_cursor, appended: false, attention_count } => {
                self.needs_you.server_count = Some(attention_count);
                self.sessions.set_first_page(rows, next_cursor);
                self.reopen_after_list();
                self.load_more_sessions();
            }
            Reply::SessionPage { rows, next_cursor, appended: true, attention_count } => {
                self.needs_you.server_count = Some(attention_count);
                self.sessions.append_page(rows, next_cursor);
                self.load_more_sessions();
            }
            Reply::Agents(agents) => {
                if let Some(Overlay::NewTask(form)) = &mut self.overlay {
                    form.agents_arrived(&agents);
                }
                self.agents = agents;
            }
            Reply::Status(status) => {
                self.sessions.apply_status(&status);
                self.resume_status(&status);
                if self.auto_resume.should_resume(&status) {
                    tracing::info!(session = %status.session_id, reason = %status.resume_reason, "auto-resume");
                    self.flash_while_starting("resuming the session…", &status.session_id);
                    self.send(Request::Resume {
                        session_id: status.session_id,
                        fresh: false,
                        retry_failed: false,
                        automatic: true,
                    });
                }
            }
            Reply::Resumed(result) => {
                self.resume_answered(&result.session_id, result.launched);
                let fresh = matches!(request, Request::Resume { fresh: true, .. });
                if result.launched {
                    self.flash_while_starting("resume started: the agent is starting", &result.session_id);
                } else if fresh {
                    // The server starts over only a session without an agent.
                    self.flash(already_attached_fresh(), true);
                } else {
                    self.flash(format!("the agent is already attached ({})", result.state), false);
                }
                self.schedule_list_refresh();
            }
            // The turn's end shows in the transcript (turn_completed), where it stays.
            Reply::Cancelled => {}
            Reply::Stopped(result) => {
                let name = self.sessions.get(&result.session_id).map(crate::sessions::label);
                let name = name.unwrap_or_else(|| result.session_id.clone());
                self.flash(format!("stopped {name} ({})", result.state), false);
                self.schedule_list_refresh();
            }
            Reply::PermissionAnswered => {
                if let Request::RespondPermission { session_id, request_id, option_id } = &request {
                    self.flash(self.answered(session_id, request_id, option_id), false);
                }
            }
            Reply::Unsubscribed => {}
            Reply::MessageSent { queued } => {
                let steered = matches!(request, Request::SendMessage { steer: true, .. });
                if queued && steered {
                    self.flash("steered: the running turn is cancelled and your message goes next", false);
                } else if queued {
                    self.flash("queued: sent when the running turn ends (u lists the queue)", false);
                }
            }
            Reply::Queue(result) => self.queue_answered(*result),
            Reply::Changes(result) => self.changes_listed(*result),
            Reply::Diff { task_id, result } => self.diff_read(&task_id, *result),
            Reply::Committed(result) => {
                let on = result.branch.as_deref().map(|b| format!(" on {b}")).unwrap_or_default();
                let short = result.commit.get(..12).unwrap_or(&result.commit);
                self.git_done(format!(
                    "committed {short}{on} ({})",
                    crate::sessions::count(result.files as usize, "file")
                ));
            }
            Reply::Merged(result) => {
                let how = if result.fast_forward { "fast-forward" } else { "merge commit" };
                let removed = if result.worktree_removed.is_some() { "; worktree and branch removed" } else { "" };
                self.git_done(format!("merged into {} ({how}, {} commits){removed}", result.into, result.commits));
                if result.worktree_removed.is_some() {
                    // The task is archived and its directory gone: nothing left to review.
                    if matches!(self.overlay, Some(Overlay::Changes(_))) {
                        self.overlay = None;
                    }
                }
            }
            Reply::PullRequestOpened(result) => {
                self.git_done(format!("pull request opened: {}", result.url));
                self.commands.push(crate::command::Command::Copy(result.url));
            }
            Reply::Shell(result) => self.shell_answered(result),
            Reply::Devices(devices) => self.devices_listed(devices),
            Reply::Paired(pairing) => self.device_paired(*pairing),
            Reply::DeviceRevoked(result) => self.device_revoked(result),
            Reply::Messages(mut list) => {
                mark_cut_texts(&mut list);
                let session_id = match request {
                    Request::LoadMessages { session_id } => session_id,
                    Request::LoadOlderMessages { session_id, before_seq } => {
                        self.on_older_messages(&session_id, before_seq, list);
                        self.continue_jump();
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
                self.continue_jump();
            }
            Reply::Subscribed(result) => {
                let since_seq = match request {
                    Request::Subscribe { since_seq, .. } => since_seq.unwrap_or(0),
                    _ => 0,
                };
                self.on_subscribed(&result.session_id, since_seq, result.current_seq)
            }
            Reply::TaskCreated(created) => {
                if matches!(&self.overlay, Some(Overlay::NewTask(form)) if form.submitting) {
                    self.overlay = None;
                }
                let session_id = created.session.status.session_id.clone();
                self.flash(format!("task created: {}", created.task.title), false);
                self.sessions.upsert(created.session);
                self.open_session(&session_id);
                self.schedule_list_refresh();
            }
            Reply::TaskChanged(task) => {
                let what = match request {
                    Request::UnarchiveTask { .. } => "unarchived (back in the list)",
                    _ => "renamed to",
                };
                self.flash(format!("{what} “{}”", task.title), false);
                self.archive_changed(&task.id, task.archived);
                self.sessions.apply_task_updated(&task);
                self.schedule_list_refresh();
            }
            Reply::TaskArchived(result) => {
                let stopped = match result.stopped_sessions.len() {
                    0 => String::new(),
                    1 => ", its running agent stopped".to_string(),
                    n => format!(", its {n} running agents stopped"),
                };
                self.flash(
                    format!("archived “{}”{stopped} (z lists archived tasks, u there unarchives)", result.task.title),
                    false,
                );
                self.archive_changed(&result.task.id, true);
                self.sessions.apply_task_updated(&result.task);
                self.schedule_list_refresh();
            }
            Reply::ArchivedSessions(rows) => self.archived_listed(rows),
            Reply::TaskDeleted(deleted) => {
                self.forget_task(&deleted.task_id, &deleted.session_ids);
                let sessions = deleted.session_ids.len();
                let worktree = if deleted.worktree_removed.is_some() { " and its worktree" } else { "" };
                self.flash(format!("deleted the task with {sessions} session(s){worktree}"), false);
                self.schedule_list_refresh();
            }
            Reply::Permissions(list) => self.approvals_listed(list.requests, list.total),
            Reply::Rules { session_id, rules } => self.rules_listed(&session_id, rules),
            Reply::RuleRevoked(rule) => self.rule_revoked(rule),
            Reply::Options(result) => self.options_answered(&request, *result),
            Reply::Exported { .. } | Reply::ExportNotWritten { .. } => self.on_export_reply(reply),
            Reply::SearchHits(page) => {
                if let Request::Search { query, cursor } = &request {
                    self.on_search_hits(query, cursor.as_deref(), page);
                }
            }
            Reply::Forked(session) => self.on_forked(*session),
            Reply::Usage(result) => self.on_usage(*result),
            Reply::SessionStarted(session) => {
                let session_id = session.status.session_id.clone();
                self.flash(format!("started {}", crate::sessions::label(&session)), false);
                self.sessions.upsert(*session);
                self.open_session(&session_id);
                self.schedule_list_refresh();
            }
        }
    }

    /// A deleted task: its rows, transcripts and drafts go; an opened session of it is closed.
    fn forget_task(&mut self, task_id: &str, session_ids: &[String]) {
        self.sessions.remove_task(task_id);
        for session_id in session_ids {
            self.transcripts.remove(session_id);
            self.drafts.remove(session_id);
            if self.opened.as_deref() == Some(session_id.as_str()) {
                self.opened = None;
                self.input = Default::default();
            }
        }
    }

    /// "answered “title” · agent · id: Allow once": which session's request got which answer.
    fn answered(&self, session_id: &str, request_id: &str, option_id: &str) -> String {
        let label = self.sessions.get(session_id).map_or_else(|| session_id.to_string(), crate::sessions::label);
        let option = self
            .transcript(session_id)
            .and_then(|t| t.permission(request_id))
            .and_then(|p| p.options.iter().find(|o| o.option_id == option_id))
            .map_or(option_id, |o| o.name.as_str());
        format!("answered {label}: {option}")
    }

    /// A server whose journal is behind the seq we subscribed from (its database was replaced)
    /// cannot continue our transcript: start it over from the server's backlog.
    ///
    /// The comparison is with the `since_seq` sent, not with what the transcript holds when
    /// the answer is handled: live events travel on the notification channel and may be
    /// applied before this answer, which comes through a request task. A new session
    /// subscribed at seq 0 whose first event (seq 1) was applied first looked "behind"
    /// (`held=1 current_seq=0`) and was reloaded for nothing.
    fn on_subscribed(&mut self, session_id: &str, since_seq: u64, current_seq: u64) {
        if !matches!(self.transcripts.get(session_id), Some(TranscriptSlot::Ready(_))) {
            return;
        }
        if current_seq < since_seq {
            tracing::warn!(session = %session_id, since_seq, current_seq, "server journal is behind; reloading");
            self.transcripts.remove(session_id);
            if self.opened.as_deref() == Some(session_id) {
                self.ensure_subscribed(session_id);
            }
        }
    }

    fn on_request_failed(&mut self, request: Request, error: ClientError) {
        let what = match &request {
            Request::ListSessions | Request::MoreSessions { .. } => "list sessions",
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
            Request::StartSession { .. } => "start a session",
            Request::RenameTask { .. } => "rename the task",
            Request::ArchiveTask { .. } => "archive the task",
            Request::UnarchiveTask { .. } => "unarchive the task",
            Request::ListArchived => "list the archived tasks",
            Request::DeleteTask { .. } => "delete the task",
            Request::ListPermissions => "list the approval queue",
            Request::ListRules { .. } => "list the standing answers",
            Request::RevokeRule { .. } => "revoke the standing answer",
            Request::Options { .. } => "read the agent's modes and options",
            Request::QueueList { .. } => "read the queued messages",
            Request::ListDevices => "list the paired devices",
            Request::PairDevice { .. } => "make a pairing code",
            Request::RevokeDevice { .. } => "revoke the device",
            Request::QueueEdit { .. } => "edit the queued message",
            Request::QueueRemove { .. } => "remove the queued message",
            Request::QueueRelease { .. } => "send the next queued message",
            Request::SetMode { .. } => "switch the mode",
            Request::SetOption { .. } => "set the option",
            Request::Export { .. } => "export the transcript",
            Request::Search { .. } => "search",
            Request::Fork { agent: None, .. } => "fork the session",
            Request::Fork { agent: Some(_), .. } => "hand the session over",
            Request::Usage { .. } => "read the usage",
            Request::Changes { .. } => "read the task's changes",
            Request::Diff { .. } => "read the diff",
            Request::Commit { .. } => "commit",
            Request::Merge { .. } => "merge",
            Request::PullRequest { .. } => "open a pull request",
            Request::Shell { .. } => "open a shell",
        };
        let text = match &error {
            ClientError::Closed if !self.is_connected() => format!("cannot {what}: not connected"),
            error => format!("could not {what}: {error}"),
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
                if error.server_error().map(|e| &e.code) == Some(&ErrorCode::ValidationError) =>
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
            Request::SendMessage { session_id, content, .. } => {
                // Give the prompt back rather than lose what the user wrote.
                self.give_back_draft(&session_id, content);
            }
            Request::CreateTask(_) => {
                if let Some(Overlay::NewTask(form)) = &mut self.overlay {
                    // The form is still open with what was typed: the error goes there. A lost
                    // connection leaves it unknown whether the task was created.
                    form.submitting = false;
                    form.error = Some(match error {
                        ClientError::Closed => format!("{text} (the task may exist: check the list)"),
                        _ => text,
                    });
                    return;
                }
            }
            Request::Unsubscribe { .. } => {
                tracing::debug!("unsubscribe failed: {error}");
                return;
            }
            Request::ListPermissions => self.approvals_failed(),
            Request::Changes { task_id, .. } if self.changes_failed(&task_id, text.clone()) => return,
            Request::Commit { .. } | Request::Merge { .. } | Request::PullRequest { .. } => {
                self.git_refused(&request, &error, text);
                return;
            }
            // Said where it was asked for, when that is still open.
            Request::Export { .. } if self.export_failed(text.clone()) => return,
            Request::Search { query, .. } if self.search_failed(&query, text.clone()) => return,
            Request::Usage { .. } => {
                // What is shown stays as it was; an older server has no usage.get.
                tracing::debug!("usage.get failed: {error}");
                return;
            }
            Request::Resume { session_id, automatic: true, .. }
                if error.server_error().map(|e| &e.code) == Some(&ErrorCode::Conflict) =>
            {
                // The session changed state under the auto-resume (its agent was starting, or
                // failed to): not the user's doing. What it is now decides what is shown.
                tracing::info!(session = %session_id, "auto-resume raced a state change: {error}");
                self.send(Request::SessionStatus { session_id });
                self.schedule_list_refresh();
                return;
            }
            Request::Resume { session_id, .. } if self.is_connected() => {
                // Shown with the keys that retry it where the session is shown.
                let why = match &error {
                    ClientError::Server(payload) => payload.message.clone(),
                    other => other.to_string(),
                };
                self.resume_request_failed(&session_id, why);
            }
            _ => {}
        }
        self.flash(text, true);
    }
}

/// What `R` gets for a session whose agent is attached: the server only starts over a session
/// without one, and stopping makes a session final, so starting over is a new session.
pub(super) fn already_attached_fresh() -> String {
    "the agent is running, and R only starts over a session without an agent: \
     to start over, stop it (s) and start a new session of the task (S)"
        .to_string()
}

/// Says at the end of each entry `message.list` cut (a very long answer) how much is not shown
/// and where to read it whole: the transcript shows the first 256 KiB.
fn mark_cut_texts(list: &mut baton_protocol::MessageListResult) {
    for cut in &list.cut {
        let Some(message) = list.messages.iter_mut().find(|m| m.seq == cut.seq) else { continue };
        let more = cut.total_bytes.saturating_sub(message.text.len() as u64);
        message.text.push_str(&format!(
            "\n\n[… {} more not shown here ({} in all): export the transcript (x) to read it whole]",
            super::export::size(usize::try_from(more).unwrap_or(usize::MAX)),
            super::export::size(usize::try_from(cut.total_bytes).unwrap_or(usize::MAX))
        ));
    }
}
