//! Messages written while a turn runs: queued durably and sent one turn at a time when the
//! running turn ends well; held, with the reason shown, when it did not (docs/PROTOCOL.md,
//! 'Queued and steering messages'). `message.add` with `steer` cancels the running turn and
//! sends its message first.

use std::sync::Arc;

use baton_protocol::{ErrorPayload, MessageAddResult, MessageQueue, QueueResult, SessionState, StopReason};

use super::launch::new_turn_id;
use super::{ApiResult, Orchestrator};

/// What a held queue's reason ends with: what the user can do.
const HELD_HINT: &str = "the queued messages wait: send the next one (queue.release), or edit or remove them";

/// Why the queue does not go on after a turn that ended this way (None: it goes on). A
/// steering message goes on after the cancel made for it.
fn hold_reason(last: &StopReason, next_steers: bool) -> Option<String> {
    let why = match last {
        StopReason::EndTurn | StopReason::MaxTokens | StopReason::MaxTurnRequests => return None,
        StopReason::Cancelled if next_steers => return None,
        StopReason::Cancelled => "the last turn was cancelled".to_string(),
        StopReason::Interrupted => "the last turn was cut short (the agent exited or the server restarted)".to_string(),
        StopReason::Error => "the last turn failed".to_string(),
        StopReason::Refusal => "the agent refused the last turn".to_string(),
        StopReason::Other(other) => format!("the last turn ended with {other}"),
    };
    Some(format!("{why}; {HELD_HINT}"))
}

