//! Prompts: `message.add`, ensureSessionRunning and handlePromptWithResume (see docs/RESUME.md,
//! 'Prompts and lazy resume'), and the turn that follows a prompt.

use std::sync::Arc;

use baton_protocol::{
    ErrorPayload, Message, MessageAddResult, MessageKind, SessionEvent, SessionState, StopReason, TaskState,
};

use super::execution::{Execution, Phase};
use super::launch::{new_turn_id, LaunchIntent};
use super::{store_logged, ApiResult, Orchestrator};
use crate::agent::acp::outgoing;
use crate::agent::acp::{BoxFuture, CallError};
use crate::agent::history::{EntryType, HistoryEntry};
use crate::agent::translate::stop_reason;
use crate::session_status::Live;
use crate::store::{ReportedTokens, StoreError, Transition};

/// What the start of a turn journals.
#[derive(Clone, Copy)]
pub(super) enum Journal<'a> {
    /// The user's message and the turn's start; with `dequeue`, the queued message it is
    /// leaves the queue in the same write.
    UserMessage { dequeue: Option<&'a str> },
    /// The turn's start only: its message was journaled by an attempt that did not reach the
    /// agent.
    TurnOnly,
}

/// Why a prompt could not be handed to the agent.
pub(crate) enum SendError {
    /// The execution went away before the prompt reached the agent: resume and retry.
    ExecutionGone,
    Api(ErrorPayload),
}

impl From<ErrorPayload> for SendError {
    fn from(e: ErrorPayload) -> Self {
        SendError::Api(e)
    }
}

impl Orchestrator {
    /// `message.add`: the user's message goes to the session's agent, which is resumed first
    /// when none runs (lazy recovery). Answers with the stored message once the turn started;
    /// while a turn runs, the message is queued instead (see orchestrator/queue.rs).
    pub async fn add_message(
        self: &Arc<Self>,
        session_id: &str,
        content: &str,
        steer: bool,
    ) -> ApiResult<MessageAddResult> {
        if content.trim().is_empty() {
            return Err(ErrorPayload::validation("content must not be empty"));
        }
        let (session, _) = self.store.get_session(session_id).await?;
        if session.state.is_terminal() {
            return Err(ErrorPayload::conflict(format!(
                "session is {}; start a new session of the task",
                session.state
            )));
        }
        // A RUNNING session without an agent is one whose turn a restart interrupted: it takes
        // the message (after a lazy resume) like a waiting one.
        let mut queue = self.store.message_queue(session_id).await?;
        if !self.turn_running(session_id) && !queue.messages.is_empty() && queue.held.is_none() {
            // Between a turn's end and the queue going on: the queue is settled first (its next
            // message sent, or the queue held), so this message neither jumps ahead of it nor
            // waits behind a queue about to be held.
            if let Err(e) = self.drain_queue(session_id, false).await {
                tracing::debug!(session_id, "the queue's next message: {}", e.message);
            }
            queue = self.store.message_queue(session_id).await?;
        }
        if super::queue::joins_queue(self.turn_running(session_id), &queue, session.state) {
            return self.queue_message(session_id, content, steer).await;
        }
        let turn_id = new_turn_id();
        match self.handle_prompt_with_resume(session_id, content, &turn_id, None).await {
            Ok(message) => Ok(MessageAddResult { message: Some(message), queued: None, turn_id: Some(turn_id) }),
            // A turn started meanwhile (the queue's next message): this one waits for it.
            Err(e) if e.code == baton_protocol::ErrorCode::Conflict && self.turn_running(session_id) => {
                self.queue_message(session_id, content, steer).await
            }
            Err(e) => Err(e),
        }
    }

