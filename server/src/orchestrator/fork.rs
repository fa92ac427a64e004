//! `task.session.fork`: a new session of the same task that starts from another session's
//! conversation so far. The journal of the fork starts with a copy of the source's
//! conversation (so its transcript shows the history), the fork records where it came from,
//! and its agent gets the context one of two ways: `session/fork` of the source's agent
//! session where the agent advertises it, otherwise a fresh agent session with the recorded
//! history injected into the first message (the same path as a resume that restored nothing).
//!
//! With another agent (`agent` of `task.session.fork`) the conversation is handed over: the
//! new session runs that agent, always on the injection path (no agent can copy another's
//! session), and leaves the source's chosen mode and options behind (they are the source
//! agent's).
//!
//! A session in the middle of a turn is not forked: its conversation is not settled yet (a
//! reply half streamed, a permission pending). The client is told to wait or cancel.

use std::sync::Arc;

use baton_protocol::{ErrorPayload, SessionForkResult};

use super::launch::{ForkFrom, LaunchIntent};
use super::{ApiResult, Orchestrator};
use crate::store::Forked;

impl Orchestrator {
    pub async fn fork_session(self: &Arc<Self>, source_id: &str, agent: Option<&str>) -> ApiResult<SessionForkResult> {
        if self.is_shutting_down() {
            return Err(ErrorPayload::unavailable("the server is shutting down"));
        }
        let task_id = self.store.get_session(source_id).await?.0.task_id;
        let _task = self.lock_task(&task_id).await;
        let (source_record, executor) = self.store.get_session(source_id).await?;
        // Handing the conversation to another agent: that agent runs the new session.
        let other = agent.filter(|a| *a != source_record.agent).map(str::to_string);
        self.known_agent(other.as_deref().unwrap_or(&source_record.agent), true)?;
        let session_id = format!("sess-{}", uuid::Uuid::new_v4().simple());
        let source = source_id.to_string();
        let from = source_record.agent.clone();
        let to = other.clone();
        let forked = self
            .store
            .create_fork(source_id.to_string(), session_id.clone(), other.clone(), move |at_seq| match to {
                Some(to) => format!(
                    "Handed over from session {source} ({from}) to {to}, with its conversation up to event {at_seq}."
                ),
                None => format!("Forked from session {source} (its conversation up to event {at_seq})."),
            })
            .await?;
        if forked == Forked::MidTurn {
            return Err(ErrorPayload::busy(format!(
                "session {source_id} is in the middle of a turn; fork it once the turn has ended (or cancel the turn)"
            )));
        }
        // The injection path reads the fork's own history file: it starts as the source's.
        if let Err(e) = self.history.copy(source_id, &session_id) {
            tracing::warn!(%session_id, source = source_id, "cannot copy the history for injection: {e}");
        }
        // The fork works the way its source was set to (mode, model...); another agent's modes
        // and options are its own.
        if other.is_none() {
            if let Err(e) = self.store.copy_chosen_options(source_id, &session_id).await {
                tracing::warn!(%session_id, source = source_id, "cannot copy the chosen options: {e}");
            }
        }
        let from = match other {
            Some(_) => ForkFrom::OtherAgent { from: source_record.agent.clone() },
            None => {
                ForkFrom::SameAgent { source_token: executor.and_then(|e| e.resume_token).filter(|t| !t.is_empty()) }
            }
        };
        tracing::info!(%session_id, source = source_id, "session forked");
        self.launch_locked(&session_id, LaunchIntent::Fork(from)).await?;
        let (session, executor) = self.store.get_session(&session_id).await?;
        Ok(SessionForkResult { session: self.session_info(&session, executor.as_ref()) })
    }
}