impl Orchestrator {
    /// `message.add` while a turn runs (or while earlier queued messages wait their turn): the
    /// message joins the queue; with `steer`, ahead of the others, and the running turn is
    /// cancelled for it.
    pub(super) async fn queue_message(
        self: &Arc<Self>,
        session_id: &str,
        content: &str,
        steer: bool,
    ) -> ApiResult<MessageAddResult> {
        let (queued, _) = match self.store.enqueue(session_id, content, steer).await {
            Ok(refusable) => refusable?,
            Err(e) if e.is_disk_full() => {
                return Err(ErrorPayload::unavailable(format!(
                    "a turn is running and your message could not be queued: {e}; nothing was sent, send it again \
                     once there is room"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if steer {
            // A turn that ended meanwhile has nothing to cancel: the queue sends the message.
            if let Err(e) = self.cancel(session_id).await {
                tracing::debug!(session_id, "no turn to cancel for a steering message: {}", e.message);
            }
        }
        // The turn may have ended between the look and the write: the queue goes on then.
        self.spawn_drain(session_id);
        Ok(MessageAddResult { message: None, queued: Some(queued), turn_id: None })
    }

    /// Whether a turn of the session is open, here or in its journal (a hosted agent's turn
    /// being reattached, a remote agent being reconnected to).
    pub(super) fn turn_running(&self, session_id: &str) -> bool {
        self.execution(session_id).is_some_and(|e| e.life().open_turn_number().is_some())
    }

    /// Sends the queue's next message if the session can take it now, in the background.
    pub(super) fn spawn_drain(self: &Arc<Self>, session_id: &str) {
        let this = self.clone();
        let session_id = session_id.to_string();
        tokio::spawn(async move {
            if let Err(e) = this.drain_queue(&session_id, false).await {
                tracing::warn!(%session_id, "the message queue could not go on: {}", e.message);
            }
        });
    }

    /// After a turn ended, at startup, when a message was queued or the queue released: the
    /// next queued message is sent as a turn when no turn runs and the last one ended well (or
    /// `release`); otherwise the queue is held with the reason. Nothing leaves the queue unless
    /// its turn is journaled.
    pub(super) async fn drain_queue(
        self: &Arc<Self>,
        session_id: &str,
        release: bool,
    ) -> ApiResult<Option<MessageAddResult>> {
        let _turn = self.queue_locks.lock(session_id).await;
        self.wait_recovered(session_id).await?;
        let queue = self.store.message_queue(session_id).await?;
        let Some(next) = queue.messages.first().cloned() else { return Ok(None) };
        if queue.held.is_some() && !release {
            return Ok(None);
        }
        let (session, _) = self.store.get_session(session_id).await?;
        if self.turn_running(session_id) || session.turn_open {
            // Its end goes on with the queue.
            return Ok(None);
        }
        if session.state.is_terminal() {
            let reason = format!("the session is {}; start a new session and send them there", session.state);
            self.store.hold_queue(session_id, &reason).await?;
            return Ok(None);
        }
        if !release {
            let last = self.store.last_turn_end(session_id).await?;
            if let Some(reason) = last.and_then(|last| hold_reason(&last, next.steer)) {
                self.store.hold_queue(session_id, &reason).await?;
                return Ok(None);
            }
        }
        let turn_id = new_turn_id();
        match self.handle_prompt_with_resume(session_id, &next.text, &turn_id, Some(&next.id)).await {
            Ok(message) => Ok(Some(MessageAddResult { message: Some(message), queued: None, turn_id: Some(turn_id) })),
            Err(e) => {
                // Still queued: the user sees why it waits and decides.
                let reason = format!("the next message could not be sent ({}); {HELD_HINT}", e.message);
                self.store.hold_queue(session_id, &reason).await?;
                Err(e)
            }
        }
    }

    /// `queue.list`.
    pub async fn queue_list(&self, session_id: &str) -> ApiResult<QueueResult> {
        let queue = self.store.message_queue(session_id).await?;
        Ok(queue_result(session_id, queue))
    }

    /// `queue.edit`.
    pub async fn queue_edit(&self, session_id: &str, id: &str, content: &str) -> ApiResult<QueueResult> {
        if content.trim().is_empty() {
            return Err(ErrorPayload::validation("content must not be empty"));
        }
        let queue = self.store.edit_queued(session_id, id, content).await??;
        Ok(queue_result(session_id, queue))
    }

    /// `queue.remove`.
    pub async fn queue_remove(&self, session_id: &str, id: &str) -> ApiResult<QueueResult> {
        let queue = self.store.remove_queued(session_id, id).await??;
        Ok(queue_result(session_id, queue))
    }

    /// `queue.release`: the hold is lifted and the next message sent when the session can take
    /// it now (else when its running turn ends).
    pub async fn queue_release(self: &Arc<Self>, session_id: &str) -> ApiResult<QueueResult> {
        let (session, _) = self.store.get_session(session_id).await?;
        if session.state.is_terminal() {
            return Err(ErrorPayload::conflict(format!(
                "session is {}; its queued messages cannot be sent (remove them, or send them in a new session)",
                session.state
            )));
        }
        let queue = self.store.message_queue(session_id).await?;
        if queue.messages.is_empty() {
            return Err(ErrorPayload::conflict("the session's queue is empty"));
        }
        self.store.release_queue(session_id).await?;
        self.drain_queue(session_id, true).await?;
        let queue = self.store.message_queue(session_id).await?;
        Ok(queue_result(session_id, queue))
    }

    /// At startup, once agents are reattached: every session with queued messages goes on (or
    /// is held with the reason: a turn the restart cut short).
    pub async fn resume_queues(self: &Arc<Self>) {
        match self.store.sessions_with_queue().await {
            Ok(sessions) => {
                for session_id in sessions {
                    self.spawn_drain(&session_id);
                }
            }
            Err(e) => tracing::error!("cannot read the message queues: {e}"),
        }
    }

    /// A turn ended (answered, cancelled, cut short): the queue goes on or is held.
    pub(super) fn after_turn(self: &Arc<Self>, session_id: &str) {
        self.spawn_drain(session_id);
    }
}

fn queue_result(session_id: &str, queue: MessageQueue) -> QueueResult {
    QueueResult { session_id: session_id.to_string(), queue }
}

/// Whether a message to a session in `state` with this queue waits in the queue: a turn runs, or
/// earlier messages wait for theirs (and are not held).
pub(super) fn joins_queue(turn_running: bool, queue: &MessageQueue, state: SessionState) -> bool {
    turn_running || (!queue.messages.is_empty() && queue.held.is_none() && !state.is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_goes_on_only_after_a_turn_that_ended_well() {
        assert_eq!(hold_reason(&StopReason::EndTurn, false), None);
        assert_eq!(hold_reason(&StopReason::MaxTokens, false), None);
        assert!(hold_reason(&StopReason::Error, false).is_some_and(|r| r.contains("failed")));
        assert!(hold_reason(&StopReason::Interrupted, true).is_some_and(|r| r.contains("cut short")));
        assert!(hold_reason(&StopReason::Cancelled, false).is_some_and(|r| r.contains("cancelled")));
        assert_eq!(hold_reason(&StopReason::Cancelled, true), None, "a steering message goes after its cancel");
    }

    #[test]
    fn a_message_waits_behind_queued_ones_unless_the_queue_is_held() {
        let queued = MessageQueue {
            messages: vec![baton_protocol::QueuedMessage {
                id: "q-1".into(),
                text: "next".into(),
                steer: false,
                created_at: String::new(),
                updated_at: String::new(),
            }],
            held: None,
        };
        assert!(joins_queue(true, &MessageQueue::default(), SessionState::Running));
        assert!(!joins_queue(false, &MessageQueue::default(), SessionState::WaitingForInput));
        assert!(joins_queue(false, &queued, SessionState::WaitingForInput));
        let held = MessageQueue { held: Some("failed".into()), ..queued };
        assert!(!joins_queue(false, &held, SessionState::WaitingForInput), "a held queue lets a message through");
    }
}