    /// handlePromptWithResume: a prompt that finds the execution gone resumes the session and
    /// is retried once.
    /// With `dequeue`, the message is that queued message, which leaves the queue when its
    /// turn is journaled.
    pub(super) async fn handle_prompt_with_resume(
        self: &Arc<Self>,
        session_id: &str,
        content: &str,
        turn_id: &str,
        dequeue: Option<&str>,
    ) -> ApiResult<Message> {
        let execution = self.ensure_session_running(session_id).await?;
        match self.send_queued_prompt(&execution, content, turn_id, dequeue).await {
            Ok(message) => Ok(message),
            Err(SendError::Api(e)) => {
                self.settle_unprompted(&execution).await;
                Err(e)
            }
            Err(SendError::ExecutionGone) => {
                tracing::info!(
                    session_id,
                    "the agent went away before the prompt reached it; resuming and retrying once"
                );
                execution.process().wait_for(std::time::Duration::from_secs(5)).await;
                let _ =
                    tokio::time::timeout(self.timeouts.ready, execution.wait_phase(|p| matches!(p, Phase::Gone(_))))
                        .await;
                let execution = self.ensure_session_running(session_id).await?;
                match self.send_queued_prompt(&execution, content, turn_id, dequeue).await {
                    Ok(message) => Ok(message),
                    Err(SendError::Api(e)) => {
                        self.settle_unprompted(&execution).await;
                        Err(e)
                    }
                    Err(SendError::ExecutionGone) => {
                        Err(ErrorPayload::unavailable("the agent exited again before it could take the message"))
                    }
                }
            }
        }
    }

    /// A session whose agent was started for a message that then could not start its turn:
    /// the agent is ready and idle, so the session waits for input (it was left STARTING for
    /// the message, see `ResumeRequest::prompt_follows`). Nothing changes for a session in
    /// any other state, or whose agent is not ready.
    async fn settle_unprompted(&self, execution: &Execution) {
        if execution.phase() != Phase::Ready {
            return;
        }
        let session_id = execution.session_id().to_string();
        let idle = Transition {
            session_id: session_id.clone(),
            from: vec![SessionState::Starting],
            to: SessionState::WaitingForInput,
            task_state: Some(TaskState::Review),
            agent: Live::Running,
            last_error: None,
        };
        store_logged(&session_id, "the state change", self.store.transition(idle).await);
    }

    /// ensureSessionRunning: returns the ready execution, resuming the session when no agent
    /// runs. Waiting is event-driven (the execution's phase), bounded by the ready timeout.
    pub(crate) async fn ensure_session_running(self: &Arc<Self>, session_id: &str) -> ApiResult<Arc<Execution>> {
        let bound = self.timeouts.ready;
        let deadline = tokio::time::Instant::now() + bound;
        let mut launched = false;
        loop {
            let execution = match self.execution(session_id) {
                Some(execution) => execution,
                None if launched => {
                    return Err(ErrorPayload::unavailable_until_changed(
                        "the agent could not be resumed; see the session's last error",
                    ));
                }
                None => {
                    self.launch(session_id, LaunchIntent::ForPrompt).await?;
                    launched = true;
                    continue;
                }
            };
            let settled = tokio::time::timeout_at(deadline, execution.wait_phase(|p| *p != Phase::Starting)).await;
            let Ok(phase) = settled else {
                let message =
                    format!("the agent did not become ready within {} s; the session stays resumable", bound.as_secs());
                // Nothing stays stuck in STARTING: the launch is given up and can be retried.
                execution.abandon(message.clone()).await;
                return Err(ErrorPayload::unavailable(message));
            };
            match phase {
                Phase::Ready if execution.is_alive() => return Ok(execution),
                Phase::Gone(reason) if launched => {
                    return Err(ErrorPayload::unavailable_until_changed(format!(
                        "the agent could not be resumed: {reason}"
                    )));
                }
                _ => {
                    // A dead execution is detached by its exit watcher; wait for that, then
                    // launch a new one.
                    if tokio::time::timeout_at(deadline, execution.wait_phase(|p| matches!(p, Phase::Gone(_))))
                        .await
                        .is_err()
                    {
                        return Err(ErrorPayload::unavailable("the agent stopped answering; try again"));
                    }
                }
            }
        }
    }

