//! The exit watcher: what happens when an agent process ends on its own.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::{SessionEvent, SessionState, StopReason, TaskState};

use crate::orchestrator::execution::{Execution, Phase};
use crate::orchestrator::{store_logged, Orchestrator};
use crate::session_status::Live;
use crate::store::{ExecutorStatus, Transition};

impl Orchestrator {
    /// Watches the agent process; when an agent that was ready exits on its own, the session
    /// keeps its conversation and token and becomes resumable, with the error recorded.
    pub(in crate::orchestrator) async fn watch_exit(self: Arc<Self>, execution: Arc<Execution>) {
        // An agent that closed its output can no longer be talked to, even if it still runs.
        let exit = match execution.acp() {
            Some(acp) => tokio::select! {
                exit = execution.process().wait() => exit,
                _ = acp.wait_drained(Duration::MAX) => execution.process().kill().await,
            },
            None => execution.process().wait().await,
        };
        // A launch still in progress reports its own failure (abort_start).
        execution.wait_phase(|p| *p != Phase::Starting).await;
        if self.is_shutting_down() || !execution.life().is_running() {
            return;
        }
        // A prompt being sent right now finishes opening its turn first.
        let _gate = execution.hold_prompt_gate().await;
        // Everything the agent wrote before it died is journaled before the turn is closed.
        if let Some(acp) = execution.acp() {
            if acp.wait_drained(Duration::from_secs(5)).await {
                // Every call is answered or failed now. A turn the agent answered before it
                // exited closes itself as answered; only a turn left unanswered is interrupted.
                if let Some(turn) = execution.take_answer_task() {
                    let _ = tokio::time::timeout(Duration::from_secs(5), turn).await;
                }
            }
        }
        let session_id = execution.session_id().to_string();
        let message = format!("The agent {exit}.");
        tracing::warn!(%session_id, "{message}");
        execution.cancel_permissions();
        execution.flush_agent_history();
        let mut events = Vec::new();
        let closed = execution.life().close_turn().ok();
        // The open turn's prompt that never reached the agent: delivered to the resumed agent.
        let undelivered = closed.as_ref().and_then(|turn| {
            let content = turn.undelivered.clone()?;
            Some((content, turn.id.clone().unwrap_or_default()))
        });
        // One line says what happened and what comes next.
        if undelivered.is_some() {
            events.push(SessionEvent::status(format!(
                "{message} Your message had not reached it: the session is resumed to deliver it."
            )));
        } else if let Some(turn) = closed {
            events.push(SessionEvent::Error {
                message: format!(
                    "{message} The turn was interrupted and will not be re-sent by itself; \
                     the session resumes when you send a message."
                ),
            });
            events.push(SessionEvent::TurnCompleted { stop_reason: StopReason::Interrupted, turn_id: turn.id });
        } else {
            events.push(SessionEvent::status(format!(
                "{message} The session will be resumed when you send a message, or resume it now."
            )));
        }
        store_logged(
            &session_id,
            "the executor status",
            self.store.set_executor_status(&session_id, execution.id(), ExecutorStatus::Exited).await,
        );
        store_logged(&session_id, "the events", self.store.append_events(&session_id, events).await);
        let transition = Transition {
            session_id: session_id.clone(),
            from: vec![SessionState::Running, SessionState::WaitingForInput, SessionState::Starting],
            to: SessionState::WaitingForInput,
            task_state: Some(TaskState::Review),
            agent: Live::None,
            last_error: Some(Some(message.clone())),
        };
        store_logged(&session_id, "the state change", self.store.transition(transition).await);
        // Detach last, so that a new launch cannot interleave with the writes above.
        self.detach(&execution);
        execution.checked(execution.life().gone(message));
        if let Some((content, turn_id)) = undelivered {
            tokio::spawn(self.clone().deliver_again(session_id, content, turn_id));
        } else {
            self.after_turn(&session_id);
        }
    }
}
