//! Startup reconciliation ("reconcile at boot", see docs/RESUME.md, 'Startup'): before
//! connections are accepted, turns a crash left open are closed as `interrupted` with a line
//! saying what became of them, and no agent of the previous run is left alive. Sessions keep
//! their states: they report `needs_resume` and resume lazily. The store performs the writes;
//! what they say is here.

use baton_protocol::{SessionEvent, StopReason};

use crate::agent::runtime;
use crate::store::{Store, StoreResult};

/// What a turn that was open when the previous server died gets appended.
pub fn interrupted_by_restart() -> Vec<SessionEvent> {
    vec![
        SessionEvent::TurnCompleted { stop_reason: StopReason::Interrupted, turn_id: None },
        SessionEvent::status(
            "The server restarted while the agent was working: that turn was interrupted. \
             The interrupted prompt will not be sent again by itself.",
        ),
    ]
}

/// What a turn of a hosted agent that could not be reattached gets appended.
pub fn interrupted_unattached() -> Vec<SessionEvent> {
    vec![
        SessionEvent::TurnCompleted { stop_reason: StopReason::Interrupted, turn_id: None },
        SessionEvent::status(
            "The server restarted while the agent was working and could not reattach to it: that turn \
             was interrupted. The interrupted prompt will not be sent again by itself.",
        ),
    ]
}

/// Reconciles the store after a restart, leaving alone the sessions in `keep` (hosted agents
/// about to be reattached), and kills what is left of the previous run's agents.
pub async fn at_startup(store: &Store, keep: Vec<String>) -> StoreResult<()> {
    let leftovers = store.reconcile_after_restart_keeping(keep, interrupted_by_restart()).await?;
    for leftover in leftovers {
        let killed = runtime::kill_leftover(leftover.pid, leftover.start_time, leftover.execution_id.as_deref());
        if killed > 0 {
            tracing::warn!(session_id = %leftover.session_id, pid = leftover.pid, killed, "killed an agent's processes left over by a previous run");
        }
    }
    Ok(())
}

/// A hosted session whose agent could not be reattached: its open turn is closed and its
/// executor record forgets the process; it resumes lazily like any agent of a previous run.
pub async fn unattached(store: &Store, session_id: &str) {
    if let Err(e) = store.reconcile_unattached(session_id, interrupted_unattached()).await {
        tracing::error!(%session_id, "cannot reconcile the session: {e}");
    }
}