    /// Starts a turn: RUNNING (compare-and-set from `from`), the user message journaled, the
    /// prompt written to the agent; the answer is awaited in the background.
    pub(crate) async fn send_prompt(
        self: &Arc<Self>,
        execution: &Arc<Execution>,
        content: &str,
        from: SessionState,
        turn_id: &str,
    ) -> Result<Message, SendError> {
        self.send_prompt_journaled(execution, content, from, turn_id, Journal::UserMessage { dequeue: None }).await
    }

    async fn send_queued_prompt(
        self: &Arc<Self>,
        execution: &Arc<Execution>,
        content: &str,
        turn_id: &str,
        dequeue: Option<&str>,
    ) -> Result<Message, SendError> {
        let journal = Journal::UserMessage { dequeue };
        self.send_prompt_journaled(execution, content, SessionState::WaitingForInput, turn_id, journal).await
    }

    /// Sends a prompt whose user message is already journaled (its turn is open): the agent
    /// exited before the first attempt reached it.
    /// Boxed: it launches an agent whose exit watcher may call it again.
    pub(super) fn deliver_again(
        self: Arc<Self>,
        session_id: String,
        content: String,
        turn_id: String,
    ) -> BoxFuture<()> {
        Box::pin(async move { self.deliver_again_now(session_id, content, turn_id).await })
    }

    async fn deliver_again_now(self: Arc<Self>, session_id: String, content: String, turn_id: String) {
        let sent = match self.ensure_session_running(&session_id).await {
            Ok(execution) => self
                .send_prompt_journaled(&execution, &content, SessionState::WaitingForInput, &turn_id, Journal::TurnOnly)
                .await
                .map_err(|e| match e {
                    SendError::Api(e) => e.message,
                    SendError::ExecutionGone => "the agent exited again".into(),
                }),
            Err(e) => Err(e.message),
        };
        if let Err(reason) = sent {
            tracing::warn!(%session_id, "the message could not be delivered: {reason}");
            let events = vec![
                SessionEvent::Error {
                    message: format!("Your message could not be delivered to the agent ({reason}); send it again."),
                },
                SessionEvent::TurnCompleted { stop_reason: StopReason::Interrupted, turn_id: Some(turn_id) },
            ];
            if let Err(e) = self.store.append_events(&session_id, events).await {
                tracing::error!(%session_id, "cannot record the undelivered message: {e}");
            }
            self.after_turn(&session_id);
        }
    }

    async fn send_prompt_journaled(
        self: &Arc<Self>,
        execution: &Arc<Execution>,
        content: &str,
        from: SessionState,
        turn_id: &str,
        journal: Journal<'_>,
    ) -> Result<Message, SendError> {
        let _gate = execution.hold_prompt_gate().await;
        let session_id = execution.session_id().to_string();
        let acp = match execution.acp() {
            Some(acp) if !acp.is_closed() && !execution.process().has_exited() => acp,
            _ => return Err(SendError::ExecutionGone),
        };
        self.record_unrecorded_close(execution).await.map_err(SendError::Api)?;
        // A session whose agent was started for this message is still STARTING (its agent is
        // ready): it goes straight to RUNNING, never through a WAITING_FOR_INPUT that would say
        // its turn is over before the turn ran.
        let from_states = match from {
            SessionState::WaitingForInput => vec![SessionState::WaitingForInput, SessionState::Starting],
            from => vec![from],
        };
        let transition = Transition {
            session_id: session_id.clone(),
            from: from_states,
            to: SessionState::Running,
            task_state: Some(TaskState::InProgress),
            agent: Live::Running,
            last_error: None,
        };
        if self.store.transition(transition).await.map_err(ErrorPayload::from)?.is_none() {
            return Err(SendError::Api(ErrorPayload::busy(
                "the session is not waiting for input (a turn may be running)",
            )));
        }
        let turn_number = match execution.life().open_turn(turn_id) {
            Ok(n) => n,
            Err(refused) => {
                // Stopped or gone since it was found alive: the caller resumes and retries.
                tracing::info!(%session_id, "{refused}");
                self.undo_running(execution, &session_id, from).await;
                return Err(SendError::ExecutionGone);
            }
        };
        let turn_id = Some(turn_id.to_string());
        let started = SessionEvent::TurnStarted { turn_id: turn_id.clone() };
        let (events, dequeue) = match journal {
            Journal::UserMessage { dequeue } => (
                vec![SessionEvent::UserMessage { text: content.to_string(), turn_id: turn_id.clone() }, started],
                dequeue,
            ),
            Journal::TurnOnly => (vec![started], None),
        };
        let journal_user_message = matches!(journal, Journal::UserMessage { .. });
        let stored = self.store.append_turn_start(&session_id, events, dequeue).await;
        let records = match stored {
            Ok(records) => records,
            Err(e) => {
                // Nothing was sent: undo the turn so the session is not left RUNNING.
                execution.checked(execution.life().close_turn());
                self.undo_running(execution, &session_id, from).await;
                return Err(SendError::Api(e.into()));
            }
        };
        // Built before the message is recorded (docs/RESUME.md, 'History injection'): the
        // injected history ends with the previous turn, and the new message appears once, as the
        // current request.
        let effective = self.build_effective_prompt(execution, content);
        if journal_user_message {
            execution.record_history(HistoryEntry::new(&session_id, EntryType::UserMessage, content));
        }
        execution.end_replay();
        let acp_session = execution.acp_session_id().unwrap_or_default();
        let user = &records[0];
        let message = Message {
            seq: user.seq,
            kind: MessageKind::User,
            text: content.to_string(),
            message_id: None,
            tool_call_id: None,
            status: None,
            data: None,
            created_at: user.created_at.clone(),
            updated_at: user.created_at.clone(),
        };
        let prompt = outgoing::prompt(&acp_session, &effective);
        let call = match acp.send_request(prompt.method, prompt.params) {
            Ok(call) => call,
            // The agent's output ended while the turn was being opened: nothing reached it. The
            // message is taken and delivered to the resumed agent, not interrupted (unless the
            // exit watcher already closed the turn: then the caller retries).
            Err(_) if execution.life().close_turn().is_ok() => {
                let this = self.clone();
                let gone = execution.clone();
                let content = content.to_string();
                let turn_id = turn_id.clone().unwrap_or_default();
                tokio::spawn(async move {
                    let ended = gone.wait_phase(|p| matches!(p, Phase::Gone(_)));
                    let _ = tokio::time::timeout(this.timeouts.ready, ended).await;
                    this.deliver_again(gone.session_id().to_string(), content, turn_id).await;
                });
                return Ok(message);
            }
            Err(_) => return Err(SendError::ExecutionGone),
        };
        let this = self.clone();
        let turn_execution = execution.clone();
        let prompt_id = call.id();
        let prompt_text = content.to_string();
        let turn = tokio::spawn(async move {
            // Hosted agents: the answer's output line counts as handled once the turn is closed.
            let (result, done) = call.wait_held().await;
            if matches!(result, Err(CallError::Transport(_))) && !acp.reached_agent(prompt_id).await {
                // Written into the pipe of an agent that was exiting: it never read it. Not
                // delivered means not interrupted: the exit watcher resumes and sends it.
                turn_execution.checked(turn_execution.life().prompt_undelivered(turn_number, prompt_text));
                return;
            }
            this.finish_turn(&turn_execution, result).await;
            drop(done);
        });
        execution.hold_answer_task(turn);
        Ok(message)
    }

    /// Takes a session that was moved to RUNNING for a turn that did not start back to `from`;
    /// when the database refuses, the transition is kept and retried before the next prompt.
    async fn undo_running(&self, execution: &Execution, session_id: &str, from: SessionState) {
        let back = Transition {
            session_id: session_id.to_string(),
            from: vec![SessionState::Running],
            to: from,
            task_state: Some(TaskState::Review),
            agent: Live::Running,
            last_error: None,
        };
        if let Err(e) = self.store.transition(back.clone()).await {
            tracing::error!(%session_id, "cannot take the session back to {from}: {e}; retried before the next prompt");
            execution.keep_unrecorded_close(Vec::new(), back);
        }
    }

    /// buildEffectivePrompt: the recorded history is injected once, into the first prompt after
    /// a fresh start of an agent with history injection.
    fn build_effective_prompt(&self, execution: &Execution, content: &str) -> String {
        if execution.take_history_injection() {
            return self.history.generate_resume_context(execution.session_id(), content);
        }
        content.to_string()
    }

    /// What a failed turn tells the user: an authentication refusal gets the same hint as at
    /// start (the methods the agent offers, what to set); any other error names the agent's
    /// log and quotes its last lines, which usually say what went wrong ("stream
    /// disconnected…") where the agent's answer only says "Internal error".
    fn turn_failure(&self, execution: &Execution, error: &CallError) -> String {
        let agent = execution.agent();
        if let CallError::Rpc(rpc) = error {
            if rpc.code == -32000 {
                let hint =
                    crate::agent::auth::explain_missing(&agent.name, &agent.command, &execution.auth_methods(), None);
                return format!("The agent failed the turn: {error}. {hint}");
            }
        }
        let log = self.agent_log(execution.session_id());
        let tail = log_tail(&log, 5);
        if tail.is_empty() {
            format!("The agent failed the turn: {error} (its log: {})", log.display())
        } else {
            format!(
                "The agent failed the turn: {error}. The last lines of its log ({}):\n{}",
                log.display(),
                tail.join("\n")
            )
        }
    }

    /// The turn ended (the prompt's answer, after every update of the turn was applied).
    pub(super) async fn finish_turn(
        self: &Arc<Self>,
        execution: &Arc<Execution>,
        result: Result<serde_json::Value, CallError>,
    ) {
        let session_id = execution.session_id().to_string();
        let (stop, error, tokens) = match result {
            Ok(value) => (stop_reason(&value), None, ReportedTokens::from_prompt_result(&value)),
            // The exit watcher owns a crash: it closes the turn as interrupted.
            Err(CallError::Transport(_)) => return,
            Err(e) => (StopReason::Error, Some(self.turn_failure(execution, &e)), None),
        };
        // Refused when the turn was already closed (by a stop, the exit watcher, a forced cancel).
        let Ok(turn) = execution.life().close_turn() else {
            return;
        };
        // Some agents answer a cancel with `end_turn`, or with an error from the work they
        // abandoned (opencode 1.18 answers -32603), where ACP asks for `cancelled`: for the user
        // who cancelled, the turn was cancelled, and the abandoned work's error is no failure.
        let (stop, error) = match (stop, error) {
            (StopReason::EndTurn, error) if turn.cancelled => (StopReason::Cancelled, error),
            (StopReason::Error, Some(said)) if turn.cancelled => {
                tracing::info!(%session_id, "the agent answered the cancelled turn with an error: {said}");
                (StopReason::Cancelled, None)
            }
            other => other,
        };
        execution.flush_agent_history();
        // Before `turn_completed`: a client that reads the usage when the turn ends finds it.
        self.record_turn_usage(execution, turn.id.clone(), tokens).await;
        let mut events = Vec::new();
        if let Some(message) = &error {
            events.push(SessionEvent::Error { message: message.clone() });
        }
        events.push(SessionEvent::TurnCompleted { stop_reason: stop, turn_id: turn.id });
        // storeResumeToken, third of three: the stream completed.
        if let Some(token) = execution.acp_session_id() {
            store_logged(
                &session_id,
                "the resume token",
                self.store.store_resume_token(&session_id, execution.id(), Some(token)).await,
            );
        }
        let transition = Transition {
            session_id: session_id.clone(),
            from: vec![SessionState::Running],
            to: SessionState::WaitingForInput,
            task_state: Some(TaskState::Review),
            agent: Live::Running,
            last_error: error.map(Some),
        };
        // Under the close gate: a message that comes meanwhile finds the end saved, or kept.
        let gate = execution.hold_close_gate().await;
        if let Err(e) = self.close_turn(events.clone(), transition.clone()).await {
            // The database refused: the session stays RUNNING in the journal, and no client is
            // told the turn ended. The close is kept and tried again before the next prompt;
            // when the disk is full, also as soon as there is room.
            tracing::error!(session_id = %execution.session_id(), "cannot close the turn: {e}");
            execution.note_unsaved_turn_end(e.to_string());
            execution.keep_unrecorded_close(events, transition);
            drop(gate);
            if e.is_disk_full() {
                self.record_close_when_room(execution).await;
            }
            return;
        }
        drop(gate);
        self.after_turn(&session_id);
    }

    /// Saves the end of a turn the disk had no room for once there is, tried again after a
    /// wait that doubles up to `MOST_WAIT_FOR_ROOM` (clients heard from the store that the disk
    /// is full). Ends when it is saved, by this or by a prompt, or when it fails otherwise.
    async fn record_close_when_room(&self, execution: &Execution) {
        let mut wait = std::time::Duration::from_millis(50);
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(super::execution::MOST_WAIT_FOR_ROOM);
            // A message's own try holds the gate meanwhile: what is left after it is still due.
            match self.save_unrecorded_close(execution).await {
                Ok(()) => return,
                Err(e) if e.is_disk_full() => {}
                Err(e) => {
                    tracing::error!(session_id = %execution.session_id(), "cannot close the turn: {e}");
                    return;
                }
            }
        }
    }

    /// Tries once, under the close gate, to save the end the database refused, if one is kept
    /// (it stays kept, with the reason noted, when the try fails). Ok when none is left.
    async fn save_unrecorded_close(&self, execution: &Execution) -> Result<(), StoreError> {
        let _gate = execution.hold_close_gate().await;
        let Some((events, transition)) = execution.unrecorded_close() else {
            return Ok(());
        };
        match self.close_turn(events, transition).await {
            Ok(()) => {
                execution.close_recorded();
                Ok(())
            }
            Err(e) => {
                execution.note_unsaved_turn_end(e.to_string());
                Err(e)
            }
        }
    }

    /// One write: a client that sees `turn_completed` and answers at once finds the session
    /// already WAITING_FOR_INPUT (two writes left a window where its message got CONFLICT).
    async fn close_turn(&self, events: Vec<SessionEvent>, transition: Transition) -> Result<(), StoreError> {
        let session_id = transition.session_id.clone();
        self.store.append_with_transition(&session_id, events, transition).await.map(|_| ())
    }

    /// Records the end of a turn the database refused earlier. Until that succeeds, prompts get
    /// the database's error instead of a CONFLICT about a turn that is in fact over.
    async fn record_unrecorded_close(&self, execution: &Execution) -> Result<(), ErrorPayload> {
        self.save_unrecorded_close(execution)
            .await
            .map_err(|e| unsaved_turn_end(&e.to_string(), "the message was not sent"))
    }
}

/// What a message and a cancel are both answered while the end of a turn is not saved yet: the
/// turn is over, and the session shows RUNNING until its end is saved.
pub(super) fn unsaved_turn_end(reason: &str, consequence: &str) -> ErrorPayload {
    ErrorPayload::unavailable(format!(
        "the turn is over but its end could not be saved yet ({reason}); it is saved as soon as the database takes \
         writes again; {consequence}"
    ))
}

/// The last `lines` non-empty lines of a log, read from its last 8 KiB, without terminal
/// control sequences.
fn log_tail(path: &std::path::Path, lines: usize) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(8 * 1024);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).and_then(|_| file.read_to_end(&mut bytes)).is_err() {
        return Vec::new();
    }
    let text = baton_protocol::strip_terminal_controls(&String::from_utf8_lossy(&bytes));
    let mut kept: Vec<String> = text
        .lines()
        .skip(usize::from(start > 0))
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(300).collect())
        .collect();
    let from = kept.len().saturating_sub(lines);
    kept.drain(..from);
    kept
}
